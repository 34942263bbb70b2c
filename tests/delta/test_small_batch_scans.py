"""A small batch of every kind gathers its inputs on the driver: Spark scans no file (issue 52).

Each source is written in four commits (four files, so a whole scan and a pruned one differ),
every view loads every key, and then a few rows of every source change. The small batch that
follows reads its change ranges, its affected rows and their other sides, its state rows and
its checks' rows with delta-rs at the pinned versions; Spark computes over local relations.
Spark's own SQL status store (tests/scans.py) counts the data files its scans read: none of
any table, inputs, output or state. The recomputed rows are collected once: the checks and the
output write take them from the driver, and no query of theirs reads rows Spark holds. Two views
reading one source (merchants) read its change range once. The outputs then equal their
recompute.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lakejoin.delta import change_feed
from lakejoin.engine import batch
from lakejoin.engine.batch import Phase, recompute_view, run_view
from lakejoin.engine.pipeline import run_pipeline
from tests import scans
from tests.lakehouse import ADDRESSES, CUSTOMERS, ITEMS, MASTERS, PERSONS, PRODUCTS, PURCHASES, write_spec

pytestmark = pytest.mark.delta

ROWS = 40
VIEWS = """\
  display_products:
    fk_join: {left: products, right: merchants, fk: merchant_id, how: left, right_columns: [display_name]}
  person_addresses:
    list_join: {left: persons, list: address_ids, right: addresses, into: addresses, duplicates: keep}
  merchants_by_name:
    rekey: {source: merchants, key: display_name, columns: [country]}
  enriched_purchases:
    enrich:
      fact: purchases
      mode: propagate
      dimensions:
        - {table: customers, fk: customer_id, prefix: customer_, columns: [name]}
        - {table: items, fk: product_id, prefix: item_, columns: [title], how: inner}
