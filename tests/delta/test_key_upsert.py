"""lakejoin's one-commit upsert (sink/key_upsert.py) on real Delta tables: the same table and the
same change feed as Delta's own MERGE, a scan of the key column alone, Delta's conflict checks,
and the tables' upkeep (OPTIMIZE, VACUUM, checkpoints, delta-rs reads) afterwards."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.histories import examples

pytestmark = pytest.mark.delta

COLUMNS = ["id", "name", "price", "tags"]
SCHEMA = "id long, name string, price double, tags array<string>"
KEYS = range(30)
NAMES, PRICES = ["a", "b", "c"], [1.5, 2.0, None]


def _schema():
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string(SCHEMA)


def create(spark, path: str, rows: dict, files: int = 3) -> None:
    """An output table as lakejoin creates one (CDF and deletion vectors on), filled with
    `rows` (key -> (name, price, tags)) in `files` files of key ranges."""
    from lakejoin.sink.keyed_tables import ensure_keyed_table

    ensure_keyed_table(spark, path, _schema())
    if rows:
        frame = spark.createDataFrame([(k, *v) for k, v in sorted(rows.items())], _schema())
        frame.repartitionByRange(files, "id").write.format("delta").mode("append").save(path)


def change_rows(spark, before: dict, after: dict):
    """The change rows that take a table from `before` to `after`, for the keys whose row differs."""
    rows = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if old is None:
            rows.append((key, *new, "insert"))
        elif new is None:
            rows.append((key, *old, "delete"))
        else:
            rows += [(key, *old, "update_preimage"), (key, *new, "update_postimage")]
    return spark.createDataFrame(rows, SCHEMA + ", _change_type string")


def merge_reference(spark, path: str, before: dict, after: dict) -> None:
    """Delta's own MERGE of the changed keys' new rows, deleting the keys that went."""
    from delta.tables import DeltaTable

    changed = [k for k in set(before) | set(after) if before.get(k) != after.get(k)]
    source = spark.createDataFrame(
        [(k, *(after.get(k) or (None, None, None)), k in after) for k in changed],
        SCHEMA + ", keep boolean",
    )
    values = {c: f"s.{c}" for c in COLUMNS}
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedDelete("NOT s.keep")
        .whenMatchedUpdate(set=values)
        .whenNotMatchedInsert(condition="s.keep", values=values)
        .execute()
    )


def _row(r) -> tuple:
    return tuple(tuple(v) if isinstance(v, list) else v for v in r)


def table_rows(spark, path: str) -> Counter:
    return Counter(_row(r) for r in spark.read.format("delta").load(path).select(*COLUMNS).collect())


def feed_rows(spark, path: str, version: int) -> Counter:
    feed = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", version)
        .option("endingVersion", version)
        .load(path)
    )
    return Counter(_row(r) for r in feed.select(*COLUMNS, "_change_type").collect())


def upsert(spark, path: str, before: dict, after: dict, stamp=None, **kwargs):
    from lakejoin.sink.key_upsert import upsert as write

    return write(spark, path, change_rows(spark, before, after), ["id"], COLUMNS, stamp, **kwargs)


def version(path: str) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(path).version())


values = st.tuples(
    st.sampled_from(NAMES), st.sampled_from(PRICES), st.lists(st.sampled_from(NAMES), max_size=2)
).map(lambda v: (v[0], v[1], v[2]))
states = st.dictionaries(st.sampled_from(KEYS), values, min_size=1, max_size=len(KEYS))


@examples(3)
@given(first=states, later=st.lists(states, min_size=3, max_size=3))
def test_the_upsert_leaves_what_delta_merge_leaves(spark, tmp_path_factory, first, later):
    """Random histories of updates, inserts and deletes, keys hit again in files that already
    have deletion vectors: after each batch the table and that version's change feed equal a
    Delta MERGE's on a copy (as multisets)."""
    base = tmp_path_factory.mktemp("upsert")
    ours, theirs = str(base / "ours"), str(base / "theirs")
    create(spark, ours, first)
    create(spark, theirs, first)
    state = first
    for after in later:
        counts = upsert(spark, ours, state, after)
        assert counts is not None, "a lakejoin output table takes the upsert"
        if after == state:  # no change row: outside a batch commit, no commit at all
            assert not counts.applied and version(ours) == 1
            continue
        merge_reference(spark, theirs, state, after)
        assert counts.version == version(ours)
        assert (
            table_rows(spark, ours)
            == table_rows(spark, theirs)
            == Counter((k, *v[:2], tuple(v[2])) for k, v in after.items())
        )
        assert feed_rows(spark, ours, version(ours)) == feed_rows(spark, theirs, version(theirs))
        changed = [k for k in set(state) | set(after) if state.get(k) != after.get(k)]
        assert (counts.inserted, counts.updated, counts.deleted) == (
            sum(k not in state for k in changed),
            sum(k in state and k in after for k in changed),
            sum(k not in after for k in changed),
        )
        state = after


