"""Truth tables of fk_join on real Delta tables (DESIGN §1, "Semantics").

One rule per test: tiny source tables in, the exact output rows out, written by hand. After
every batch the output must also equal the from-scratch oracle at the versions the batch pinned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from lakejoin.delta.records import BatchStatus
from lakejoin.engine.batch import BatchSummary, batch_log
from tests.lakehouse import MERCHANTS, PRODUCTS, fanout

pytestmark = pytest.mark.scenario

BOTH = pytest.mark.parametrize("how", ["inner", "left"])
VIEW = "display_products"
COLUMNS = ("product_id", "name", "price", "merchant_id", "display_name")

ACME, BOLT = ("m1", "Acme", "a.png"), ("m2", "Bolt", "b.png")
PEN, CUP = ("p1", "pen", 1.0, "m1"), ("p2", "cup", 2.0, "m1")


def row(*values: Any) -> dict[str, Any]:
    """One output row: product_id, name, price, merchant_id, display_name."""
    return dict(zip(COLUMNS, values, strict=True))


def shop(lake, how: str, merchants: list[tuple], products: list[tuple]):
    """merchants and products tables, and the spec of `products ⋈ merchants` (display_name only)."""
    lake.create("merchants", MERCHANTS, merchants)
    lake.create("products", PRODUCTS, products)
    return lake.spec(how, right_columns="[display_name]")


@dataclass
class Batch:
    summary: BatchSummary
    changes: list[tuple[str, str]]  # (product_id, _change_type) this batch wrote to the output's CDF


def output_version(lake, spec) -> int:
    from delta.tables import DeltaTable

    path = spec.views[VIEW].path
    if not DeltaTable.isDeltaTable(lake.spark, path):
        return -1
    return int(DeltaTable.forPath(lake.spark, path).history(1).first()["version"])


def changes_after(lake, spec, version: int) -> list[tuple[str, str]]:
    """The output's change rows committed after `version`, as (key, change type), sorted."""
    if output_version(lake, spec) <= version:
        return []  # no new commit at all (a MERGE that changes nothing does not commit)
    return sorted((r["product_id"], r["_change_type"]) for r in lake.output_changes(spec, version + 1))


def run_batch(lake, spec, **kwargs: Any) -> Batch:
    """Run one batch; it must commit, and the output must then equal the from-scratch oracle."""
    before = output_version(lake, spec)
    summary = lake.run(spec, **kwargs)
    assert summary.outcome.value == "committed"
    assert lake.output(spec) == lake.expected(spec)
    return Batch(summary, changes_after(lake, spec, before))


def updated(*keys: str) -> list[tuple[str, str]]:
    return sorted((k, kind) for k in keys for kind in ("update_preimage", "update_postimage"))


# --- foreign keys that move ---------------------------------------------------------------------


@BOTH
def test_fk_moving_x_to_y_and_back_ends_joined_with_x(lake, how):
    """An fk moving X -> Y -> X ends joined with X, with X's values as they are now."""
    spec = shop(lake, how, [ACME, BOLT], [PEN])
    assert run_batch(lake, spec, checks=False).changes == [("p1", "insert")]
    assert lake.output(spec) == [row("p1", "pen", 1.0, "m1", "Acme")]

    lake.upsert("products", "product_id", [("p1", "pen", 1.0, "m2")])
    assert run_batch(lake, spec, checks=False).changes == updated("p1")
    assert lake.output(spec) == [row("p1", "pen", 1.0, "m2", "Bolt")]

    lake.upsert("products", "product_id", [("p1", "pen", 1.0, "m1")])
    lake.upsert("merchants", "merchant_id", [("m1", "Acme 2", "a.png")])
    assert run_batch(lake, spec).changes == updated("p1")
    assert lake.output(spec) == [row("p1", "pen", 1.0, "m1", "Acme 2")]


@BOTH
def test_after_an_fk_moves_away_changes_to_the_old_key_no_longer_touch_the_row(lake, how):
    """After an fk moves X -> Y, a change to X no longer touches the row (it keeps Y's values);
    rows that still reference X do get the change."""
    spec = shop(lake, how, [ACME, BOLT], [PEN, CUP])
    run_batch(lake, spec, checks=False)
    lake.upsert("products", "product_id", [("p1", "pen", 1.0, "m2")])
    run_batch(lake, spec, checks=False)

    lake.upsert("merchants", "merchant_id", [("m1", "Acme 2", "a.png")])
    batch = run_batch(lake, spec)
    assert lake.output(spec) == [
        row("p1", "pen", 1.0, "m2", "Bolt"),
        row("p2", "cup", 2.0, "m1", "Acme 2"),
    ]
    assert batch.summary.affected_keys == 1
    assert batch.changes == updated("p2")