"""
KEYS = {
    "merchants": "merchant_id",
    "products": "product_id",
    "addresses": "address_id",
    "persons": "person_id",
    "customers": "customer_id",
    "items": "product_id",
    "purchases": "purchase_id",
}


def _create(lake, table: str, schema: str, rows: list[tuple]) -> None:
    """`rows` in four commits (four data files), written by delta-rs (no Spark job)."""
    part = len(rows) // 4
    for start in range(0, len(rows), part):
        frame = _arrow(schema, rows[start : start + part])
        write_deltalake(
            lake.path(table), frame, mode="append", configuration={"delta.enableChangeDataFeed": "true"}
        )


def _upsert(lake, table: str, row: tuple) -> None:
    """A MERGE of one row by delta-rs (no Spark job), by the table's key."""
    key = KEYS[table]
    schema = {"merchants": MASTERS, "products": PRODUCTS, "addresses": ADDRESSES, "persons": PERSONS}.get(
        table
    ) or {"customers": CUSTOMERS, "items": ITEMS, "purchases": PURCHASES}[table]
    (
        DeltaTable(lake.path(table))
        .merge(_arrow(schema, [row]), f"t.{key} = s.{key}", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


def _arrow(schema: str, rows: list[tuple]) -> pa.Table:
    types = {
        "STRING": pa.string(),
        "DOUBLE": pa.float64(),
        "INT": pa.int32(),
        "ARRAY<STRING>": pa.list_(pa.string()),
    }
    fields = [(name, types[kind]) for name, kind in (c.strip().split(" ", 1) for c in schema.split(","))]
    return pa.table(
        {name: [r[i] for r in rows] for i, (name, _) in enumerate(fields)}, schema=pa.schema(fields)
    )


def test_a_small_batch_of_every_kind_scans_no_file(lake, monkeypatch) -> None:
    merchants = ROWS // 5
    _create(
        lake, "merchants", MASTERS, [(f"m{i:02}", f"shop {i}", "NO", f"{i}.png") for i in range(merchants)]
    )
    _create(
        lake,
        "products",
        PRODUCTS,
        [(f"p{i:02}", f"thing {i}", float(i), f"m{i % merchants:02}") for i in range(ROWS)],
    )
    _create(lake, "addresses", ADDRESSES, [(f"a{i:02}", f"street {i}", "Oslo") for i in range(ROWS)])
    _create(
        lake,
        "persons",
        PERSONS,
        [(f"u{i:02}", f"person {i}", [f"a{i:02}", f"a{(i + 1) % ROWS:02}"]) for i in range(ROWS)],
    )
    _create(lake, "customers", CUSTOMERS, [(f"c{i:02}", f"customer {i}", "NO") for i in range(ROWS)])
    _create(lake, "items", ITEMS, [(f"p{i:02}", f"item {i}", float(i)) for i in range(ROWS)])
    _create(
        lake,
        "purchases",
        PURCHASES,
        [(f"o{i:02}", f"c{i:02}", f"p{(i * 3) % ROWS:02}", 1) for i in range(ROWS)],
    )
    spec = write_spec(lake, KEYS, VIEWS)
    for view in spec.views:
        run_view(lake.spark, spec, view)
    # A change on every side: a merchant renamed, a product moved to another, an address and a
    # person's list changed, a customer, an item and a purchase's foreign keys.
    _upsert(lake, "merchants", ("m01", "shop one", "SE", "1.png"))
    _upsert(lake, "products", ("p03", "thing three", 3.5, "m02"))
    _upsert(lake, "addresses", ("a05", "new street", "Bergen"))
    _upsert(lake, "persons", ("u07", "person 7", ["a09"]))
    _upsert(lake, "customers", ("c04", "customer four", "SE"))
    _upsert(lake, "items", ("p06", "item six", 6.5))
    _upsert(lake, "purchases", ("o08", "c09", "p10", 2))

    marks: dict[str, int] = {}
    read: dict[str, dict[str, int]] = {}
    phases: dict[str, dict[Phase, int]] = {}

    def started(view: str):  # noqa: ANN202 - the view's phase callback
        marks[view] = scans.mark(lake.spark)
        phases[view] = {}
        return lambda phase: phases[view].setdefault(phase, scans.mark(lake.spark))

    def ended(result) -> None:  # noqa: ANN001 - a ViewResult
        read[result.view] = dict(scans.since(lake.spark, marks[result.view]))

    written: dict[str, tuple[int, int]] = {}  # the output write's SQL executions, by view
    write_output = batch.write_output

    def marked(spark, spec, view, *args):  # noqa: ANN001, ANN202 - write_output's own
        start = scans.mark(lake.spark)
        done = write_output(spark, spec, view, *args)
        written[view.name] = (start, scans.mark(lake.spark))
        return done

    monkeypatch.setattr(batch, "write_output", marked)
    before = dict(change_feed.driver_reads)
    results = run_pipeline(lake.spark, spec, list(spec.views), parallel=1, on_view=started, on_result=ended)
    for result in results:
        summary, view = result.summary, result.view
        assert summary is not None and summary.affected_keys > 0, view
        assert set(summary.change_reads.values()) == {"driver"}, (view, summary.change_reads)
        assert not read[view], f"{view}'s small batch scanned files with Spark: {read[view]}"
        # its recomputed rows are collected once: the checks and the write take them from the
        # driver, so no query of theirs reads rows Spark holds (a scan, a checkpoint, an RDD)
        assert "recomputed rows" in summary.notes, (view, summary.notes)
        at = phases[view]
        for step, (start, end) in (("check", (at[Phase.CHECK], at[Phase.WRITE])), ("write", written[view])):
            again = [p for p in scans.plans(lake.spark, start, end) if scans.reads_stored_rows(p)]
            assert not again, f"{view}'s {step} read stored rows again: {again}"
    # merchants' range is read by display_products and merchants_by_name: on the driver once,
    # the second view answered from the run's read; every other source's range once
    assert change_feed.driver_reads["read"] - before["read"] == len(KEYS)
    assert change_feed.driver_reads["kept"] - before["kept"] == 1
    for view in spec.views:
        out = lake.spark.read.format("delta").load(spec.views[view].path)
        want = recompute_view(lake.spark, spec, view).select(*out.columns)
        assert sorted(out.collect()) == sorted(want.collect()), view
    # A small output is audited whole on the driver, its small inputs read there too: every
    # kind's recompute of them equals its output, and Spark reads no file of an input or output
    # (rekey's `latest` claims read the master's change feed with Spark).
    from lakejoin.engine.audit import audit_view

    for view in spec.views:
        mark = scans.mark(lake.spark)
        found = audit_view(lake.spark, spec, spec.views[view])
        assert found is not None and found.differences == 0, (view, found)
        assert "compared on the driver" in found.scope, (view, found.scope)
        read = scans.since(lake.spark, mark)
        if spec.views[view].kind.value != "rekey":
            assert not read, f"{view}'s audit scanned files with Spark: {read}"
    # The helper sees a scan when there is one: a full refresh reads every file of its input.
    mark = scans.mark(lake.spark)
    run_view(lake.spark, spec, "merchants_by_name", full_refresh=True)
    assert scans.since(lake.spark, mark)[lake.path("merchants")] >= 4
