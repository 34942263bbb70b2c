"""Truth tables of enrich on real Delta tables, both modes (DESIGN §1, issue 4).

purchases(purchase_id, customer_id, product_id, qty) enriched from customers (left, prefix
customer_, column name) and products (inner, prefix product_, column title). The same change
history runs under `propagate` and `lookup`; the rules differ only where a dimension changes.
After every batch the output's change feed must name exactly the purchases the rules say.
"""

from __future__ import annotations

import re
import signal
from typing import Any

import pytest

from lakejoin.engine.batch import batch_log, recompute_view
from tests.lakehouse import (
    CUSTOMERS,
    ITEMS,
    PURCHASES,
    enrich_oracle,
    fanout,
    output_rows,
    run_and_watch,
    run_cli_with_failpoint,
    write_spec,
)

pytestmark = pytest.mark.scenario

VIEW = "enriched_purchases"
KEYS = {"purchases": "purchase_id", "customers": "customer_id", "products": "product_id"}


def spec_of(lake, mode: str, settings: str = ""):
    views = f"""\
  {VIEW}:
    enrich:
      fact: purchases
      mode: {mode}{settings}
      dimensions:
        - {{table: customers, fk: customer_id, prefix: customer_, columns: [name]}}
        - {{table: products, fk: product_id, prefix: product_, columns: [title], how: inner}}
"""
    return write_spec(lake, KEYS, views)


def create_tables(lake) -> None:
    lake.create("customers", CUSTOMERS, [("c1", "Ann", "NO"), ("c2", "Ben", "SE")])
    lake.create("products", ITEMS, [("p1", "pen", 1.0), ("p2", "cup", 2.0)])
    lake.create(
        "purchases",
        PURCHASES,
        [
            ("o1", "c1", "p1", 2),
            ("o2", "c9", "p1", 1),  # no customer c9: left keeps it with a null name
            ("o3", "c2", "p9", 1),  # no product p9: inner leaves it out
            ("o4", "c1", "p2", 3),
        ],
    )


def run(lake, spec, **kwargs: Any):
    """One batch; returns its summary and the purchases whose output rows changed, by change."""
    summary, rows = run_and_watch(lake, spec, VIEW, **kwargs)
    changed: dict[str, set[str]] = {}
    for r in rows:
        changed.setdefault(r["_change_type"], set()).add(r["purchase_id"])
    return summary, changed


def table(lake, spec) -> dict[str, tuple]:
    """purchase -> (customer_id, customer_name, product_id, product_title)."""
    return {
        r["purchase_id"]: (r["customer_id"], r["customer_name"], r["product_id"], r["product_title"])
        for r in output_rows(lake, spec, VIEW)
    }


def test_propagate_rewrites_every_fact_a_dimension_change_reaches(lake):
    create_tables(lake)
    # Every batch here reaches most of the few facts; a threshold of 1 keeps them incremental.
    spec = spec_of(lake, "propagate", "\n      fanout_threshold: 1.0")
    run(lake, spec)
    # Several dimensions: o2 matches products only (kept, left), o3 customers only (dropped, inner).
    assert table(lake, spec) == {
        "o1": ("c1", "Ann", "p1", "pen"),
        "o2": ("c9", None, "p1", "pen"),
        "o4": ("c1", "Ann", "p2", "cup"),
    }

    # A fact arrives before its dimension rows; a dimension update reaches its facts.
    lake.upsert("purchases", "purchase_id", [("o5", "c3", "p3", 1)])
    lake.upsert("customers", "customer_id", [("c1", "Anna", "NO")])
    _, changed = run(lake, spec)
    assert changed == {"update_postimage": {"o1", "o4"}}
    assert "o5" not in table(lake, spec)

    # The missing dimension rows arrive: the waiting facts join. A dimension delete nulls a left
    # dimension. A fact moves to another product.
    lake.upsert("customers", "customer_id", [("c3", "Cy", "DK")])
    lake.upsert("products", "product_id", [("p3", "mug", 3.0), ("p9", "bowl", 4.0)])
    lake.delete("customers", "customer_id", ["c2"])
    lake.upsert("purchases", "purchase_id", [("o4", "c1", "p1", 3)])
    _, changed = run(lake, spec)
    assert changed == {"insert": {"o3", "o5"}, "update_postimage": {"o4"}}
    assert table(lake, spec) == {
        "o1": ("c1", "Anna", "p1", "pen"),
        "o2": ("c9", None, "p1", "pen"),
        "o3": ("c2", None, "p9", "bowl"),
        "o4": ("c1", "Anna", "p1", "pen"),
        "o5": ("c3", "Cy", "p3", "mug"),
    }

    # After the move, the old product no longer reaches o4; the new one does. A fact delete
    # deletes its row; an inner dimension delete drops its facts.
    lake.upsert("products", "product_id", [("p2", "cup XL", 2.0), ("p1", "pen+", 1.0)])
    lake.delete("purchases", "purchase_id", ["o2"])
    lake.delete("products", "product_id", ["p3"])
    summary, changed = run(lake, spec)
    assert changed == {"update_postimage": {"o1", "o4"}, "delete": {"o2", "o5"}}
    assert output_rows(lake, spec, VIEW) == enrich_oracle(lake, spec, VIEW)
    assert summary.metrics()["full_recompute"] == 0


