"""Column names that need quoting (issue 51, item 5), taken whole by each kind (fk_join's left
and right columns, list_join's left columns and elements, enrich's facts and dimension, rekey's
master): `geo.lat`, which Spark reads unquoted as the field `lat` of a struct `geo`, and `say"hi`,
which delta-rs's SQL reads unquoted as the end of a name. Every name reaches Spark and delta-rs
through `delta.sql_text`.

One lakehouse for the module: a first batch of each view, then one change of every table that
touches those columns (updates and inserts by a delta-rs MERGE, a delete by Spark, an append by
delta-rs), then an incremental batch of each view, and a full refresh of one. After each batch
the view equals the plain-Python recompute from scratch at its pins.

Then, as in the issue, delta-rs appends with `schema_mode="merge"` a column holding a backtick,
`we`ird`, which Delta's MERGE cannot write into an output (spec/schema_checks.py): each view's
next run stops at its plan, saying so, and writes nothing.
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from lakejoin.delta.records import BatchMode
from lakejoin.delta.sql_text import quoted
from lakejoin.engine.batch import BatchOutcome, batch_log
from lakejoin.errors import SpecError
from lakejoin.sink import driver_merge, key_upsert
from tests.lakehouse import (
    Lakehouse,
    enrich_oracle,
    list_join_oracle,
    output_rows,
    rekey_oracle,
    write_spec,
)

pytestmark = pytest.mark.scenario

ADDRESSES = 'address_id STRING, street STRING, `geo.lat` DOUBLE, `say"hi` STRING'
PARCELS = 'parcel_id STRING, address_id STRING, `geo.lat` DOUBLE, `say"hi` STRING'
PERSONS = 'person_id STRING, `say"hi` STRING, address_ids ARRAY<STRING>'

# Every view takes the odd columns whole (no column list); fanout 1.0 keeps the tiny tables'
# right changes on the incremental path the batch is about.
VIEWS = """\
  parcel_addresses:
    fk_join: {left: parcels, right: addresses, fk: address_id, how: left, right_prefix: a_,
              fanout_threshold: 1.0}
  person_addresses:
    list_join: {left: persons, list: address_ids, right: addresses, into: addresses,
                fanout_threshold: 1.0}
  enriched_parcels:
    enrich:
      fact: parcels
      mode: propagate
      fanout_threshold: 1.0
      dimensions:
        - {table: addresses, fk: address_id, prefix: addr_}
  addresses_by_street:
    rekey: {source: addresses, key: street}
"""
# How each incremental batch writes, so that every write path meets the names: the driver's
# delta-rs MERGE (fk_join: a few keys), the one-commit upsert (list_join, whose lists delta-rs
# does not write; rekey's output), Spark's MERGE (enrich's output, rekey's index).
WRITES = {
    "enriched_parcels": {driver_merge.ENABLED: "false", key_upsert.ENABLED: "false"},
    "addresses_by_street": {driver_merge.ENABLED: "false"},
}
ORACLES = {
    "parcel_addresses": lambda lake, spec, view: output_rows_of(lake.expected(spec, view)),
    "person_addresses": list_join_oracle,
    "enriched_parcels": enrich_oracle,
    "addresses_by_street": rekey_oracle,
}


def upsert(lake: Lakehouse, table: str, key: str, rows: list[tuple]) -> None:
    """Upsert `rows` with a delta-rs MERGE that names every column, quoted (delta-rs 1.6's
    `when_matched_update_all` quotes none)."""
    from deltalake import DeltaTable

    schema = lake.spark.read.format("delta").load(lake.path(table)).schema
    source = lake.spark.createDataFrame(rows, schema).toArrow()
    assign = {quoted(c): f"s.{quoted(c)}" for c in schema.fieldNames()}
    (
        DeltaTable(lake.path(table))
        .merge(source, f"t.{key} = s.{key}", source_alias="s", target_alias="t")
        .when_matched_update(assign)
        .when_not_matched_insert(assign)
        .execute()
    )


def output_rows_of(rows: list[dict]) -> list[dict]:
    """`rows` in `output_rows`'s order."""
    return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))


@contextmanager
def settings(spark, conf: dict[str, str]):  # noqa: ANN001, ANN201 - a SparkSession; a context
    for name, value in conf.items():
        spark.conf.set(name, value)
    try:
        yield
    finally:
        for name in conf:
            spark.conf.unset(name)