# --- right deletes, null and exact foreign keys ----------------------------------------------------


@BOTH
def test_right_delete_then_reinsert(lake, how):
    """A right delete: inner deletes the dependents, left nulls their right columns.
    A re-insert of the right key joins them again."""
    spec = shop(lake, how, [ACME, BOLT], [PEN, CUP, ("p3", "lid", 3.0, "m2")])
    run_batch(lake, spec)

    lake.delete("merchants", "merchant_id", ["m1"])
    batch = run_batch(lake, spec)
    if how == "inner":
        assert lake.output(spec) == [row("p3", "lid", 3.0, "m2", "Bolt")]
        assert batch.changes == [("p1", "delete"), ("p2", "delete")]
    else:
        assert lake.output(spec) == [
            row("p1", "pen", 1.0, "m1", None),
            row("p2", "cup", 2.0, "m1", None),
            row("p3", "lid", 3.0, "m2", "Bolt"),
        ]
        assert batch.changes == updated("p1", "p2")

    lake.upsert("merchants", "merchant_id", [("m1", "Acme again", "a.png")])
    batch = run_batch(lake, spec)
    assert lake.output(spec) == [
        row("p1", "pen", 1.0, "m1", "Acme again"),
        row("p2", "cup", 2.0, "m1", "Acme again"),
        row("p3", "lid", 3.0, "m2", "Bolt"),
    ]
    assert batch.changes == ([("p1", "insert"), ("p2", "insert")] if how == "inner" else updated("p1", "p2"))


@BOTH
def test_fk_null_to_value_and_value_to_null(lake, how):
    """A null fk joins nothing (inner: no row, left: null right columns); setting it joins the
    row, nulling it again un-joins it."""
    spec = shop(lake, how, [ACME], [("p1", "pen", 1.0, None), CUP])
    run_batch(lake, spec)
    if how == "inner":
        assert lake.output(spec) == [row("p2", "cup", 2.0, "m1", "Acme")]
    else:
        assert lake.output(spec) == [row("p1", "pen", 1.0, None, None), row("p2", "cup", 2.0, "m1", "Acme")]

    lake.upsert("products", "product_id", [("p1", "pen", 1.0, "m1"), ("p2", "cup", 2.0, None)])
    batch = run_batch(lake, spec)
    if how == "inner":
        assert lake.output(spec) == [row("p1", "pen", 1.0, "m1", "Acme")]
        assert batch.changes == [("p1", "insert"), ("p2", "delete")]
    else:
        assert lake.output(spec) == [row("p1", "pen", 1.0, "m1", "Acme"), row("p2", "cup", 2.0, None, None)]
        assert batch.changes == updated("p1", "p2")


@BOTH
def test_fk_matching_is_exact(lake, how):
    """fk 'a' never matches right key 'ab', and fk 'abc' never matches 'ab'; a change to 'ab'
    or a new right key 'a' reaches exactly the rows whose fk equals it."""
    spec = shop(
        lake,
        how,
        [("ab", "Abby", "ab.png")],
        [("p1", "pen", 1.0, "a"), ("p2", "cup", 2.0, "abc"), ("p3", "lid", 3.0, "ab")],
    )
    run_batch(lake, spec)
    if how == "inner":
        assert lake.output(spec) == [row("p3", "lid", 3.0, "ab", "Abby")]
    else:
        assert lake.output(spec) == [
            row("p1", "pen", 1.0, "a", None),
            row("p2", "cup", 2.0, "abc", None),
            row("p3", "lid", 3.0, "ab", "Abby"),
        ]

    lake.upsert("merchants", "merchant_id", [("ab", "Abby 2", "ab.png"), ("a", "Ada", "a.png")])
    batch = run_batch(lake, spec)
    assert batch.summary.affected_keys == 2
    if how == "inner":
        assert lake.output(spec) == [row("p1", "pen", 1.0, "a", "Ada"), row("p3", "lid", 3.0, "ab", "Abby 2")]
        assert batch.changes == [("p1", "insert"), *updated("p3")]
    else:
        assert lake.output(spec) == [
            row("p1", "pen", 1.0, "a", "Ada"),
            row("p2", "cup", 2.0, "abc", None),
            row("p3", "lid", 3.0, "ab", "Abby 2"),
        ]
        assert batch.changes == updated("p1", "p3")