def test_a_dimension_added_to_the_spec_refreshes_the_view_which_adds_its_columns(lake):
    """A spec that gains a dimension changes the view's definition (issue 35): the next batch
    refreshes in full on its own and adds the columns, and the new dimension's changes
    propagate (routed from the pinned facts' new fk column: no index to rebuild)."""
    create_tables(lake)
    views = f"""\
  {VIEW}:
    enrich:
      fact: purchases
      mode: propagate
      fanout_threshold: 1.0
      dimensions:
        - {{table: customers, fk: customer_id, prefix: customer_, columns: [name]}}
"""
    one = write_spec(lake, KEYS, views)
    run(lake, one)
    lake.upsert("customers", "customer_id", [("c1", "Anna", "NO")])
    _, changed = run(lake, one)
    assert changed == {"update_postimage": {"o1", "o4"}}
    before = output_rows(lake, one, VIEW)

    two = spec_of(lake, "propagate", "\n      fanout_threshold: 1.0")
    lake.upsert("products", "product_id", [("p1", "pen+", 1.0)])
    summary, _ = run(lake, two)
    assert summary.mode is not None and summary.mode.value == "full_refresh"
    assert "dimensions[1].table: none -> products" in summary.notes["definition"]
    assert "the output has columns" in summary.notes["output"]  # rewritten with the new columns
    assert output_rows(lake, two, VIEW) != before
    assert output_rows(lake, two, VIEW) == enrich_oracle(lake, two, VIEW)
    lake.upsert("products", "product_id", [("p2", "cup XL", 2.0)])
    _, changed = run(lake, two)
    assert changed == {"update_postimage": {"o4"}}
    assert output_rows(lake, two, VIEW) == enrich_oracle(lake, two, VIEW)


def test_a_propagate_batch_killed_before_its_output_commit_ends_exact_on_the_next_run(lake):
    """KIP-314 lacked deterministic offsets; Delta versions give them. The batch dies (SIGKILL, its
    own JVM) where a view with state has written it, just before its output commit: nothing of
    the batch happened. The next run plans afresh at newer versions, routes from the pinned
    facts (o4 now references c2), and ends exact."""
    create_tables(lake)
    spec = spec_of(lake, "propagate", "\n      fanout_threshold: 1.0")
    run(lake, spec)
    lake.upsert("customers", "customer_id", [("c1", "Anna", "NO")])
    lake.upsert("purchases", "purchase_id", [("o4", "c2", "p1", 3)])  # o4 moves from c1 to c2
    output_before = output_rows(lake, spec, VIEW)

    crashed = run_cli_with_failpoint(spec.file, "after_state_write")

    assert crashed.returncode == -signal.SIGKILL, crashed.stdout[-3000:] + crashed.stderr[-3000:]
    assert [r.batch_id for r in batch_log(spec).history(VIEW)] == [1]
    assert output_rows(lake, spec, VIEW) == output_before
    # Changes after the crash join the batch the next run plans.
    lake.upsert("customers", "customer_id", [("c1", "Annie", "NO"), ("c2", "Benny", "SE")])

    retry, changed = run(lake, spec)

    assert retry.batch_id == 2
    assert changed == {"update_postimage": {"o1", "o4"}}
    assert output_rows(lake, spec, VIEW) == enrich_oracle(lake, spec, VIEW)
    assert table(lake, spec)["o1"][:2] == ("c1", "Annie") and table(lake, spec)["o4"][:2] == ("c2", "Benny")

    # The routes are right: c2's rename reaches o4, c1's no longer does.
    lake.upsert("customers", "customer_id", [("c1", "Ann", "NO"), ("c2", "Ben", "SE")])
    following, changed = run(lake, spec)

    assert following.batch_id == 3 and changed == {"update_postimage": {"o1", "o4"}}
    assert table(lake, spec)["o1"][:2] == ("c1", "Ann") and table(lake, spec)["o4"][:2] == ("c2", "Ben")
    assert output_rows(lake, spec, VIEW) == enrich_oracle(lake, spec, VIEW)


