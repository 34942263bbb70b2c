"""A changed view definition is noticed (issue 35): an edit of a setting that changes rows, or an
input that gains a column the view takes, makes the next batch recompute every key under the
new definition (or stop, with `on_definition_change: fail`); never an output that mixes both.

Each test ends on the plain-Python oracle of the view under the spec as it is now.
"""

from __future__ import annotations

from typing import Any

import pytest

from lakejoin.engine.batch import BatchOutcome, batch_log
from lakejoin.engine.pending import pending_work
from lakejoin.errors import DefinitionChangedError
from tests.lakehouse import (
    ADDRESSES,
    ITEMS,
    MASTERS,
    PERSONS,
    PURCHASES,
    enrich_oracle,
    list_join_oracle,
    output_rows,
    rekey_oracle,
    run_and_watch,
    write_spec,
)

pytestmark = pytest.mark.scenario

FULL = "full_refresh"


def output_version(spec, view: str) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(spec.views[view].path).version())


def refreshed(lake, spec, view: str, change: str, *, checks: bool = False) -> list[dict]:
    """The edited spec's next batch: the Airflow skip check sees work, the batch refreshes in full
    and says why; the output's change rows (pre-images left out) are returned. (Checks are other
    tests' subject: off, a batch of these tiny tables takes a third of the time.)"""
    assert pending_work(spec, view).run
    assert change in pending_work(spec, view).reason
    summary, rows = run_and_watch(lake, spec, view, checks=checks)
    assert summary.outcome is BatchOutcome.COMMITTED and summary.mode is not None
    assert summary.mode.value == FULL
    assert change in summary.notes["definition"]
    assert change in batch_log(spec).last(view).notes["definition"]  # status and reports read it
    return rows


def skipped_next(lake, spec, view: str) -> None:
    """The definition is recorded: with nothing new the next run is skipped again."""
    again = lake.run(spec, view, checks=False)
    assert again.outcome is BatchOutcome.SKIPPED, again.notes


# --- a setting that keeps the columns, one per kind ------------------------------------------------


def fk_join_spec(lake, how: str, policy: str = "") -> Any:
    views = f"""\
  display_products:
{policy}    fk_join: {{left: products, right: merchants, fk: merchant_id, how: {how},
              right_columns: [display_name]}}
"""
    return write_spec(lake, {"products": "product_id", "merchants": "merchant_id"}, views)


def fk_join_tables(lake) -> None:
    from tests.lakehouse import MERCHANTS, PRODUCTS

    lake.create("merchants", MERCHANTS, [("m1", "Acme", "a.png")])
    lake.create("products", PRODUCTS, [("p1", "pen", 1.0, "m1"), ("p5", "cup", 2.0, "m9")])


def test_fk_join_left_to_inner_drops_the_unmatched_rows_even_with_nothing_new(lake):
    """The issue's case: `how: left -> inner` with the inputs unchanged is work, and the full
    refresh writes only the rows that differ (p5, unmatched, leaves; p1 is not rewritten)."""
    fk_join_tables(lake)
    lake.run(fk_join_spec(lake, "left"), "display_products", checks=False)
    lake.upsert("products", "product_id", [("p1", "pen", 1.5, "m1")])
    lake.run(fk_join_spec(lake, "left"), "display_products", checks=False)

    spec = fk_join_spec(lake, "inner")
    rows = refreshed(lake, spec, "display_products", "how: left -> inner")

    assert [(r["product_id"], r["_change_type"]) for r in rows] == [("p5", "delete")]
    assert (
        lake.output(spec)
        == lake.expected(spec)
        == [{"product_id": "p1", "name": "pen", "price": 1.5, "merchant_id": "m1", "display_name": "Acme"}]
    )
    skipped_next(lake, spec, "display_products")


def test_on_definition_change_fail_stops_at_the_plan_without_a_spark_job_or_a_commit(lake):
    fk_join_tables(lake)
    policy = "    on_definition_change: fail\n"
    lake.run(fk_join_spec(lake, "left", policy), "display_products", checks=False)
    spec = fk_join_spec(lake, "inner", policy)
    before, logged = (
        output_version(spec, "display_products"),
        len(batch_log(spec).history("display_products")),
    )

    tracker = lake.spark.sparkContext.statusTracker()
    lake.spark.sparkContext.setJobGroup("edited", "a batch under a changed definition")
    try:
        with pytest.raises(DefinitionChangedError) as raised:
            lake.run(spec, "display_products", checks=False)
    finally:
        lake.spark.sparkContext.setJobGroup("", "")

    text = str(raised.value)
    assert "changed since batch 1: how: left -> inner" in text
    assert f"lake.yaml:{spec.views['display_products'].line}" in text
    assert "--view display_products --full-refresh" in text
    assert list(tracker.getJobIdsForGroup("edited")) == []
    assert output_version(spec, "display_products") == before
    assert len(batch_log(spec).history("display_products")) == logged

    # The command the error names rebuilds the view; the next run has nothing to do.
    summary = lake.run(spec, "display_products", full_refresh=True, checks=False)
    assert summary.mode is not None and summary.mode.value == FULL
    assert lake.output(spec) == lake.expected(spec)
    skipped_next(lake, spec, "display_products")


