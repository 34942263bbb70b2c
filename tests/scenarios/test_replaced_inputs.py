"""Faults a real lakehouse meets (issue 51): an input dropped and written again at its path, a
view's output restored or changed behind lakejoin's back, a state table recreated, two runs of
a rekey view at different pins. Each is noticed by the next plan from the Delta logs alone, and
the view's `on_input_replaced` policy decides: recompute every key at the new versions (the
default), or stop before any Spark job with the fix. After each, the view equals a recompute.
"""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakejoin.delta.records import BatchMode
from lakejoin.engine import batch as engine_batch
from lakejoin.engine.audit import audit_view
from lakejoin.engine.batch import BatchOutcome, batch_log
from lakejoin.engine.pending import pending_work
from lakejoin.engine.repair import RepairRange
from lakejoin.errors import InputReplacedError
from lakejoin.spec.layout import state_path
from lakejoin.views.context import STATE
from tests.lakehouse import (
    MASTERS,
    MERCHANTS,
    PERSONS,
    PRODUCTS,
    list_join_oracle,
    output_rows,
    rekey_oracle,
    write_spec,
)

pytestmark = pytest.mark.scenario

MERCHANT_COLUMNS = pa.schema(
    [("merchant_id", pa.string()), ("display_name", pa.string()), ("photo_url", pa.string())]
)


def table_of(rows: list[tuple], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)


def written_again(path: str, rows: list[tuple], schema: pa.Schema, *, commits: int = 1) -> None:
    """Drop the table at `path` and write it again there with delta-rs, change feed on, in
    `commits` commits (the last one holds `rows`)."""
    shutil.rmtree(path)
    table = table_of(rows, schema)
    cdf = {"delta.enableChangeDataFeed": "true"}
    for n in range(commits):
        write_deltalake(
            path, table if n == commits - 1 else table.slice(0, 1), mode="overwrite", configuration=cdf
        )


def refreshed_for(lake, spec, phrase: str, view: str = "display_products") -> None:
    """The next batch recomputes every key and says why, in the skip check, the summary and the log."""
    assert phrase in pending_work(spec, view).reason
    summary = lake.run(spec, view, checks=False)
    assert summary.outcome is BatchOutcome.COMMITTED and summary.mode is BatchMode.FULL_REFRESH
    assert phrase in summary.notes["replaced"]
    assert phrase in batch_log(spec).last(view).notes["replaced"]


def repair_refused(lake, spec, phrase: str, view: str = "display_products") -> None:
    """A repair stops before any Spark job, whatever the view's policy, with the full refresh as its fix."""
    with pytest.raises(InputReplacedError) as stopped:
        lake.run(spec, view, repair=RepairRange.parse("0"), checks=False)
    assert f"view '{view}' cannot repair at batch" in stopped.value.what and phrase in stopped.value.what
    assert f"--view {view} --full-refresh" in stopped.value.fix


