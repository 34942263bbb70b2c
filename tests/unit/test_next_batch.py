"""The plan's estimates (engine/estimates.py, through engine/next_batch.py's Planner), as truth
tables without a Delta table: the fan-out rule on an estimated reach (as the view's own batches
measured it, else a uniform spread), the time of a batch from the view's batches nearest in
size, and the write `choose_output` gives on the output's log. The logs' figures are stood in
for; tests/scenarios/test_plan.py compares whole plans with the runs that follow them."""

from __future__ import annotations

import pytest

from lakejoin.delta.plans import BatchPlan
from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus
from lakejoin.engine import estimates, next_batch
from lakejoin.engine.next_batch import Action, Planner
from lakejoin.views.fk_join import FkJoinView
from tests.unit.shop import shop

pytestmark = pytest.mark.unit

INC = BatchMode.INCREMENTAL


def planner(
    monkeypatch, *, changed: dict[str, int], rows: dict[str, int], history=(), threshold=0.5, floor=0
):  # noqa: ANN001, ANN202
    """A Planner of display_products (fk_join: products x merchants) whose inputs changed
    `changed` rows each since the last batch and hold `rows` rows."""
    spec = shop()
    view = spec.views["display_products"]
    kind = FkJoinView(spec, view)
    kind.join = type(kind.join)(
        **{**kind.join.__dict__, "fanout_threshold": threshold, "fanout_min_rows": floor}
    )
    monkeypatch.setattr(next_batch, "logged_changes", lambda table, after, upto, **_: changed[table])
    monkeypatch.setattr(next_batch.TableLog, "at", staticmethod(lambda path: path.rsplit("/", 1)[1]))
    monkeypatch.setattr(estimates, "logged_row_count", lambda path, version: rows[path.rsplit("/", 1)[1]])
    plan = BatchPlan(
        "display_products", 9, INC, {"products": 3, "merchants": 2}, {"products": 4, "merchants": 3}
    )
    return Planner(spec, view, kind, list(history), {}, plan), plan


def record(batch_id: int, metrics: dict[str, int], mode: BatchMode = INC) -> BatchRecord:
    return BatchRecord("display_products", batch_id, BatchStatus.COMMITTED, mode, {}, {}, metrics=metrics)


@pytest.mark.parametrize(
    ("changed", "floor", "reached", "full"),
    [
        pytest.param(3, 0, 60, True, id="three_of_four_merchants_reach_60_percent"),
        pytest.param(1, 0, 20, False, id="one_of_four_reaches_20_percent"),
        pytest.param(3, 100, 60, False, id="within_the_floor"),
    ],
)
def test_without_a_measured_batch_the_reach_is_a_uniform_spread(monkeypatch, changed, floor, reached, full):
    p, plan = planner(
        monkeypatch,
        changed={"merchants": changed, "products": 0},
        rows={"products": 80, "merchants": 4},
        floor=floor,
    )

    found = p.fanout(plan)

    assert found is not None and (found.reached, found.rows, found.full) == (reached, 80, full)
    assert "spread evenly" in found.how


def test_the_views_own_batches_say_how_far_a_changed_key_reaches(monkeypatch):
    history = [  # 40 products per changed merchant, then 20 (the median of the two: 30)
        record(4, {"changed_keys.merchants": 1, "fanout_facts": 40}),
        record(5, {"changed_keys.products": 5}),  # no merchant changed: says nothing of the reach
        record(6, {"changed_keys.merchants": 2, "fanout_facts": 40}),
    ]
    p, plan = planner(
        monkeypatch,
        changed={"merchants": 2, "products": 0},
        rows={"products": 100, "merchants": 50},
        history=history,
    )

    found = p.fanout(plan)

    assert found is not None and (found.reached, found.full) == (60, True)  # 2 x 30 of 100
    assert found.how == "merchants: 2 changed x 30.0 left rows each (batches 4, 6)"


def test_no_changed_right_row_applies_no_fan_out_rule(monkeypatch):
    p, plan = planner(
        monkeypatch, changed={"merchants": 0, "products": 7}, rows={"products": 80, "merchants": 4}
    )

    assert p.fanout(plan) is None


def test_the_time_is_the_median_of_the_three_batches_nearest_in_size(monkeypatch):
    history = [
        record(2, {"changed_keys.products": 1, "ms.plan": 100, "ms.write": 900}),  # 1.0 s
        record(3, {"changed_keys.products": 4, "ms.plan": 100, "ms.write": 1900}),  # 2.0 s
        record(4, {"changed_keys.products": 1000, "ms.write": 30000}),  # far larger
        record(5, {"changed_keys.products": 3, "ms.write": 4000}),  # 4.0 s
        record(6, {"changed_keys.products": 3, "ms.write": 9000}, BatchMode.FULL_REFRESH),  # another action
    ]
    p, plan = planner(monkeypatch, changed={"merchants": 0, "products": 3}, rows={}, history=history)

    found = p.estimate(plan, Action.INCREMENTAL)

    assert found is not None and (found.seconds, found.batches) == (2.0, (2, 3, 5))
    assert "1-4 changed keys" in found.how and "Spark's start not included" in found.how
    assert p.estimate(plan, Action.REPAIR) is None  # no repair ran yet


class Output:
    """sink/strategy.OutputLog stood in for."""

    def __init__(self, rows: int, files: int, driver_writes: bool = True) -> None:
        self.rows, self.files, self.driver_writes = rows, files, driver_writes


@pytest.mark.parametrize(
    ("action", "output", "rewrite", "expected"),
    [
        pytest.param(Action.INCREMENTAL, Output(80, 2), None, "driver_merge", id="few_keys_small_table"),
        pytest.param(Action.INCREMENTAL, Output(5_000_000, 40), None, "upsert", id="a_large_table"),
        pytest.param(Action.INCREMENTAL, Output(80, 2, driver_writes=False), None, "upsert", id="no_driver"),
        pytest.param(Action.FULL_REFRESH, Output(0, 0), None, "rewrite", id="a_new_output_is_filled"),
        pytest.param(Action.FULL_REFRESH, Output(80, 2), "its key changed", "rewrite", id="a_new_key"),
        pytest.param(Action.FULL_RECOMPUTE, Output(80, 2), None, "driver_merge", id="fan_out_small"),
        pytest.param(Action.FULL_RECOMPUTE, Output(5_000_000, 40), None, "upsert", id="fan_out_large"),
    ],
)
def test_the_write_is_choose_outputs_on_the_outputs_log(monkeypatch, action, output, rewrite, expected):
    p, plan = planner(monkeypatch, changed={"merchants": 0, "products": 3}, rows={})
    monkeypatch.setattr(estimates, "OutputLog", lambda path: output)
    plan = BatchPlan(
        plan.view, plan.batch_id, plan.mode, plan.start_versions, plan.pinned_versions, rewrite=rewrite
    )

    assert p.write(plan, action, None) == expected
