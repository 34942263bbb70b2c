"""Key ranges: a table lakejoin fills is laid out by key, and a batch whose keys fall in one
range reads no file outside it (a file moved away while the batch runs is never missed)."""

from __future__ import annotations

import shutil
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from lakejoin.delta import key_ranges
from lakejoin.delta.key_ranges import KeyRange
from lakejoin.sink.entry import StateWrite, write_state
from lakejoin.sink.keyed_tables import ensure_keyed_table
from lakejoin.sink.merge_terms import KEEP, MergeCounts
from lakejoin.sink.stamp import Stamp

pytestmark = pytest.mark.delta


def file_ranges(spark, path: str, key: str) -> list[tuple[str, object, object]]:
    """(file, least key, greatest key) of each file of the table's current version."""
    from pyspark.sql import functions as F

    rows = (
        spark.read.format("delta")
        .load(path)
        .groupBy(F.col("_metadata.file_path").alias("file"))
        .agg(F.min(key).alias("lo"), F.max(key).alias("hi"))
        .orderBy("lo")
        .collect()
    )
    return [(r["file"], r["lo"], r["hi"]) for r in rows]


@contextmanager
def moved_away(file_uri: str, tmp_path: Path):
    """The file is gone while the block runs: reading it fails the block."""
    file = Path(file_uri.removeprefix("file:"))
    aside = tmp_path / "aside" / file.name
    aside.parent.mkdir(exist_ok=True)
    shutil.move(file, aside)
    try:
        yield
    finally:
        shutil.move(aside, file)


def rows_by_key(spark, path: str) -> dict:
    return {r["id"]: r["v"] for r in spark.read.format("delta").load(path).collect()}


def merge_by_key(
    spark, path: str, source, key: list[str], columns: list[str], *, full: bool, stamp=None
) -> MergeCounts:
    """`source` (its `KEEP` false: the key deleted) written as a state table's rows are, by the
    sink's entry (sink/entry.write_state), stamped with `stamp` when given."""
    schema = source.drop(KEEP).schema
    return write_state(
        spark, StateWrite(path, tuple(key), tuple(columns), source, full, schema), stamp
    ).counts


def filled(spark, tmp_path: Path, monkeypatch) -> str:
    """A keyed table of ids 0..999 (v = id % 7), filled by a full write: 10 files of 100 ids."""
    from pyspark.sql import functions as F

    monkeypatch.setattr(key_ranges, "ROWS_PER_FILE", 100)
    path = str(tmp_path / "table")
    rows = spark.range(0, 1000).select("id", (F.col("id") % 7).alias("v"))
    ensure_keyed_table(spark, path, rows.schema)
    counts = merge_by_key(spark, path, rows.withColumn(KEEP, F.lit(True)), ["id"], ["id", "v"], full=True)
    assert counts.inserted == 1000
    return path


def narrow_batch(spark):
    """Recent keys, as CDC changes them: ids 910..939 updated to v = 99, except id 911 deleted;
    ids 1000..1004 inserted."""
    from pyspark.sql import functions as F

    updates = spark.range(910, 940).select(
        "id", F.lit(99).cast("long").alias("v"), (F.col("id") != 911).alias(KEEP)
    )
    inserts = spark.range(1000, 1005).select("id", F.lit(5).cast("long").alias("v"), F.lit(True).alias(KEEP))
    return updates.unionByName(inserts)


def test_a_full_write_into_an_empty_table_lays_files_out_in_disjoint_key_ranges(spark, tmp_path, monkeypatch):
    path = filled(spark, tmp_path, monkeypatch)

    ranges = file_ranges(spark, path, "id")
    assert [(lo, hi) for _, lo, hi in ranges] == [(i * 100, i * 100 + 99) for i in range(10)]
    assert rows_by_key(spark, path) == {i: i % 7 for i in range(1000)}


def full_rewrite(spark):
    """A full recompute of the filled table: ids 100..109 now v = 99, ids 990..999 gone, ids
    1000..1004 new (v = 5), every other row as it was."""
    from pyspark.sql import functions as F

    v = F.when(F.col("id").between(100, 109), F.lit(99)).when(F.col("id") >= 1000, F.lit(5))
    return (
        spark.range(0, 1005)
        .where(~F.col("id").between(990, 999))
        .select("id", v.otherwise(F.col("id") % 7).cast("long").alias("v"), F.lit(True).alias(KEEP))
    )