def list_join_spec(lake, duplicates: str) -> Any:
    views = f"""\
  person_addresses:
    list_join: {{left: persons, list: address_ids, right: addresses, into: addresses,
                duplicates: {duplicates}, right_columns: [street]}}
"""
    return write_spec(lake, {"persons": "person_id", "addresses": "address_id"}, views)


def test_list_join_duplicates_keep_to_drop(lake):
    lake.create("addresses", ADDRESSES, [("a1", "Main St", "Oslo"), ("a2", "High St", "Bergen")])
    lake.create("persons", PERSONS, [("u1", "Ann", ["a1", "a2", "a1"]), ("u2", "Ben", ["a2"])])
    lake.run(list_join_spec(lake, "keep"), "person_addresses", checks=False)

    spec = list_join_spec(lake, "drop")
    rows = refreshed(lake, spec, "person_addresses", "duplicates: keep -> drop")

    assert {r["person_id"] for r in rows} == {"u1"}  # u2's row is the same under both
    assert output_rows(lake, spec, "person_addresses") == list_join_oracle(lake, spec, "person_addresses")
    skipped_next(lake, spec, "person_addresses")


def rekey_spec(lake, settings: str) -> Any:
    views = f"""\
  merchants_by_name:
    rekey: {{source: merchants, key: display_name, columns: [country]{settings}}}
"""
    return write_spec(lake, {"merchants": "merchant_id"}, views)


def test_a_rekey_made_unique_is_rewritten_under_its_new_key(lake):
    """`unique: false -> true` keeps the columns but not the output key: the output is replaced,
    since a MERGE on the new key would match both old rows of a shared name."""
    lake.create(
        "merchants",
        MASTERS,
        [("m1", "Acme", "NO", "a.png"), ("m2", "Bolt", "SE", "b.png"), ("m3", "Acme", "DK", "c.png")],
    )
    lake.run(rekey_spec(lake, ", unique: false"), "merchants_by_name", checks=False)
    lake.upsert("merchants", "merchant_id", [("m3", "Acme", "FI", "c.png")])  # m3 changed last

    spec = rekey_spec(lake, ", on_conflict: latest")
    refreshed(lake, spec, "merchants_by_name", "unique: False -> True")

    assert output_rows(lake, spec, "merchants_by_name") == rekey_oracle(lake, spec, "merchants_by_name")
    assert {r["display_name"]: r["merchant_id"] for r in output_rows(lake, spec, "merchants_by_name")} == {
        "Acme": "m3",
        "Bolt": "m2",
    }
    assert "the output's key changed" in batch_log(spec).last("merchants_by_name").notes["output"]


def enrich_spec(lake, how: str) -> Any:
    views = f"""\
  enriched_purchases:
    enrich:
      fact: purchases
      mode: propagate
      dimensions:
        - {{table: products, fk: product_id, prefix: product_, columns: [title], how: {how}}}
"""
    return write_spec(lake, {"purchases": "purchase_id", "products": "product_id"}, views)


def test_enrich_a_dimensions_how_left_to_inner(lake):
    lake.create("products", ITEMS, [("p1", "pen", 1.0)])
    lake.create("purchases", PURCHASES, [("o1", "c1", "p1", 2), ("o2", "c1", "p9", 1)])
    lake.run(enrich_spec(lake, "left"), "enriched_purchases", checks=False)

    spec = enrich_spec(lake, "inner")
    rows = refreshed(lake, spec, "enriched_purchases", "dimensions[0].how: left -> inner")

    assert [(r["purchase_id"], r["_change_type"]) for r in rows] == [("o2", "delete")]
    assert output_rows(lake, spec, "enriched_purchases") == enrich_oracle(lake, spec, "enriched_purchases")


# --- a view downstream of a changed view -----------------------------------------------------------