# --- several changes inside one batch ----------------------------------------------------------


@BOTH
def test_insert_and_delete_of_a_key_inside_one_batch_leaves_nothing(lake, how):
    """An insert and a delete of one left key inside one batch leave no output row and no
    output change row."""
    spec = shop(lake, how, [ACME], [PEN])
    run_batch(lake, spec)

    lake.upsert("products", "product_id", [("p2", "cup", 2.0, "m1")])
    lake.delete("products", "product_id", ["p2"])
    batch = run_batch(lake, spec)
    assert lake.output(spec) == [row("p1", "pen", 1.0, "m1", "Acme")]
    assert batch.changes == []
    assert batch.summary.inserted == batch.summary.deleted == 0


def test_several_changes_to_one_key_inside_one_batch_collapse_to_the_last(lake):
    """Several changes to one key inside one batch collapse to the last one: one update per
    output row, with the final values (left and right changes alike)."""
    spec = shop(lake, "left", [ACME, BOLT], [PEN, ("p2", "cup", 2.0, "m2")])
    run_batch(lake, spec)

    lake.upsert("products", "product_id", [("p1", "pen 2", 1.0, "m2")])
    lake.upsert("products", "product_id", [("p1", "pen 3", 1.5, "m1")])
    lake.delete("products", "product_id", ["p2"])
    lake.upsert("products", "product_id", [("p2", "cup 2", 2.0, "m1")])
    lake.upsert("merchants", "merchant_id", [("m1", "Acme 2", "a.png")])
    lake.upsert("merchants", "merchant_id", [("m1", "Acme 3", "a.png")])
    batch = run_batch(lake, spec, checks=False)
    assert lake.output(spec) == [
        row("p1", "pen 3", 1.5, "m1", "Acme 3"),
        row("p2", "cup 2", 2.0, "m1", "Acme 3"),
    ]
    assert batch.summary.changed_keys == {"products": 2, "merchants": 1}
    assert batch.changes == updated("p1", "p2")


def test_deleting_a_key_that_never_existed_does_nothing(lake):
    """A delete of a key that never existed does nothing: the output and its change feed stay as
    they were, and no output commit is made.

    By default Delta records no commit for a DELETE that matches no row (then there is nothing new
    and the run is skipped); a writer with `skipRecordingEmptyCommits=false` records an empty one,
    whose changes the batch reads and finds empty: nothing new either (issue 36).
    """
    spec = shop(lake, "inner", [ACME], [PEN])
    run_batch(lake, spec)

    version = _version(lake, "products")
    lake.delete("products", "product_id", ["p9"])
    assert _version(lake, "products") == version
    assert lake.run(spec).outcome.value == "skipped"

    lake.spark.conf.set(RECORD_EMPTY_COMMITS, "false")
    try:
        lake.delete("products", "product_id", ["p9"])
    finally:
        lake.spark.conf.unset(RECORD_EMPTY_COMMITS)
    assert _version(lake, "products") == version + 1
    before = output_version(lake, spec)
    summary = lake.run(spec)
    assert summary.outcome.value == "skipped" and summary.changed_keys == {"products": 0, "merchants": 0}
    assert output_version(lake, spec) == before
    assert lake.output(spec) == lake.expected(spec) == [row("p1", "pen", 1.0, "m1", "Acme")]


RECORD_EMPTY_COMMITS = "spark.databricks.delta.skipRecordingEmptyCommits"


def _version(lake, table: str) -> int:
    from delta.tables import DeltaTable

    return int(DeltaTable.forPath(lake.spark, lake.path(table)).history(1).first()["version"])


# --- what right changes reach ---------------------------------------------------------------------


def test_right_rows_nobody_references_never_appear(lake):
    """Right rows nobody references never appear in the output, and a change to one affects no
    output key."""
    spec = shop(lake, "inner", [ACME, ("m9", "Nobody", "n.png")], [PEN])
    run_batch(lake, spec)
    assert lake.output(spec) == [row("p1", "pen", 1.0, "m1", "Acme")]

    lake.upsert("merchants", "merchant_id", [("m9", "Nobody 2", "n.png"), ("m8", "New", "x.png")])
    batch = run_batch(lake, spec)
    assert batch.summary.affected_keys == 0
    assert lake.output(spec) == [row("p1", "pen", 1.0, "m1", "Acme")]
    assert batch.changes == []


