"""Driver lookups (lookups.py) as truth tables on small Delta tables delta-rs writes: which rows
a key list selects, at which version, and what a driver lookup refuses. No Spark, no JVM."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakejoin.delta import lookups

pytestmark = pytest.mark.unit


@pytest.fixture
def table(tmp_path):
    """v0: keys 1-6 (one held twice), v1: key 7 appended."""
    path = str(tmp_path / "t")
    names = ["a", "o'brien", "c", "d", "e", "e2", "f"]
    write_deltalake(path, pa.table({"k": [1, 2, 3, 4, 5, 5], "name": names[:6]}))
    write_deltalake(path, pa.table({"k": [7], "name": ["g"]}), mode="append")
    return path


def keys_and_names(rows: pa.Table | None) -> list[tuple[int, str]]:
    assert rows is not None
    return sorted(zip(rows["k"].to_pylist(), rows["name"].to_pylist(), strict=True))


def keyed(*values):
    """Keys of one column, as lookups take them."""
    return [(v,) for v in values]


def test_a_key_list_selects_its_rows_at_the_pinned_version(table):
    assert keys_and_names(lookups.read_keys(table, 0, ("k",), keyed(2, 4, 7))) == [(2, "o'brien"), (4, "d")]
    assert keys_and_names(lookups.read_keys(table, 1, ("k",), keyed(2, 4, 7))) == [
        (2, "o'brien"),
        (4, "d"),
        (7, "g"),
    ]
    assert lookups.read_keys(table, 1, ("k",), []).num_rows == 0
    assert lookups.read_keys(table, 1, ("k",), keyed(100)).num_rows == 0


def test_string_keys_with_quotes_are_literals_not_sql(table):
    rows = lookups.read_keys(table, 1, ("name",), keyed("o'brien", "x' OR '1'='1"), ["k"])
    assert rows["k"].to_pylist() == [2]


def test_duplicates_name_the_keys_held_twice_and_without_drops_listed_keys(table):
    rows = lookups.read_keys(table, 1, ("k",), keyed(1, 5, 7))
    assert lookups.duplicates(rows, ("k",)) == [((5,), 2)]
    assert sorted(lookups.without(rows, ("k",), keyed(5))["k"].to_pylist()) == [1, 7]


@pytest.fixture
def pairs(tmp_path):
    """A table keyed by (tenant, id): one id in two tenants, a tenant with a quote in it, and
    the key ('b', 2) held twice."""
    path = str(tmp_path / "pairs")
    write_deltalake(
        path,
        pa.table(
            {
                "tenant": ["a", "a", "b", "o'q", "b", "b"],
                "id": [1, 2, 1, 2, 2, 2],
                "name": ["a1", "a2", "b1", "q2", "b2", "b2x"],
            }
        ),
    )
    return path


def test_a_key_of_two_columns_selects_its_rows_by_both(pairs):
    """(a, 1) and (o'q, 2) select their rows, not (a, 2) or (b, 1), which share one column each
    with a listed key; a part of a key is a literal, never SQL."""
    rows = lookups.read_keys(pairs, 0, ("tenant", "id"), [("a", 1), ("o'q", 2), ("x') OR ('1'='1", 3)])
    assert sorted(rows["name"].to_pylist()) == ["a1", "q2"]
    assert lookups.key_tuples(rows.sort_by("name"), ("tenant", "id")) == [("a", 1), ("o'q", 2)]


def test_duplicates_and_without_take_keys_of_two_columns(pairs):
    rows = lookups.read_keys(pairs, 0, ("tenant", "id"), [("a", 1), ("b", 2), ("b", 1)])
    assert lookups.duplicates(rows, ("tenant", "id")) == [(("b", 2), 2)]
    kept = lookups.without(rows, ("tenant", "id"), [("b", 2), ("a", 2)])
    assert sorted(lookups.key_tuples(kept, ("tenant", "id"))) == [("a", 1), ("b", 1)]


def test_a_key_of_a_date_and_an_id_selects_its_row(tmp_path):
    """A tuple IN-list holds bare literals only: DATE '...' in one failed the lookup ("Only
    identifiers and literals are supported in tuples"); the date's text is read as a date."""
    path = str(tmp_path / "days")
    days = [datetime.date(2026, 1, 2), datetime.date(2026, 1, 2), datetime.date(2026, 1, 3)]
    write_deltalake(path, pa.table({"day": days, "id": [1, 2, 1], "name": ["a", "b", "c"]}))

    rows = lookups.read_keys(path, 0, ("day", "id"), [(datetime.date(2026, 1, 2), 2), (days[2], 1)])

    assert rows is not None and sorted(rows["name"].to_pylist()) == ["b", "c"]


def test_lists_of_struct_elements_with_a_date_field_are_routed_on_the_driver(tmp_path):
    from lakejoin.delta import routing

    path = str(tmp_path / "visits")
    day = datetime.date(2026, 1, 2)
    element = pa.struct([("day", pa.date32()), ("id", pa.int64())])
    items = pa.array([[{"day": day, "id": 1}], [{"day": day, "id": 2}]], type=pa.list_(element))
    write_deltalake(path, pa.table({"k": [1, 2], "items": items}))

    found = routing.holding_on_driver(
        path, 0, [(day, 2)], "items", most=100, left_key=("k",), element_fields=("day", "id")
    )

    assert found == [(2,)]


def test_the_changes_of_a_decimal_key_of_17_digits_are_its_own(tmp_path):
    """`lakejoin explain`'s change rows of a decimal(38, 2) key, alone or part of a key of two
    columns: as a bare number DataFusion read it as a Float64 and matched nothing (issue 51)."""
    import decimal

    from deltalake import DeltaTable

    d = decimal.Decimal
    path = str(tmp_path / "money")
    keys = pa.array([d("12345678901234567.89"), d("12345678901234567.88")], pa.decimal128(38, 2))
    cdf = {"delta.enableChangeDataFeed": "true"}
    write_deltalake(path, pa.table({"t": ["a", "a"], "k": keys, "v": ["x", "y"]}), configuration=cdf)
    DeltaTable(path).update({"v": "'z'"}, predicate="v = 'x'")

    def changes(key: tuple[str, ...], value: tuple) -> list[tuple[int, str, str]]:
        rows = lookups.read_key_changes(path, 0, 1, key, [value])
        return [(r["_commit_version"], r["_change_type"], r["v"]) for r in rows]

    wanted = [(0, "insert", "x"), (1, "update_preimage", "x"), (1, "update_postimage", "z")]
    assert changes(("k",), (d("12345678901234567.89"),)) == wanted
    assert changes(("t", "k"), ("a", d("12345678901234567.89"))) == wanted


def test_only_exact_literals_are_looked_up_on_the_driver():
    assert lookups.literal_keys([(1,), ("a",), (datetime.date(2026, 1, 2),)])
    assert lookups.literal_keys([(1, "a")])
    assert not lookups.literal_keys([(1.5,)])
    assert not lookups.literal_keys([(True,)])
    assert not lookups.literal_keys([(datetime.datetime(2026, 1, 2, 3),)])
    assert not lookups.literal_keys([(1, 1.5)])  # any part that is not exact


def test_a_table_with_column_mapping_is_left_to_spark(tmp_path, table):
    assert lookups.read_keys(table, 1, ("k",), keyed(1)) is not None
    mapped = str(tmp_path / "mapped")
    write_deltalake(
        mapped,
        pa.table({"k": [1]}),
        configuration={
            "delta.columnMapping.mode": "name",
            "delta.minReaderVersion": "2",
            "delta.minWriterVersion": "5",
        },
    )
    assert lookups.read_keys(mapped, 0, ("k",), keyed(1)) is None


def test_a_long_key_list_is_read_in_chunks(tmp_path):
    """40,000 listed keys: one IN list that long overflowed DataFusion's planner stack and killed
    the process (session 32); the lookup reads it a chunk at a time and finds every key."""
    path = str(tmp_path / "long")
    write_deltalake(path, pa.table({"k": list(range(50_000)), "v": [k % 7 for k in range(50_000)]}))
    wanted = list(range(0, 80_000, 2))  # 40,000 keys, 25,000 of them in the table
    rows = lookups.read_keys(path, 0, ("k",), keyed(*wanted))
    assert rows is not None
    assert sorted(rows["k"].to_pylist()) == list(range(0, 50_000, 2))


def test_a_reach_past_the_drivers_limit_is_not_read_whole(tmp_path):
    """The routes of a popular right key (issue 52, item 8): past `most` left rows the driver
    stops reading (the reach is then Spark's to find), in every chunk of keys."""
    from lakejoin.delta import routing

    path = str(tmp_path / "facts")
    write_deltalake(path, pa.table({"id": list(range(12_000)), "fk": [k % 6_000 for k in range(12_000)]}))
    changed = keyed(*range(5_500))  # two chunks of keys, 11,000 rows reach them
    assert routing.routed_on_driver(path, 0, changed, ("fk",), most=10_999, left_key=("id",)) is None
    reached = routing.routed_on_driver(path, 0, changed, ("fk",), most=11_000, left_key=("id",))
    assert reached is not None and len(reached) == 11_000
    rows = lookups.read_keys(path, 0, ("fk",), changed, ["id"], most_rows=100)
    assert rows is not None and rows.num_rows == 101  # one past the limit: enough to know
    few = routing.routed_on_driver(path, 0, keyed(0, 1), ("fk",), most=4, left_key=("id",))
    assert sorted(few or []) == [(0,), (1,), (6_000,), (6_001,)]


@pytest.mark.parametrize(
    ("count", "most", "takes"),
    [
        (None, 100, False),  # not counted
        (0, 100, True),  # no key: an empty lookup, no collect
        (100, 100, True),
        (101, 100, False),
        (0, 0, False),  # driver lookups off
        (5, 0, False),
    ],
)
def test_a_driver_lookup_takes_a_counted_frame_within_its_maximum(count, most, takes):
    assert lookups.takes(count, most) is takes


def test_lists_of_struct_elements_are_routed_on_the_driver_by_every_field(tmp_path):
    """`routing.holding_on_driver` for a composite right key: the lists holding ('acme', 1) are
    found, not those holding (o'neil, 1) or ('acme', 2), which share one field with it."""
    from lakejoin.delta import routing

    path = str(tmp_path / "bundles")
    element = pa.struct([("tenant", pa.string()), ("product_id", pa.int64())])
    write_deltalake(
        path,
        pa.table(
            {
                "tenant": ["acme", "acme", "o'neil", "o'neil"],
                "bundle_no": [1, 2, 1, 2],
                "items": pa.array(
                    [
                        [{"tenant": "acme", "product_id": 1}, {"tenant": "o'neil", "product_id": 1}],
                        [{"tenant": "acme", "product_id": 2}],
                        [{"tenant": "o'neil", "product_id": 1}, {"tenant": None, "product_id": 1}],
                        None,
                    ],
                    type=pa.list_(element),
                ),
            }
        ),
    )
    found = routing.holding_on_driver(
        path,
        0,
        [("acme", 1)],
        "items",
        most=100,
        left_key=("tenant", "bundle_no"),
        element_fields=("tenant", "product_id"),
    )
    assert found == [("acme", 1)]
    both = routing.holding_on_driver(
        path,
        0,
        [("o'neil", 1), ("acme", 2)],
        "items",
        most=100,
        left_key=("tenant", "bundle_no"),
        element_fields=("tenant", "product_id"),
    )
    assert both == [("acme", 1), ("acme", 2), ("o'neil", 1)]
    assert (
        routing.holding_on_driver(
            path,
            0,
            [("o'neil", 1)],
            "items",
            most=1,
            left_key=("tenant", "bundle_no"),
            element_fields=("tenant", "product_id"),
        )
        is None
    )  # more lists than `most`: left to Spark


def test_a_commits_change_rows_come_from_its_metrics(tmp_path) -> None:
    """`logged_change_rows` over delta-rs's own commits (snake-case metrics) and Spark's
    (camel case, as strings): the rows their change feed holds, or None where the metrics
    cannot say (an overwrite's deleted rows)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from lakejoin.delta.change_feed import logged_change_rows

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [1, 2, 3]}), configuration={"delta.enableChangeDataFeed": "true"})
    table = DeltaTable(path)
    table.merge(
        pa.table({"id": [3, 4]}), "s.id = t.id", source_alias="s", target_alias="t"
    ).when_matched_update_all().when_not_matched_insert_all().execute()
    DeltaTable(path).delete("id = 1")
    DeltaTable(path).update(updates={"id": "id + 10"}, predicate="id = 2")
    commits = {int(c["version"]): c for c in DeltaTable(path).history()}
    feed = pa.table(DeltaTable(path).load_cdf(0, 3).read_all())
    for version in range(4):
        want = sum(1 for v in feed["_commit_version"].to_pylist() if v == version)
        assert logged_change_rows([commits[version]]) == want
    assert logged_change_rows(list(commits.values())) == feed.num_rows
    write_deltalake(path, pa.table({"id": [9]}), mode="overwrite")
    assert logged_change_rows([DeltaTable(path).history(1)[0]]) is None
    spark_merge = {
        "operation": "MERGE",
        "operationMetrics": {
            "numTargetRowsInserted": "2",
            "numTargetRowsUpdated": "3",
            "numTargetRowsDeleted": "1",
        },
    }
    maintenance = {"operation": "OPTIMIZE", "operationMetrics": {"numRemovedFiles": "4"}}
    assert logged_change_rows([spark_merge, maintenance]) == 9
    assert logged_change_rows([{"operation": "RESTORE", "operationMetrics": {}}]) is None