def test_a_view_reading_a_changed_view_follows_through_its_change_feed(lake):
    fk_join_tables(lake)
    lake.create("purchases", PURCHASES, [("o1", "c1", "p1", 2), ("o5", "c1", "p5", 1)])
    chain = """\
  enriched_purchases:
    enrich:
      fact: purchases
      mode: propagate
      dimensions:
        - {table: display_products, fk: product_id, prefix: product_, columns: [display_name], how: inner}
"""

    def spec_with(how: str) -> Any:
        views = f"""\
  display_products:
    fk_join: {{left: products, right: merchants, fk: merchant_id, how: {how}, right_columns: [display_name]}}
{chain}"""
        return write_spec(
            lake, {"products": "product_id", "merchants": "merchant_id", "purchases": "purchase_id"}, views
        )

    for view in ("display_products", "enriched_purchases"):
        lake.run(spec_with("left"), view, checks=False)
    assert {r["purchase_id"] for r in output_rows(lake, spec_with("left"), "enriched_purchases")} == {
        "o1",
        "o5",
    }

    spec = spec_with("inner")
    refreshed(lake, spec, "display_products", "how: left -> inner")
    downstream, rows = run_and_watch(lake, spec, "enriched_purchases", checks=False)

    assert downstream.mode is not None and downstream.mode.value == "incremental"  # its own definition held
    assert [(r["purchase_id"], r["_change_type"]) for r in rows] == [("o5", "delete")]
    assert output_rows(lake, spec, "enriched_purchases") == enrich_oracle(lake, spec, "enriched_purchases")


# --- an input that gains a column the view takes ---------------------------------------------------


def gain_zip(lake, table: str, row: dict) -> None:
    """Schema evolution as a CDC loader does it: a delta-rs append that adds a column."""
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(lake.path(table), pa.Table.from_pylist([row]), mode="append", schema_mode="merge")


GAINS = {
    # kind: (the spec's views, its sources, the tables, the table that gains zip, its new row, the oracle)
    "fk_join": (
        "  v:\n    fk_join: {left: products, right: merchants, fk: merchant_id, how: left}\n",
        {"products": "product_id", "merchants": "merchant_id"},
        "merchants",
        {"merchant_id": "m2", "display_name": "Bolt", "photo_url": "b.png", "zip": "0150"},
    ),
    "list_join": (
        "  v:\n    list_join: {left: persons, list: address_ids, right: addresses, into: addresses}\n",
        {"persons": "person_id", "addresses": "address_id"},
        "addresses",
        {"address_id": "a3", "street": "Low St", "city": "Oslo", "zip": "0150"},
    ),
    "rekey": (
        "  v:\n    rekey: {source: merchants, key: display_name}\n",
        {"merchants": "merchant_id"},
        "merchants",
        {"merchant_id": "m2", "display_name": "Bolt", "country": "SE", "photo_url": "b.png", "zip": "0150"},
    ),
    "enrich": (
        "  v:\n    enrich:\n      fact: purchases\n      mode: propagate\n"
        "      dimensions: [{table: products, fk: product_id, prefix: product_}]\n",
        {"purchases": "purchase_id", "products": "product_id"},
        "products",
        {"product_id": "p2", "title": "cup", "price": 2.0, "zip": "0150"},
    ),
}


def gain_tables(lake, kind: str) -> None:
    from tests.lakehouse import MERCHANTS, PRODUCTS

    if kind == "fk_join":
        lake.create("merchants", MERCHANTS, [("m1", "Acme", "a.png")])
        lake.create("products", PRODUCTS, [("p1", "pen", 1.0, "m1"), ("p2", "cup", 2.0, "m2")])
    elif kind == "list_join":
        lake.create("addresses", ADDRESSES, [("a1", "Main St", "Oslo")])
        lake.create("persons", PERSONS, [("u1", "Ann", ["a1", "a3"])])
    elif kind == "rekey":
        lake.create("merchants", MASTERS, [("m1", "Acme", "NO", "a.png")])
    else:
        lake.create("products", ITEMS, [("p1", "pen", 1.0)])
        lake.create("purchases", PURCHASES, [("o1", "c1", "p1", 2), ("o2", "c1", "p2", 1)])


def oracle(lake, spec, kind: str) -> list[dict]:
    if kind == "fk_join":
        from tests.lakehouse import fk_join_oracle, pinned

        join, versions = spec.views["v"].fk_join, pinned(lake, spec, "v")
        rows = fk_join_oracle(
            lake.rows_at("products", versions["products"]),
            lake.rows_at("merchants", versions["merchants"]),
            join=join,
            left_key="product_id",
            right_key="merchant_id",
        )
        return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))
    return {"list_join": list_join_oracle, "rekey": rekey_oracle, "enrich": enrich_oracle}[kind](
        lake, spec, "v"
    )


