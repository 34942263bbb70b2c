"""`lakejoin plan` says what the following run then does (issue 54): one pipeline of every kind,
a view reading a view, and a history that walks through each reason a plan gives — first
batches, nothing new, a small change, a change that fans out (fk_join, list_join, enrich), a
view waiting for the view it reads, a definition change, a replaced input (recomputed, or
refused by the view's policy) and a repair. Before each run the whole pipeline is planned from
the Delta logs alone; after it, each view's plan is compared with what its batch did: the
action and its reason, the batch id and the write strategy."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lakejoin.engine.next_batch import Action, NextBatch, plan_views
from lakejoin.engine.pipeline import ViewResult, ViewState, run_pipeline
from lakejoin.engine.repair import RepairRange
from lakejoin.spec.model import PipelineSpec
from tests.lakehouse import ADDRESSES, MASTERS, PERSONS, PRODUCTS, write_spec

pytestmark = pytest.mark.scenario

PURCHASES = "purchase_id STRING, customer_id STRING, product_id STRING"
CUSTOMERS = "customer_id STRING, name STRING"

VIEWS = """\
  display_products:
    fk_join: {{left: products, right: merchants, fk: merchant_id, how: left,
              right_columns: [display_name], fanout_threshold: 0.5, fanout_min_rows: 0}}
  merchants_by_name:
    rekey: {{source: merchants, key: display_name, columns: [country], on_conflict: latest}}
    on_input_replaced: fail
  person_addresses:
    list_join: {{left: persons, list: address_ids, right: addresses, into: addresses,
                right_columns: {address_columns}, fanout_threshold: 0.5, fanout_min_rows: 0}}
  enriched_purchases:
    enrich:
      fact: purchases
      mode: propagate
      fanout_threshold: 0.5
      fanout_min_rows: 0
      dimensions:
        - {{table: customers, fk: customer_id, prefix: buyer_, columns: [name]}}
        - {{table: display_products, fk: product_id, prefix: product_, columns: [name, display_name]}}