def test_lookup_keeps_the_dimensions_a_fact_was_enriched_with(lake):
    create_tables(lake)
    spec = spec_of(lake, "lookup")
    run(lake, spec)
    first = table(lake, spec)
    assert first == {
        "o1": ("c1", "Ann", "p1", "pen"),
        "o2": ("c9", None, "p1", "pen"),
        "o4": ("c1", "Ann", "p2", "cup"),
    }

    # A fact arrives before its dimension row: inner leaves it out. A dimension update rewrites
    # nothing.
    lake.upsert("purchases", "purchase_id", [("o5", "c3", "p3", 1)])
    lake.upsert("customers", "customer_id", [("c1", "Anna", "NO")])
    summary, changed = run(lake, spec)
    assert changed == {} and table(lake, spec) == first
    assert summary.changed_keys == {"purchases": 1}  # the dimensions' changes are not even read

    # The dimension rows arriving later do not pull the waiting facts in; a dimension delete
    # changes nothing. A fact that changes is enriched with the dimensions as they are now.
    lake.upsert("customers", "customer_id", [("c3", "Cy", "DK")])
    lake.upsert("products", "product_id", [("p3", "mug", 3.0), ("p9", "bowl", 4.0)])
    lake.delete("customers", "customer_id", ["c2"])
    lake.upsert("purchases", "purchase_id", [("o4", "c1", "p1", 3)])
    _, changed = run(lake, spec)
    assert changed == {"update_postimage": {"o4"}}
    assert table(lake, spec) == {**first, "o4": ("c1", "Anna", "p1", "pen")}

    # Only dimension changes: nothing to do, the batch is skipped. A fact delete deletes its row.
    lake.upsert("products", "product_id", [("p1", "pen+", 1.0)])
    summary, changed = run(lake, spec)
    assert summary.outcome.value == "skipped" and changed == {}
    lake.delete("purchases", "purchase_id", ["o2"])
    _, changed = run(lake, spec)
    assert changed == {"delete": {"o2"}}

    # A full refresh re-enriches every fact with the dimensions as they are now.
    _, changed = run(lake, spec, full_refresh=True)
    assert changed == {"update_postimage": {"o1", "o4"}, "insert": {"o3", "o5"}}
    assert output_rows(lake, spec, VIEW) == enrich_oracle(lake, spec, VIEW)


def test_lookup_keeps_the_enrichment_of_a_fact_written_back_unchanged(lake):
    """Issue 36: only a change of a fact's content re-enriches it. Facts written back as they were
    (delta-rs's MERGE of one, a reload of the whole fact table by Spark's MERGE or an overwrite)
    keep the dimensions they were enriched with; such a batch is nothing new, no output commit.
    A fact whose quantity changes is re-enriched with today's dimensions."""
    create_tables(lake)
    spec = spec_of(lake, "lookup")
    run(lake, spec)
    first = table(lake, spec)
    lake.upsert("customers", "customer_id", [("c1", "Anna", "NO")])
    lake.upsert("products", "product_id", [("p2", "cup XL", 2.0)])

    for writer, keys in (("delta-rs", ["o1"]), ("spark", None), ("overwrite", None)):
        assert lake.rewrite("purchases", "purchase_id", keys, writer=writer)
        summary, changed = run(lake, spec)
        assert summary.outcome.value == "skipped", writer
        assert summary.changed_keys == {"purchases": 0} and changed == {}
        assert table(lake, spec) == first

    lake.upsert("purchases", "purchase_id", [("o1", "c1", "p1", 5)])
    assert lake.rewrite("purchases", "purchase_id", ["o4"], writer="spark")
    summary, changed = run(lake, spec)
    assert summary.changed_keys == {"purchases": 1}
    assert changed == {"update_postimage": {"o1"}}
    assert table(lake, spec) == {**first, "o1": ("c1", "Anna", "p1", "pen")}  # o4 keeps Ann, cup