@pytest.fixture(scope="module")
def batches(spark, tmp_path_factory):
    """Each view's batches, as (mode, output, expected) after each: its first, then its
    incremental one, written as `WRITES` says; then a full refresh of the fk_join by Spark's
    MERGE, as (summary, output before, output after) under "refresh"; and the lake and spec
    under "lake"."""
    from deltalake import write_deltalake

    lake = Lakehouse(spark, tmp_path_factory.mktemp("odd_names"))
    lake.create(
        "addresses",
        ADDRESSES,
        [("a1", "Elm St", 52.5, "x`1"), ("a2", "Oak St", 48.1, "x.2"), ("a3", "Ash St", None, None)],
    )
    lake.create(
        "parcels", PARCELS, [("x1", "a1", 1.0, "p`1"), ("x2", "a2", 2.0, None), ("x3", "a9", None, "q")]
    )
    lake.create("persons", PERSONS, [("u1", "n`1", ["a1", "a2"]), ("u2", None, ["a3"]), ("u3", "z", [])])
    spec = write_spec(
        lake, {"addresses": "address_id", "parcels": "parcel_id", "persons": "person_id"}, VIEWS
    )
    seen: dict[str, list] = {view: [] for view in ORACLES}

    def run_all(writes: dict[str, dict[str, str]]) -> None:
        for view, oracle in ORACLES.items():
            with settings(spark, writes.get(view, {})):
                summary = lake.run(spec, view, checks=False)
            assert summary.outcome is BatchOutcome.COMMITTED, summary.notes
            seen[view].append((summary.mode, output_rows(lake, spec, view), oracle(lake, spec, view)))

    run_all({})
    # a1's odd columns change, a2 goes, a4 arrives from delta-rs (as in the issue); a parcel's
    # and a person's odd column change, and each of them takes up a4.
    upsert(lake, "addresses", "address_id", [("a1", "Elm St", 52.6, "y`1")])
    lake.delete("addresses", "address_id", ["a2"])
    a4 = spark.createDataFrame([("a4", "Fir St", -3.25, "``")], ADDRESSES).toArrow()
    write_deltalake(lake.path("addresses"), a4, mode="append")
    upsert(lake, "parcels", "parcel_id", [("x1", "a1", 1.0, "p``1"), ("x4", "a4", 4.5, "new")])
    upsert(lake, "persons", "person_id", [("u2", "n.2", ["a3"]), ("u3", "z", ["a4", "a1"])])
    run_all(WRITES)
    view = "parcel_addresses"
    before = output_rows(lake, spec, view)
    with settings(spark, {key_upsert.ENABLED: "false"}):
        refresh = lake.run(spec, view, full_refresh=True, checks=False)
    return {**seen, "refresh": (refresh, before, output_rows(lake, spec, view)), "lake": (lake, spec)}


@pytest.mark.parametrize("view", list(ORACLES))
def test_a_view_that_takes_odd_names_whole_equals_its_recompute(batches, view):
    (first_mode, first, first_expected), (mode, incremental, expected) = batches[view]
    assert first_mode is BatchMode.FULL_REFRESH and mode is BatchMode.INCREMENTAL
    assert first == first_expected
    assert incremental == expected
    assert incremental != first  # the change reached the view


def test_a_full_refresh_after_the_incremental_batch_changes_no_row(batches):
    summary, before, after = batches["refresh"]
    assert summary.outcome is BatchOutcome.COMMITTED and summary.mode is BatchMode.FULL_REFRESH
    assert (summary.inserted, summary.updated, summary.deleted) == (0, 0, 0)
    assert after == before


# The setting of each view that names addresses, where its error points.
NAMES_ADDRESSES = {
    "parcel_addresses": "fk_join.right",
    "person_addresses": "list_join.right",
    "enriched_parcels": "enrich.dimensions[0]",
    "addresses_by_street": "rekey.source",
}


def test_a_column_holding_a_backtick_stops_each_view_at_its_plan(batches):
    """The issue's append: a column the views take whole, whose name Delta's MERGE cannot write."""
    from deltalake import DeltaTable, write_deltalake

    lake, spec = batches["lake"]
    rows = DeltaTable(lake.path("addresses")).to_pyarrow_table().slice(0, 1)
    write_deltalake(
        lake.path("addresses"), rows.append_column("we`ird", [["x"]]), mode="append", schema_mode="merge"
    )
    for view in ORACLES:
        versions = DeltaTable(spec.views[view].path).version(), len(batch_log(spec).history(view))
        with pytest.raises(SpecError) as raised:
            lake.run(spec, view, checks=False)
        text = str(raised.value)
        assert f"column 'we`ird' of {lake.path('addresses')} holds a backtick" in text, text
        assert f"output of view '{view}'" in text and "rename it in that table" in text
        assert raised.value.key == f"views.{view}.{NAMES_ADDRESSES[view]}" and raised.value.line
        assert (DeltaTable(spec.views[view].path).version(), len(batch_log(spec).history(view))) == versions