@BOTH
def test_a_right_update_reaches_every_row_that_references_it(lake, how):
    """A right update reaches every left row that references that key (several products of one
    merchant), and no other row."""
    spec = shop(
        lake,
        how,
        [ACME, BOLT],
        [PEN, CUP, ("p3", "lid", 3.0, "m1"), ("p4", "box", 4.0, "m2")],
    )
    run_batch(lake, spec)

    lake.upsert("merchants", "merchant_id", [("m1", "Acme 2", "a2.png")])
    batch = run_batch(lake, spec)
    assert batch.summary.affected_keys == 3
    assert lake.output(spec) == [
        row("p1", "pen", 1.0, "m1", "Acme 2"),
        row("p2", "cup", 2.0, "m1", "Acme 2"),
        row("p3", "lid", 3.0, "m1", "Acme 2"),
        row("p4", "box", 4.0, "m2", "Bolt"),
    ]
    assert batch.changes == updated("p1", "p2", "p3")


def test_a_right_change_reaches_the_left_rows_that_reference_it_at_the_pin(lake):
    """fk_join keeps no routing index: the pinned left table routes a right change to the left
    rows whose fk holds it now, and a left row whose fk moved is a left change, rewritten
    anyway. No state table is written."""
    from deltalake import DeltaTable

    from lakejoin.spec.layout import state_path

    spec = shop(lake, "left", [ACME, BOLT], [PEN, CUP, ("p4", "box", 4.0, "m2")])
    run_batch(lake, spec)

    lake.upsert("merchants", "merchant_id", [("m1", "Acme 2", "a2.png")])
    batch = run_batch(lake, spec)
    assert batch.summary.affected_keys == 2 and batch.changes == updated("p1", "p2")

    # A move in the same batch as a change to both merchants: the moved row joins Bolt, once.
    lake.upsert("products", "product_id", [("p2", "cup", 2.0, "m2")])
    lake.upsert("merchants", "merchant_id", [("m1", "Acme 3", "a3.png"), ("m2", "Bolt 2", "b.png")])
    batch = run_batch(lake, spec)
    assert batch.changes == updated("p1", "p2", "p4")

    lake.upsert("merchants", "merchant_id", [("m1", "Acme 4", "a4.png")])
    assert run_batch(lake, spec).changes == updated("p1")
    assert not DeltaTable.is_deltatable(state_path(spec, spec.views[VIEW]))


def test_a_popular_right_key_falls_back_to_a_full_recompute_with_the_same_result(lake):
    """A right row referenced by many left rows (a popular merchant) reaches a large share of
    the output; above `fanout_threshold` of the left rows the batch recomputes the whole view
    (then MERGEs only what changed), and later batches route incrementally again."""
    lake.create("merchants", MERCHANTS, [ACME, BOLT, ("m3", "Cask", None)])
    owners = ["m1"] * 6 + ["m2"] * 2 + ["m3"] * 2
    lake.create("products", PRODUCTS, [(f"p{i}", f"item{i}", float(i), m) for i, m in enumerate(owners)])
    spec = lake.spec("left", right_columns="[display_name]", fanout=0.25)
    run_batch(lake, spec)

    # 2 of 10 left rows reached: within 25 %, incremental.
    lake.upsert("merchants", "merchant_id", [("m2", "Bolt 2", "b.png")])
    batch = run_batch(lake, spec)
    assert fanout(batch.summary) == (0, 2, 200)
    assert batch.summary.affected_keys == 2 and batch.changes == updated("p6", "p7")
    assert batch.summary.notes["strategy"] == (
        "incremental: the changed right keys reach 2 of 10 left rows (20.0%), "
        "within the fan-out threshold of 25%"
    )

    # 6 of 10: above 25 %, the whole view is recomputed, yet only the changed rows are written.
    lake.upsert("merchants", "merchant_id", [("m1", "Acme 2", "a.png")])
    batch = run_batch(lake, spec)
    assert fanout(batch.summary) == (1, 6, 600)
    assert batch.summary.notes["strategy"].startswith("full recompute: the changed right keys reach 6 of 10")
    assert batch.summary.recomputed_rows == 10 and batch.summary.unchanged_skipped == 4
    assert batch.changes == updated(*(f"p{i}" for i in range(6)))

    # A later small change, with an fk move, is incremental again and reaches exactly its rows.
    lake.upsert("products", "product_id", [("p0", "item0", 0.0, "m3")])
    lake.upsert("merchants", "merchant_id", [("m3", "Cask 2", None)])
    batch = run_batch(lake, spec)
    assert batch.summary.metrics()["full_recompute"] == 0
    assert batch.changes == updated("p0", "p8", "p9")