"""
KEYS = {
    "products": "product_id",
    "merchants": "merchant_id",
    "persons": "person_id",
    "addresses": "address_id",
    "purchases": "purchase_id",
    "customers": "customer_id",
}
MODES = {Action.FULL_REFRESH: "full_refresh", Action.REPAIR: "repair"}


def pipeline(lake, address_columns: str = "[street]") -> PipelineSpec:  # noqa: ANN001 - tests' Lakehouse
    return write_spec(lake, KEYS, VIEWS.format(address_columns=address_columns))


def planned_then_run(
    lake, spec: PipelineSpec, views: list[str] | None = None, **asked
) -> dict[str, tuple[NextBatch, ViewResult]]:  # noqa: ANN001 - tests' Lakehouse
    """Plan the views (default: all), run them, and check that each plan is what its batch did."""
    views = views or spec.view_order()
    plans = plan_views(spec, views, **asked)
    results = run_pipeline(lake.spark, spec, views, checks=False, **asked)
    for result in results:
        agrees(plans[result.view], result)
    return {r.view: (plans[r.view], r) for r in results}


def agrees(plan: NextBatch, result: ViewResult) -> None:
    """The plan says what the run did."""
    where = f"{plan.view}: planned {plan.line()!r}, ran {result.state.value}"
    if plan.action is Action.REFUSED:
        assert result.state is ViewState.FAILED and plan.reason in (result.error or ""), where
        return
    if plan.action is Action.SKIPPED:
        assert result.state is ViewState.SKIPPED, where
        return
    summary = result.summary
    assert summary is not None, where
    if plan.action is Action.NOTHING_NEW:
        assert result.state is ViewState.NOTHING_NEW and summary.batch_id is None, where
        assert summary.reason == plan.reason, where
        return
    assert result.state is ViewState.COMMITTED and summary.mode is not None, where
    assert summary.mode.value == MODES.get(plan.action, "incremental"), where
    full_recompute = summary.kind_metrics.get("full_recompute", 0) == 1
    if plan.fanout is None or plan.fanout.full is not None:  # None: the plan says it cannot tell
        assert full_recompute == bool(plan.fanout and plan.fanout.full), where
    if plan.batch_id is not None:  # a view waiting for another: planned once that one commits
        assert summary.batch_id == plan.batch_id, where
    if plan.write is not None and summary.write is not None:
        assert summary.write == plan.write, where
    for why in ("replaced", "definition", "repair"):
        if why in summary.notes:
            assert plan.reason == summary.notes[why], where


def actions(found: dict[str, tuple[NextBatch, ViewResult]]) -> dict[str, str]:
    return {view: plan.action.value for view, (plan, _) in found.items()}


def test_each_plan_says_what_the_following_run_does(lake, caplog):
    lake.create("products", PRODUCTS, [(f"p{i}", f"item {i}", float(i), f"m{i % 4}") for i in range(8)])
    lake.create("merchants", MASTERS, [(f"m{i}", f"Shop {i}", "NL", f"{i}.png") for i in range(4)])
    lake.create("persons", PERSONS, [(f"s{i}", f"person {i}", [f"a{i}"]) for i in range(4)])
    lake.create("addresses", ADDRESSES, [(f"a{i}", f"street {i}", "Delft") for i in range(4)])
    lake.create("customers", CUSTOMERS, [(f"c{i}", f"customer {i}") for i in range(4)])
    lake.create("purchases", PURCHASES, [(f"o{i}", f"c{i % 4}", f"p{i}") for i in range(8)])
    spec = pipeline(lake)

    first = planned_then_run(lake, spec)
    assert set(actions(first).values()) == {"full refresh"}
    assert first["enriched_purchases"][0].reason == "its first batch, after view display_products's"
    assert first["display_products"][0].write == "rewrite"

    again = planned_then_run(lake, spec)
    assert set(actions(again).values()) == {"nothing new"}

    # One product's price: its own view is incremental, the enrich waits for it and follows.
    lake.upsert("products", "product_id", [("p1", "item 1", 9.5, "m1")])
    caplog.set_level("INFO", logger="lakejoin.engine.batch")
    small = planned_then_run(lake, spec)
    # The batch's own log line (the Airflow task's, before its Spark jobs) is the plan's, but
    # for the estimates, which the batch decides and reports itself.
    decided = replace(small["display_products"][0], fanout=None, write=None, estimate=None)
    assert f"plan: {decided.line()}" in caplog.messages
    assert actions(small) == {
        "display_products": "incremental",
        "merchants_by_name": "nothing new",
        "person_addresses": "nothing new",
        "enriched_purchases": "incremental",
    }
    plan = small["display_products"][0]
    assert [i.text() for i in plan.inputs] == ["products 2..2 (2 change rows)", "merchants none"]
    assert (
        plan.write == "driver_merge"
        and "waits for view display_products" in small["enriched_purchases"][0].reason
    )

    # Three of four merchants, addresses and customers renamed: each join fans out (75 % > 50 %).
    lake.upsert("merchants", "merchant_id", [(f"m{i}", f"Store {i}", "NL", f"{i}.png") for i in (1, 2, 3)])
    lake.upsert("addresses", "address_id", [(f"a{i}", f"road {i}", "Delft") for i in (1, 2, 3)])
    lake.upsert("customers", "customer_id", [(f"c{i}", f"client {i}") for i in (1, 2, 3)])
    wide = planned_then_run(lake, spec)
    assert actions(wide) == {
        "display_products": "full recompute",
        "merchants_by_name": "incremental",
        "person_addresses": "full recompute",
        "enriched_purchases": "full recompute",
    }
    fanout = wide["display_products"][0].fanout
    assert fanout is not None and (fanout.reached, fanout.rows, fanout.full) == (6, 8, True)
    assert "spread evenly" in fanout.how

    # The list's columns edited: a definition change, which the plan names.
    spec = pipeline(lake, address_columns="[street, city]")
    edited = planned_then_run(lake, spec)
    assert actions(edited)["person_addresses"] == "full refresh"
    assert "right_columns" in edited["person_addresses"][0].reason
    assert {a for v, a in actions(edited).items() if v != "person_addresses"} == {"nothing new"}

    # merchants dropped and written again: display_products recomputes at the new versions,
    # merchants_by_name refuses (on_input_replaced: fail) with the fix.
    lake.replace("merchants", "merchant_id")
    replaced = planned_then_run(lake, spec)
    assert actions(replaced)["display_products"] == "full refresh"
    assert "'merchants'" in replaced["display_products"][0].reason
    refused = replaced["merchants_by_name"][0]
    assert refused.action is Action.REFUSED and "--full-refresh" in (refused.fix or "")

    # A repair of the products' versions from 2 on, re-derived at the last batch's pins.
    # enriched_purchases repairs at its own pins, never reading display_products' repair commit:
    # it waits for no one (its reason is the run's).
    repaired = planned_then_run(
        lake, spec, ["display_products", "enriched_purchases"], repair=RepairRange.parse("2")
    )
    assert actions(repaired) == {"display_products": "repair", "enriched_purchases": "repair"}
    assert "waits for" not in repaired["enriched_purchases"][0].reason
    assert [i.text() for i in repaired["display_products"][0].inputs][0] == "products 2..2 (2 change rows)"

    # A range after every pin holds nothing to repair: the plan says so, and the run skips the
    # views without a batch.
    empty = planned_then_run(
        lake, spec, ["display_products", "enriched_purchases"], repair=RepairRange.parse("50")
    )
    assert actions(empty) == {"display_products": "nothing new", "enriched_purchases": "nothing new"}
    assert empty["display_products"][0].reason.startswith("nothing to repair: version 50 to the pinned")