def test_a_replaced_source_or_a_changed_output_recomputes_the_view(lake):
    from deltalake import DeltaTable

    lake.create(
        "merchants", MERCHANTS, [("m1", "Acme", "a.png"), ("m2", "Bolt", "b.png"), ("m3", "Cork", "c.png")]
    )
    lake.create(
        "products", PRODUCTS, [("p1", "pen", 1.0, "m1"), ("p2", "cup", 2.0, "m2"), ("p3", "mug", 3.0, "m3")]
    )
    write_deltalake(
        lake.path("merchants"), table_of([("m4", "Dart", "d.png")], MERCHANT_COLUMNS), mode="append"
    )
    spec = lake.spec()
    lake.run(spec, checks=False)  # merchants pinned at version 2

    # dropped and written again below the old pin: one merchant renamed, two gone
    written_again(
        lake.path("merchants"), [("m1", "Acme 3", "a.png"), ("m2", "Bolt", "b.png")], MERCHANT_COLUMNS
    )
    refreshed_for(lake, spec, "'merchants' was dropped and written again")
    assert lake.output(spec) == lake.expected(spec)
    assert lake.run(spec, checks=False).outcome is BatchOutcome.SKIPPED  # the new table is recorded

    # ... and above it: the new table's tail is no change feed of the old one
    written_again(lake.path("merchants"), [("m3", "Cork", "c.png")], MERCHANT_COLUMNS, commits=4)
    refreshed_for(lake, spec, "'merchants' was dropped and written again")
    assert lake.output(spec) == lake.expected(spec)

    output = DeltaTable(spec.views["display_products"].path)
    # someone's UPDATE of one output row: a repair, which would re-derive some keys and record a
    # batch past it, is refused; the next batch recomputes the view
    output.update(updates={"price": "99.0"}, predicate="product_id = 'p1'")
    repair_refused(lake, spec, "changed behind lakejoin's back")
    found = audit_view(lake.spark, spec, spec.views["display_products"])  # what an audit is for
    assert found is not None and found.keys == [("p1",)]
    refreshed_for(lake, spec, "changed behind lakejoin's back")
    assert lake.output(spec) == lake.expected(spec)

    # the output restored to an older version, then a product changed
    output = DeltaTable(spec.views["display_products"].path)
    output.restore(output.version() - 2)
    lake.upsert("products", ("product_id",), [("p2", "cup", 2.5, "m2")])
    refreshed_for(lake, spec, "RESTORE")
    assert lake.output(spec) == lake.expected(spec)

    # an OPTIMIZE rewrites files, not rows: no refresh (the plan checks the output's history
    # before it finds nothing new)
    DeltaTable(spec.views["display_products"].path).optimize.compact()
    assert lake.run(spec, checks=False).outcome is BatchOutcome.SKIPPED

    # a RESTORE of a source is a change like any other: its change feed says what it undid
    products = DeltaTable(lake.path("products"))
    products.restore(products.version() - 1)  # p2 back at 2.0
    restored = lake.run(spec, checks=False)
    assert restored.outcome is BatchOutcome.COMMITTED and restored.mode is BatchMode.INCREMENTAL
    assert lake.output(spec) == lake.expected(spec)

    # `on_input_replaced: fail` stops at the plan with the table and the command
    spec = lake.spec(extra="    on_input_replaced: fail\n")
    written_again(lake.path("merchants"), [("m1", "Acme 4", "a.png")], MERCHANT_COLUMNS)
    with pytest.raises(InputReplacedError) as stopped:
        lake.run(spec, checks=False)
    assert "'merchants' was dropped and written again" in stopped.value.what
    assert "--full-refresh" in stopped.value.fix
    # a repair, or an audit of every key, reads at the last batch's pins, versions of the
    # merchants that are gone: refused, whatever the policy
    repair_refused(lake, lake.spec(), "'merchants' was dropped and written again")
    with pytest.raises(InputReplacedError) as unaudited:
        audit_view(lake.spark, spec, spec.views["display_products"])
    assert "cannot be audited at batch" in unaudited.value.what
    assert "'merchants' was dropped and written again" in unaudited.value.what