# --- no-ops, full refresh, nothing new ---------------------------------------------------------------


def test_a_write_that_changes_no_content_is_nothing_new(lake):
    """Rows written back as they were change nothing (issue 36): a MERGE of identical rows on
    either side, a reload of a whole table by delta-rs's MERGE or by an overwrite. The batch
    reads the changes, finds no change of content, and ends as nothing new: 0 changed keys, no
    recompute, no output commit. It is logged `unchanged`, so the next run reads on from its
    versions instead of reading the reload again."""
    spec = shop(lake, "left", [ACME], [PEN, CUP])
    run_batch(lake, spec)
    version = output_version(lake, spec)

    lake.upsert("products", "product_id", [PEN])
    lake.upsert("merchants", "merchant_id", [ACME])
    assert lake.rewrite("products", "product_id", writer="delta-rs")
    assert lake.rewrite("merchants", "merchant_id", writer="overwrite")
    summary = lake.run(spec)
    assert summary.outcome.value == "skipped"
    assert summary.reason.startswith("nothing new: no change of content in products ")
    assert summary.changed_keys == {"products": 0, "merchants": 0}
    assert summary.recomputed_rows == summary.affected_keys == 0
    assert output_version(lake, spec) == version
    unchanged = batch_log(spec).last(VIEW)
    assert unchanged.status is BatchStatus.UNCHANGED
    assert unchanged.pinned_versions == summary.pinned_versions

    again = lake.run(spec)  # the plan reads on from the unchanged batch: nothing new, no Spark job
    assert again.outcome.value == "skipped" and again.batch_id is None
    assert again.reason.startswith(f"no new versions since batch {unchanged.batch_id} ")

    # A reload by Spark's MERGE in the same batch as a real change: only the change counts.
    assert lake.rewrite("products", "product_id", writer="spark")
    lake.upsert("products", "product_id", [("p2", "cup", 2.5, "m1")])
    batch = run_batch(lake, spec)
    assert batch.summary.start_versions == unchanged.pinned_versions
    assert batch.summary.changed_keys == {"products": 1, "merchants": 0}
    assert batch.summary.affected_keys == 1
    assert batch.changes == updated("p2")
    assert lake.output(spec) == [row("p1", "pen", 1.0, "m1", "Acme"), row("p2", "cup", 2.5, "m1", "Acme")]


def test_full_refresh_writes_only_real_changes(lake):
    """A full refresh when nothing changed writes no output change rows; after data changed it
    equals the oracle and writes exactly the rows that changed."""
    spec = shop(lake, "inner", [ACME, BOLT], [PEN, CUP, ("p3", "lid", 3.0, "m2")])
    run_batch(lake, spec)

    batch = run_batch(lake, spec, full_refresh=True)
    assert batch.summary.mode.value == "full_refresh"
    assert batch.changes == []

    lake.upsert("merchants", "merchant_id", [("m2", "Bolt 2", "b.png")])
    lake.delete("products", "product_id", ["p2"])
    lake.upsert("products", "product_id", [("p4", "box", 4.0, "m1")])
    batch = run_batch(lake, spec, full_refresh=True, checks=False)
    assert lake.output(spec) == [
        row("p1", "pen", 1.0, "m1", "Acme"),
        row("p3", "lid", 3.0, "m2", "Bolt 2"),
        row("p4", "box", 4.0, "m1", "Acme"),
    ]
    assert batch.changes == sorted([("p2", "delete"), ("p4", "insert"), *updated("p3")])


def test_nothing_new_is_skipped(lake):
    """Re-running with no new source versions is skipped: no batch, no output commit."""
    spec = shop(lake, "left", [ACME], [PEN])
    run_batch(lake, spec, checks=False)
    version = output_version(lake, spec)

    summary = lake.run(spec)
    assert summary.outcome.value == "skipped"
    assert summary.batch_id is None
    assert output_version(lake, spec) == version
    assert lake.output(spec) == lake.expected(spec) == [row("p1", "pen", 1.0, "m1", "Acme")]
