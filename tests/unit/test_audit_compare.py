"""The whole-output audit's comparison on the driver (engine/audit.differing_keys): which keys'
rows differ between the recompute (as Spark's Arrow gives it) and the output (as delta-rs reads
it), without a JVM."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from lakejoin.engine.audit import differing_keys

pytestmark = pytest.mark.unit

UTC = datetime.UTC


def _table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)


FLAT = pa.schema([("id", pa.string()), ("n", pa.float64())])


@pytest.mark.parametrize(
    ("expected", "found", "differ"),
    [
        ([("a", 1.0), ("b", 2.0)], [("b", 2.0), ("a", 1.0)], []),  # row order does not matter
        ([("a", 1.0), ("b", 2.0)], [("a", 1.0), ("b", 2.5)], [("b",)]),  # a value edited
        ([("a", 1.0), ("b", 2.0)], [("a", 1.0)], [("b",)]),  # a row lost
        ([("a", 1.0)], [("a", 1.0), ("z", 0.0)], [("z",)]),  # a row too many
        ([("a", 1.0)], [("a", 1.0), ("a", 1.0)], [("a",)]),  # a key written twice
        ([("a", float("nan"))], [("a", float("nan"))], []),  # NaN is NaN on both sides
        ([("a", None)], [("a", 0.0)], [("a",)]),  # null is not zero
        ([("c", 1.0), (None, 1.0), ("b", 1.0)], [], [(None,), ("b",), ("c",)]),  # key order, nulls first
    ],
)
def test_keys_whose_rows_differ(expected, found, differ) -> None:
    def rows(values: list[tuple]) -> pa.Table:
        return _table([{"id": i, "n": n} for i, n in values], FLAT)

    assert differing_keys(rows(expected), rows(found), ("id",)) == differ


def test_types_of_the_two_readers_compare_by_value() -> None:
    """Spark's Arrow gives a timestamp in the session's zone and strings as large strings;
    delta-rs in UTC and as strings. A list of structs compares element by element, in order."""
    address = pa.struct([("street", pa.string()), ("no", pa.int32())])
    spark = pa.schema(
        [
            ("id", pa.int64()),
            ("at", pa.timestamp("us", tz="Europe/Oslo")),
            ("name", pa.large_string()),
            ("addresses", pa.list_(address)),
        ]
    )
    delta = pa.schema(
        [
            ("id", pa.int64()),
            ("at", pa.timestamp("us", tz="UTC")),
            ("name", pa.string()),
            ("addresses", pa.list_(address)),
        ]
    )
    at = datetime.datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    lists = [{"street": "Main", "no": 1}, {"street": "Side", "no": 2}]
    row = {"id": 1, "at": at, "name": "x", "addresses": lists}
    assert differing_keys(_table([row], spark), _table([row], delta), ("id",)) == []
    swapped = {**row, "addresses": lists[::-1]}
    assert differing_keys(_table([row], spark), _table([swapped], delta), ("id",)) == [(1,)]
    later = {**row, "at": at + datetime.timedelta(microseconds=1)}
    assert differing_keys(_table([row], spark), _table([later], delta), ("id",)) == [(1,)]


def test_a_key_of_two_columns() -> None:
    schema = pa.schema([("tenant", pa.int32()), ("region", pa.string()), ("v", pa.int64())])
    expected = _table([{"tenant": 1, "region": "EU", "v": 1}, {"tenant": 1, "region": "US", "v": 2}], schema)
    found = _table([{"tenant": 1, "region": "EU", "v": 1}, {"tenant": 1, "region": "US", "v": 3}], schema)
    assert differing_keys(expected, found, ("tenant", "region")) == [(1, "US")]