@pytest.mark.parametrize("kind", list(GAINS))
def test_an_input_that_gains_a_column_the_view_takes_rebuilds_the_view_with_it(lake, kind):
    views, sources, table, row = GAINS[kind]
    gain_tables(lake, kind)
    spec = write_spec(lake, sources, views)
    lake.run(spec, "v", checks=False)

    gain_zip(lake, table, row)
    refreshed(lake, spec, "v", f"{table} gained column 'zip' (string)")

    output = output_rows(lake, spec, "v")
    assert output == oracle(lake, spec, kind)
    assert "0150" in repr(output)  # the new column reached the output


def test_with_fail_a_gained_column_is_named_with_its_table_and_the_fix(lake):
    views, sources, table, row = GAINS["list_join"]
    gain_tables(lake, "list_join")
    spec = write_spec(lake, sources, views.replace("  v:\n", "  v:\n    on_definition_change: fail\n"))
    lake.run(spec, "v", checks=False)
    gain_zip(lake, table, row)

    with pytest.raises(DefinitionChangedError) as raised:
        lake.run(spec, "v", checks=False)

    text = str(raised.value)
    assert "addresses gained column 'zip' (string)" in text and "--full-refresh" in text
    assert "FIELD_NOT_FOUND" not in text


def test_a_column_gained_by_an_input_whose_columns_are_listed_stays_incremental(lake):
    lake.create("addresses", ADDRESSES, [("a1", "Main St", "Oslo")])
    lake.create("persons", PERSONS, [("u1", "Ann", ["a1", "a3"])])
    spec = list_join_spec(lake, "keep")
    lake.run(spec, "person_addresses", checks=False)

    gain_zip(lake, "addresses", {"address_id": "a3", "street": "Low St", "city": "Oslo", "zip": "0150"})
    summary, _ = run_and_watch(lake, spec, "person_addresses", checks=False)

    assert summary.mode is not None and summary.mode.value == "incremental"
    assert "definition" not in summary.notes
    assert output_rows(lake, spec, "person_addresses") == list_join_oracle(lake, spec, "person_addresses")


# --- on_definition_change: fail, for the other kinds ---------------------------------------------

FAILS = {
    # kind: (tables, the spec before, the edit, the change as named)
    "list_join": (
        lambda lake: (
            lake.create("addresses", ADDRESSES, [("a1", "Main St", "Oslo")]),
            lake.create("persons", PERSONS, [("u1", "Ann", ["a1", "a1"])]),
        ),
        {"persons": "person_id", "addresses": "address_id"},
        "list_join: {left: persons, list: address_ids, right: addresses, into: addresses, duplicates: keep}",
        ("duplicates: keep", "duplicates: drop"),
        "duplicates: keep -> drop",
    ),
    "rekey": (
        lambda lake: lake.create("merchants", MASTERS, [("m1", "Acme", "NO", "a.png")]),
        {"merchants": "merchant_id"},
        "rekey: {source: merchants, key: display_name, columns: [country], on_conflict: fail}",
        ("on_conflict: fail", "on_conflict: latest"),
        "on_conflict: fail -> latest",
    ),
    "enrich": (
        lambda lake: (
            lake.create("products", ITEMS, [("p1", "pen", 1.0)]),
            lake.create("purchases", PURCHASES, [("o1", "c1", "p1", 2)]),
        ),
        {"purchases": "purchase_id", "products": "product_id"},
        "enrich: {fact: purchases, mode: propagate, dimensions: [{table: products, fk: product_id}]}",
        ("mode: propagate", "mode: lookup"),
        "mode: propagate -> lookup",
    ),
}


@pytest.mark.parametrize("kind", list(FAILS))
def test_with_fail_an_edit_of_each_kind_stops_with_the_change_named_and_no_commit(lake, kind):
    create, sources, body, (old, new), named = FAILS[kind]
    create(lake)
    spec = write_spec(lake, sources, f"  v:\n    on_definition_change: fail\n    {body}\n")
    lake.run(spec, "v", checks=False)
    before, logged = output_version(spec, "v"), len(batch_log(spec).history("v"))

    edited = write_spec(
        lake, sources, f"  v:\n    on_definition_change: fail\n    {body.replace(old, new)}\n"
    )
    with pytest.raises(DefinitionChangedError) as raised:
        lake.run(edited, "v", checks=False)

    assert f"changed since batch 1: {named}" in str(raised.value)
    assert f"lake.yaml:{edited.views['v'].line}" in str(raised.value) and "--full-refresh" in str(
        raised.value
    )
    assert output_version(edited, "v") == before and len(batch_log(edited).history("v")) == logged