def _garble_payload(path: str) -> dict[Path, bytes]:
    """Overwrite every non-key column chunk of every data file with random bytes (the files keep
    their size and footer, so a key-only read still works); the files' old bytes, and their
    Hadoop checksum files' (taken away: Hadoop would refuse every read of the file)."""
    import pyarrow.parquet as pq

    kept = {}
    for crc in Path(path).glob(".*.parquet.crc"):
        kept[crc] = crc.read_bytes()
        crc.unlink()
    for file in Path(path).glob("*.parquet"):
        data = bytearray(file.read_bytes())
        kept[file] = bytes(data)
        meta = pq.ParquetFile(file).metadata
        for group in range(meta.num_row_groups):
            for index in range(meta.num_columns):
                chunk = meta.row_group(group).column(index)
                if chunk.path_in_schema == "id":
                    continue
                start = chunk.data_page_offset
                if chunk.has_dictionary_page and chunk.dictionary_page_offset:
                    start = min(start, chunk.dictionary_page_offset)
                data[start : start + chunk.total_compressed_size] = os.urandom(chunk.total_compressed_size)
        file.write_bytes(bytes(data))
    return kept


def test_the_only_read_of_the_table_is_its_key_column(spark, tmp_path):
    """Every other column of every data file is garbage while the upsert runs: it still commits
    the right rows (a read of any other column would fail on the garbled pages)."""
    path = str(tmp_path / "out")
    before = {k: ("a", 1.0, ["x"]) for k in KEYS}
    create(spark, path, before)
    after = dict(before)
    after.update({1: ("b", 2.0, []), 15: ("c", None, ["y"]), 29: ("b", 3.0, ["z"]), 40: ("a", 1.0, [])})
    del after[7], after[20]
    kept = _garble_payload(path)
    with pytest.raises(Exception, match="(?i)parquet|decompress|page|corrupt|read"):
        spark.read.format("delta").load(path).select("name").collect()  # the garbage is real
    try:
        counts = upsert(spark, path, before, after)
    finally:
        for file, data in kept.items():
            file.write_bytes(data)
    assert counts is not None and (counts.inserted, counts.updated, counts.deleted) == (1, 3, 2)
    assert table_rows(spark, path) == Counter((k, *v[:2], tuple(v[2])) for k, v in after.items())