def test_an_upstream_view_rebuilt_and_a_state_table_recreated_recompute_their_readers(lake):
    lake.create("merchants", MASTERS, [("m1", "Acme", "uk", "a.png"), ("m2", "Bolt", "fr", "b.png")])
    lake.create("products", PRODUCTS, [("p1", "pen", 1.0, "m1"), ("p2", "cup", 2.0, "m2")])
    lake.create("persons", PERSONS, [("u1", "Ann", ["p1", "p2"]), ("u2", "Bob", ["p2"])])
    views = """\
  display_products:
    fk_join: {left: products, right: merchants, fk: merchant_id, how: left, right_columns: [display_name]}
    audit: off
  favourites:
    list_join: {left: persons, list: address_ids, right: display_products, into: favourites,
                right_columns: [name, display_name]}
    audit: off
  merchants_by_name:
    rekey: {source: merchants, key: display_name, columns: [country]}
    audit: off
"""
    spec = write_spec(
        lake, {"merchants": "merchant_id", "products": "product_id", "persons": "person_id"}, views
    )
    for view in spec.view_order():
        lake.run(spec, view, checks=False)

    # the upstream view's output deleted and rebuilt (a new table, its versions from 0 again)
    shutil.rmtree(spec.views["display_products"].path)
    lake.upsert("products", ("product_id",), [("p2", "cup", 2.5, "m1")])
    lake.run(spec, "display_products", checks=False)
    refreshed_for(lake, spec, "'display_products' was dropped and written again", "favourites")
    assert output_rows(lake, spec, "favourites") == list_join_oracle(lake, spec, "favourites")

    # the rekey index recreated at its path (a copy of its rows: another table, another log)
    index = state_path(spec, spec.views["merchants_by_name"])
    rows = pa.Table.from_pandas(lake.spark.read.format("delta").load(index).toPandas(), preserve_index=False)
    shutil.rmtree(index)
    write_deltalake(index, rows, configuration={"delta.enableChangeDataFeed": "true"})
    lake.upsert("merchants", ("merchant_id",), [("m2", "Bolt 2", "fr", "b.png")])
    refreshed_for(lake, spec, "rekey index was dropped and written again", "merchants_by_name")
    assert output_rows(lake, spec, "merchants_by_name") == rekey_oracle(lake, spec, "merchants_by_name")


class OvertakenError(Exception):
    """The other run, stopped after its state write (a crash, or a slower run)."""


def test_a_rekey_batch_pins_the_index_version_it_wrote_when_another_run_wrote_it_too(lake, monkeypatch):
    """Run A pins the master after m1's rename; before its state write, run B of the same batch
    pins the next version (m2 renamed) and writes the index, then stops. A's batch commits: it
    must pin the index as its own write left it, at A's pins (m2 still 'Bolt'), or the next
    batch would take m2's old name from B's row and leave 'Bolt' in the output."""
    lake.create("merchants", MASTERS, [("m1", "Acme", "uk", "a.png"), ("m2", "Bolt", "fr", "b.png")])
    views = """\
  merchants_by_name:
    rekey: {source: merchants, key: display_name, columns: [country]}
    audit: off
"""
    spec = write_spec(lake, {"merchants": "merchant_id"}, views)
    lake.run(spec, "merchants_by_name", checks=False)
    lake.upsert("merchants", ("merchant_id",), [("m1", "Acme 2", "uk", "a.png")])
    real = engine_batch.failpoint
    runs: list[str] = []

    def other_run(name: str) -> None:
        if name == "before_state_write" and not runs:
            runs.append("B")
            lake.upsert("merchants", ("merchant_id",), [("m2", "Bolt 2", "fr", "b.png")])
            with pytest.raises(OvertakenError):
                lake.run(spec, "merchants_by_name", checks=False)
        elif name == "after_state_write" and runs == ["B"]:
            runs.append("B stopped")
            raise OvertakenError
        real(name)

    monkeypatch.setattr(engine_batch, "failpoint", other_run)
    first = lake.run(spec, "merchants_by_name", checks=False)
    monkeypatch.setattr(engine_batch, "failpoint", real)

    assert runs == ["B", "B stopped"] and first.outcome is BatchOutcome.COMMITTED
    assert first.pinned_versions["merchants"] == first.start_versions["merchants"] + 1  # not B's
    index = state_path(spec, spec.views["merchants_by_name"])
    at_pin = lake.spark.read.format("delta").option("versionAsOf", first.pinned_versions[STATE]).load(index)
    assert sorted(r.display_name for r in at_pin.collect()) == ["Acme 2", "Bolt"]
    assert output_rows(lake, spec, "merchants_by_name") == rekey_oracle(lake, spec, "merchants_by_name")
    lake.run(spec, "merchants_by_name", checks=False)  # reads m2's rename
    assert output_rows(lake, spec, "merchants_by_name") == rekey_oracle(lake, spec, "merchants_by_name")