def full_rewrite_rows() -> dict:
    expected = {i: i % 7 for i in range(990)} | {i: 99 for i in range(100, 110)}
    return expected | {i: 5 for i in range(1000, 1005)}


def change_rows(spark, path: str, since: int) -> list[tuple[int, str]]:
    from pyspark.sql import functions as F

    feed = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", since)
    feed = feed.load(path)
    rows = feed.where(F.col("_change_type") != "update_preimage").select("id", "_change_type").collect()
    return sorted((r["id"], r["_change_type"]) for r in rows)


def test_a_full_write_changes_only_the_rows_that_differ(spark, tmp_path, monkeypatch):
    """A full recompute is compared with the table first: the change feed then holds the
    updated, deleted and inserted keys and nothing of the 980 rows that stayed the same."""
    from lakejoin.delta.sources import latest_version

    path = filled(spark, tmp_path, monkeypatch)
    filled_at = latest_version(spark, path, role=path)

    counts = merge_by_key(spark, path, full_rewrite(spark), ["id"], ["id", "v"], full=True)

    assert (counts.inserted, counts.updated, counts.deleted, counts.applied) == (5, 10, 10, True)
    assert rows_by_key(spark, path) == full_rewrite_rows()
    expected = (
        [(i, "update_postimage") for i in range(100, 110)]
        + [(i, "delete") for i in range(990, 1000)]
        + [(i, "insert") for i in range(1000, 1005)]
    )
    assert change_rows(spark, path, filled_at + 1) == sorted(expected)


def test_a_write_without_a_batch_commit_is_one_merge_and_applies_once(spark, tmp_path, monkeypatch):
    """A write without a batch commit (a state table) is one MERGE whatever its size: a kept
    state costs one commit a batch (issue 23), so no crash can fall between two of its commits.
    Repeated with the same stamp, it finds nothing to write and commits nothing."""
    from deltalake import DeltaTable

    from lakejoin.delta.sources import latest_version

    path = filled(spark, tmp_path, monkeypatch)
    before = latest_version(spark, path, role=path)

    stamp = Stamp("test.full", 7)
    first = merge_by_key(spark, path, full_rewrite(spark), ["id"], ["id", "v"], full=True, stamp=stamp)
    written = latest_version(spark, path, role=path)
    again = merge_by_key(spark, path, full_rewrite(spark), ["id"], ["id", "v"], full=True, stamp=stamp)

    assert written == before + 1
    assert DeltaTable(path).history(1)[0]["operation"] == "MERGE"
    assert DeltaTable(path).transaction_version("test.full") == 7
    assert (first.inserted, first.updated, first.deleted, first.applied) == (5, 10, 10, True)
    assert (again.inserted, again.updated, again.deleted) == (0, 0, 0)
    assert latest_version(spark, path, role=path) == written
    assert rows_by_key(spark, path) == full_rewrite_rows()


def test_a_batch_in_one_key_range_reads_no_file_outside_it(spark, tmp_path, monkeypatch):
    path = filled(spark, tmp_path, monkeypatch)
    far = file_ranges(spark, path, "id")[5][0]  # ids 500..599

    with moved_away(far, tmp_path):
        counts = merge_by_key(spark, path, narrow_batch(spark), ["id"], ["id", "v"], full=False)

    assert (counts.inserted, counts.updated, counts.deleted) == (5, 29, 1)
    expected = (
        {i: i % 7 for i in range(1000)} | {i: 99 for i in range(910, 940)} | {i: 5 for i in range(1000, 1005)}
    )
    del expected[911]
    assert rows_by_key(spark, path) == expected