def test_files_outside_the_old_keys_ranges_are_not_read(spark, tmp_path):
    """Delta's file pruning by the old keys' ranges: with the files that hold none of the updated
    or deleted keys moved away, the upsert still commits."""
    path = str(tmp_path / "out")
    before = {k: ("a", 1.0, []) for k in KEYS}
    create(spark, path, before, files=3)
    holding = {
        f: {r.id for r in spark.read.parquet(str(f)).select("id").collect()}
        for f in Path(path).glob("*.parquet")
    }
    after = {**before, 2: ("b", 1.0, []), 3: ("c", 1.0, []), 100: ("a", 1.0, [])}
    away = [f for f, ids in holding.items() if not ids & {2, 3}]
    assert len(away) == 2
    for f in away:
        f.rename(f.with_suffix(".away"))
    try:
        counts = upsert(spark, path, before, after)
    finally:
        for f in away:
            f.with_suffix(".away").rename(f)
    assert counts is not None and (counts.inserted, counts.updated) == (1, 2)
    assert table_rows(spark, path) == Counter((k, *v[:2], tuple(v[2])) for k, v in after.items())


def test_a_table_with_row_tracking_is_declined_and_left_alone(spark, tmp_path):
    """Row tracking would give updated rows new ids: the upsert writes nothing and says why; the
    caller's public MERGE then writes the batch (tests/scenarios for the whole batch)."""
    path = str(tmp_path / "out")
    before = {k: ("a", 1.0, []) for k in range(5)}
    create(spark, path, before)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    was, notes = version(path), []
    assert upsert(spark, path, before, {**before, 1: ("b", 1.0, [])}, note=notes.append) is None
    assert version(path) == was
    assert len(notes) == 1 and "row ids" in notes[0] and "public MERGE" in notes[0]


def test_an_insert_of_a_key_the_table_holds_is_declined(spark, tmp_path):
    """A batch of inserts only is checked too: the table holding one of its keys (someone wrote
    it there) means the batch's old rows are not the table's, and the public MERGE writes it."""
    path = str(tmp_path / "out")
    held = {k: ("a", 1.0, []) for k in range(5)}
    create(spark, path, held)
    notes: list[str] = []
    thought = {k: v for k, v in held.items() if k != 3}  # the batch believes key 3 absent
    assert upsert(spark, path, thought, held, note=notes.append) is None
    assert version(path) == 1
    assert "1 keys the batch inserts" in notes[0]


def test_classes_not_found_decline_the_upsert(spark, tmp_path, monkeypatch):
    """A Delta without the members the upsert calls (another version) declines it, once checked."""
    from lakejoin.sink import key_upsert_jvm

    path = str(tmp_path / "out")
    before = {k: ("a", 1.0, []) for k in range(5)}
    create(spark, path, before)
    monkeypatch.setattr(key_upsert_jvm, "_CHECKED", [])
    monkeypatch.setitem(key_upsert_jvm.EXPECTED, "org.apache.spark.sql.delta.NoSuchWriter", set())
    notes: list[str] = []
    assert upsert(spark, path, before, {**before, 1: ("b", 1.0, [])}, note=notes.append) is None
    assert "has no class org.apache.spark.sql.delta.NoSuchWriter" in notes[0]
    assert version(path) == 1