def test_a_hot_dimension_key_falls_back_to_a_full_recompute_with_the_same_result(lake):
    lake.create("customers", CUSTOMERS, [(f"c{i}", f"name{i}", "NO") for i in range(4)])
    lake.create("products", ITEMS, [("p1", "pen", 1.0)])
    # c0 is hot: 6 of 10 purchases; c1: 2; c2, c3: 1 each.
    owners = ["c0"] * 6 + ["c1"] * 2 + ["c2", "c3"]
    lake.create("purchases", PURCHASES, [(f"o{i}", c, "p1", 1) for i, c in enumerate(owners)])
    spec = spec_of(lake, "propagate", "\n      fanout_threshold: 0.25\n      fanout_min_rows: 0")
    run(lake, spec)

    # 2 of 10 facts reached: within 25 %, incremental.
    lake.upsert("customers", "customer_id", [("c1", "renamed1", "NO")])
    summary, changed = run(lake, spec)
    assert fanout(summary) == (0, 2, 200)
    assert summary.affected_keys == 2 and changed == {"update_postimage": {"o6", "o7"}}
    assert "incremental: the changed dimension keys reach 2 of 10 facts (20.0%)" in summary.notes["strategy"]

    # 6 of 10: above 25 %, the whole view is recomputed, yet only the changed rows are written.
    lake.upsert("customers", "customer_id", [("c0", "renamed0", "NO")])
    summary, changed = run(lake, spec)
    assert fanout(summary) == (1, 6, 600)
    assert summary.notes["strategy"] == (
        "full recompute: the changed dimension keys reach 6 of 10 facts (60.0%), "
        "above the fan-out threshold of 25%"
    )
    assert summary.recomputed_rows == 10 and summary.unchanged_skipped == 4
    assert changed == {"update_postimage": {f"o{i}" for i in range(6)}}
    assert output_rows(lake, spec, VIEW) == enrich_oracle(lake, spec, VIEW)

    # The routing indexes stayed right through the full recompute: a later small change is
    # incremental again and reaches exactly its facts.
    lake.upsert("customers", "customer_id", [("c3", "renamed3", "NO")])
    lake.upsert("purchases", "purchase_id", [("o0", "c3", "p1", 1)])
    summary, changed = run(lake, spec)
    assert summary.metrics()["full_recompute"] == 0
    assert changed == {"update_postimage": {"o0", "o9"}}
    assert output_rows(lake, spec, VIEW) == enrich_oracle(lake, spec, VIEW)


def physical_plan(frame, capsys) -> str:
    frame.explain()
    return capsys.readouterr().out


def test_an_enrich_batch_broadcasts_the_dimensions_and_never_shuffles_the_facts(lake, capsys):
    create_tables(lake)
    spec = spec_of(lake, "propagate")
    plan = physical_plan(recompute_view(lake.spark, spec, VIEW), capsys)
    assert plan.count("BroadcastHashJoin") == 2, plan
    assert "BroadcastExchange" in plan
    assert "Exchange hashpartitioning" not in plan and "SortMergeJoin" not in plan, plan


def test_a_dimension_over_the_broadcast_limit_is_shuffled_with_a_warning(lake, capsys, caplog):
    create_tables(lake)
    spec = spec_of(lake, "propagate", "\n      broadcast_limit_mb: 0.0001")
    plan = physical_plan(recompute_view(lake.spark, spec, VIEW), capsys)
    assert "BroadcastHashJoin" not in plan and plan.count("ShuffledHashJoin") == 2, plan

    summary, _ = run(lake, spec)
    note = summary.notes["broadcast.customers"]
    # The size's unit follows the size (bytes, KB, ...), and the size follows the file layout.
    size = r"dimension 'customers' is [\d.,]+ \w+ on disk, above broadcast_limit_mb 0\.0001"
    assert re.match(size, note), note
    assert "joined with a shuffle instead of a broadcast" in note
    assert any("broadcast_limit_mb" in r.getMessage() for r in caplog.records)
    assert summary.metrics()["shuffled.products"] == 1
    assert output_rows(lake, spec, VIEW) == enrich_oracle(lake, spec, VIEW)