def test_a_batch_of_a_few_scattered_keys_is_one_merge_that_reads_only_their_files(
    spark, tmp_path, monkeypatch
):
    """Keys 5, 505 and 1000 span the whole key range, yet the MERGE lists them, so Delta reads
    only the files that hold them; its one commit updates, deletes and inserts, and the change
    feed holds those three keys only."""
    from lakejoin.delta.sources import latest_version

    path = filled(spark, tmp_path, monkeypatch)
    before = latest_version(spark, path, role=path)
    batch = spark.createDataFrame(
        [(5, 99, True), (505, 0, False), (1000, 1, True)], "id long, v long, _lj_keep boolean"
    )
    far = file_ranges(spark, path, "id")[3][0]  # ids 300..399

    with moved_away(far, tmp_path):
        counts = merge_by_key(spark, path, batch, ["id"], ["id", "v"], full=False)

    assert (counts.inserted, counts.updated, counts.deleted, counts.keys) == (1, 1, 1, 3)
    assert latest_version(spark, path, role=path) == before + 1
    assert change_rows(spark, path, before + 1) == [
        (5, "update_postimage"),
        (505, "delete"),
        (1000, "insert"),
    ]


def test_without_key_ranges_the_same_batch_reads_every_file(spark, tmp_path, monkeypatch):
    """The converse of the test above, so that test's moved file proves something."""
    path = filled(spark, tmp_path, monkeypatch)
    far = file_ranges(spark, path, "id")[5][0]
    spark.conf.set(key_ranges.ENABLED, "false")
    try:
        with moved_away(far, tmp_path), pytest.raises(Exception, match="(?i)not (exist|found)|FileNotFound"):
            merge_by_key(spark, path, narrow_batch(spark), ["id"], ["id", "v"], full=False)
    finally:
        spark.conf.unset(key_ranges.ENABLED)


@pytest.mark.parametrize(
    ("column_type", "value", "bounded"),
    [
        ("bigint", 3, True),
        ("string", "'k3'", True),
        ("date", "date'2026-01-03'", True),
        ("timestamp", "timestamp'2026-01-03 01:30:00'", False),
        ("double", "3.5D", False),
    ],
)
def test_key_ranges_are_taken_only_for_types_whose_values_round_trip_exactly(
    spark, column_type, value, bounded
):
    frame = spark.sql(f"SELECT CAST({value} AS {column_type}) AS k")
    bounds = KeyRange.of(frame, ("k",))
    assert (bounds.bounds != ()) is bounded
    assert frame.where(bounds.covers()).count() == 1


def test_an_fk_join_batch_of_recent_products_reads_no_old_file_of_source_or_output(lake, monkeypatch):
    """Products p000..p399 in four files of 100, as CDC appends them; a batch updates and deletes
    recent ones and inserts new ones. With the oldest file of the source and of the output moved
    away, the batch still runs, and its output is the recomputation (fk_join keeps no routing
    index, and a batch of left changes alone reads no route)."""
    from tests.lakehouse import MERCHANTS, PRODUCTS

    monkeypatch.setattr(key_ranges, "ROWS_PER_FILE", 100)
    lake.create("merchants", MERCHANTS, [("m1", "Acme", "a.png"), ("m2", "Bolt", "b.png")])
    lake.create("products", PRODUCTS, [])
    products = [(f"p{i:03d}", f"item {i}", float(i), f"m{1 + i % 2}") for i in range(400)]
    (
        lake.spark.createDataFrame(products, PRODUCTS)
        .orderBy("product_id")
        .coalesce(1)
        .write.format("delta")
        .mode("append")
        .option("maxRecordsPerFile", 100)
        .save(lake.path("products"))
    )
    # The audit reads every file on purpose (docs/audit.md): this test is about the batch's.
    spec = lake.spec()  # audit: off
    lake.run(spec)
    lake.upsert("products", "product_id", [(f"p{i:03d}", "renamed", 1.0, "m2") for i in range(390, 405)])
    lake.delete("products", "product_id", ["p395"])

    oldest = [
        file_ranges(lake.spark, path, key)[0][0]
        for path, key in [
            (lake.path("products"), "product_id"),
            (spec.views["display_products"].path, "product_id"),
        ]
    ]
    with ExitStack() as stack:
        for file in oldest:
            stack.enter_context(moved_away(file, lake.root))
        summary = lake.run(spec)

    assert summary.inserted == 5 and summary.deleted == 1
    assert lake.output(spec) == lake.expected(spec)