@pytest.mark.parametrize("other", ["append", "delete", "optimize"])
def test_a_commit_during_the_upsert_makes_it_fail_cleanly(spark, tmp_path, monkeypatch, other):
    """Delta's conflict checks stay on: another writer's commit between the upsert's read and its
    commit makes it fail with a Concurrent... error (the batch's ConcurrentBatchError), nothing
    of it committed; run again, it commits on top of the other writer's."""
    from delta.tables import DeltaTable

    from lakejoin.sink import key_upsert
    from lakejoin.sink.conflicts import batch_error as _concurrent

    path = str(tmp_path / "out")
    before = {k: ("a", 1.0, []) for k in KEYS}
    create(spark, path, before, files=3)
    spark.createDataFrame([(100 + k, "a", 1.0, []) for k in range(3)], _schema()).write.format("delta").mode(
        "append"
    ).save(path)
    before.update({100 + k: ("a", 1.0, []) for k in range(3)})
    written = key_upsert._write_rows
    meanwhile = {
        "append": lambda: (
            spark.createDataFrame([(200, "z", 9.0, [])], _schema())
            .write.format("delta")
            .mode("append")
            .save(path)
        ),
        "delete": lambda: DeltaTable.forPath(spark, path).delete("id = 25"),
        "optimize": lambda: DeltaTable.forPath(spark, path).optimize().executeCompaction(),
    }[other]

    def racing(*args):
        done = written(*args)
        meanwhile()
        return done

    monkeypatch.setattr(key_upsert, "_write_rows", racing)
    after = {**before, 1: ("b", 1.0, []), 101: ("c", 1.0, []), 50: ("a", 2.0, [])}
    with pytest.raises(key_upsert.ConcurrentCommitError) as raised:
        upsert(spark, path, before, after)
    batch_error = _concurrent(raised.value, 3, where="view 'v' output")
    assert batch_error is not None and "run the view again" in batch_error.fix
    monkeypatch.setattr(key_upsert, "_write_rows", written)
    expected = dict(before)
    if other == "append":
        expected[200] = ("z", 9.0, [])
    if other == "delete":
        del expected[25]
    assert table_rows(spark, path) == Counter((k, *v[:2], tuple(v[2])) for k, v in expected.items())
    final = {**expected, **{k: after[k] for k in (1, 101, 50)}}
    assert upsert(spark, path, expected, final) is not None
    assert table_rows(spark, path) == Counter((k, *v[:2], tuple(v[2])) for k, v in final.items())


def test_one_batch_commits_once(spark, tmp_path):
    """The commit carries its stamp's (app, version): a second run of the same write finds it
    committed and writes nothing."""
    from lakejoin.sink.stamp import Stamp

    path = str(tmp_path / "out")
    before = {k: ("a", 1.0, []) for k in range(5)}
    create(spark, path, before)
    after = {**before, 9: ("b", 1.0, [])}
    stamp = Stamp("lakejoin.test.state", 4)
    first = upsert(spark, path, before, after, stamp)
    again = upsert(spark, path, before, after, stamp)
    assert first is not None and first.applied and first.inserted == 1
    assert again is not None and not again.applied
    assert version(path) == 2
    assert table_rows(spark, path) == Counter((k, *v[:2], tuple(v[2])) for k, v in after.items())


def test_tables_written_this_way_keep_working(spark, tmp_path):
    """Checkpoints, OPTIMIZE and VACUUM on a table the upsert wrote, and delta-rs reads of it
    (lakejoin's status and driver lookups read outputs with delta-rs)."""
    from delta.tables import DeltaTable
    from deltalake import DeltaTable as RsTable

    path = str(tmp_path / "out")
    state = {k: ("a", 1.0, ["x"]) for k in KEYS}
    create(spark, path, state)
    for step in range(3):
        after = {k: v for k, v in state.items() if k % 7 != step}
        after.update({k: ("b", float(step), []) for k in range(step, 40, 5)})
        assert upsert(spark, path, state, after) is not None
        state = after
    written = version(path)
    expected = Counter((k, *v[:2], tuple(v[2])) for k, v in state.items())
    rs = RsTable(path)
    import pyarrow as pa

    rs_feed = pa.table(rs.load_cdf(starting_version=written, ending_version=written).read_all()).to_pylist()
    assert Counter(
        (r["id"], r["name"], r["price"], tuple(r["tags"] or ()), r["_change_type"]) for r in rs_feed
    ) == feed_rows(spark, path, written)
    rs.create_checkpoint()
    DeltaTable.forPath(spark, path).optimize().executeCompaction()
    DeltaTable.forPath(spark, path).vacuum(0)
    assert table_rows(spark, path) == expected
    from deltalake import QueryBuilder

    query = QueryBuilder().register("t", RsTable(path)).execute("SELECT * FROM t")
    rows = pa.table(query.read_all()).to_pylist()
    assert Counter((r["id"], r["name"], r["price"], tuple(r["tags"] or ())) for r in rows) == expected
