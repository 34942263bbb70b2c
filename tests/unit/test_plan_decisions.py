"""engine/plan.py's decision, as a truth table: given where a view's batches stand (its output's
log, stood in for) and the versions its inputs are at now, the next batch finishes a half-written
one, refreshes in full, runs incrementally, or skips, and says why. No Delta table is read."""

from __future__ import annotations

import pytest

from lakejoin.delta.markers import PRE, BatchMarker
from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus
from lakejoin.engine import plan
from lakejoin.engine.plan import BatchPlan, Skip, ViewBatches
from lakejoin.views.enrich import EnrichView
from lakejoin.views.fk_join import FkJoinView
from lakejoin.views.rekey import RekeyView
from tests.unit.shop import shop

pytestmark = pytest.mark.unit

KINDS = {"display_products": FkJoinView, "merchants_by_name": RekeyView, "looked_up": EnrichView}
INC, FULL = BatchMode.INCREMENTAL, BatchMode.FULL_REFRESH


def committed(batch_id: int, pins: dict[str, int]) -> BatchRecord:
    return BatchRecord("v", batch_id, BatchStatus.COMMITTED, INC, {}, pins)


def decide(monkeypatch, view: str, batches: ViewBatches, now: dict[str, int], data: set[str], **kw):  # noqa: ANN001
    """`plan_batch` of `view` where the output's log tells `batches`, the inputs are at versions
    `now`, and only the sources in `data` hold data commits since the last batch."""
    spec = shop()
    asked: list[str] = []

    def latest_pin(spec, view, source, log):  # noqa: ANN001, ANN202, ARG001
        asked.append(source.name)
        return now[source.name]

    def may_hold_changes(path: str, after: int, upto: int) -> bool:
        assert after < upto
        return path.rsplit("/", 1)[1] in data

    monkeypatch.setattr(plan, "view_batches", lambda *a, **k: batches)
    monkeypatch.setattr(plan, "latest_pin", latest_pin)
    monkeypatch.setattr(plan, "may_hold_changes", may_hold_changes)
    kind = KINDS[view](spec, spec.views[view])
    return plan.plan_batch(spec, spec.views[view], kind, None, **kw), asked


PINS = {"products": 5, "merchants": 2}
HALF = BatchMarker(4, PRE, INC, {"products": 2, "merchants": 2}, {"products": 5, "merchants": 2})


@pytest.mark.parametrize(
    ("batches", "now", "data", "full_refresh", "expected"),
    [
        pytest.param(
            ViewBatches(None, None, 1),
            PINS,
            set(),
            False,
            BatchPlan("display_products", 1, FULL, {}, PINS),
            id="first_batch",
        ),
        pytest.param(
            ViewBatches(committed(3, PINS), HALF, 5),
            {"products": 9, "merchants": 9},
            set(),
            False,
            BatchPlan("display_products", 4, INC, HALF.start_versions, HALF.pinned_versions, finishing=True),
            id="half_written_is_finished_on_its_own_versions",
        ),
        pytest.param(
            ViewBatches(committed(3, PINS), HALF, 5),
            {"products": 9, "merchants": 2},
            set(),
            True,
            BatchPlan("display_products", 5, FULL, PINS, {"products": 9, "merchants": 2}),
            id="full_refresh_over_a_half_written",
        ),
        pytest.param(
            ViewBatches(committed(3, PINS), None, 4),
            PINS,
            set(),
            False,
            Skip("no new versions since batch 3: products@5, merchants@2", PINS, PINS),
            id="nothing_moved",
        ),
        pytest.param(
            ViewBatches(committed(3, PINS), None, 4),
            {"products": 6, "merchants": 2},
            set(),
            False,
            Skip(
                "nothing new since batch 3: only maintenance commits (VACUUM, OPTIMIZE) in products 5->6",
                PINS,
                {"products": 6, "merchants": 2},
            ),
            id="maintenance_commits_only",
        ),
        pytest.param(
            ViewBatches(committed(3, PINS), None, 4),
            {"products": 6, "merchants": 3},
            {"merchants"},
            False,
            BatchPlan("display_products", 4, INC, PINS, {"products": 6, "merchants": 3}),
            id="one_source_with_data",
        ),
        pytest.param(
            ViewBatches(committed(3, {"products": 5}), None, 4),
            PINS,
            set(),
            False,
            BatchPlan("display_products", 4, INC, {"products": 5}, PINS),
            id="a_source_the_last_batch_did_not_read",
        ),
    ],
)
def test_the_next_batch_of_an_fk_join(monkeypatch, batches, now, data, full_refresh, expected):
    decided, asked = decide(monkeypatch, "display_products", batches, now, data, full_refresh=full_refresh)

    assert decided == expected
    assert asked == (
        [] if isinstance(decided, BatchPlan) and decided.finishing else ["products", "merchants"]
    )


@pytest.mark.parametrize(
    ("last", "state_pin"),
    [({"merchants": 2, "_routing": 9}, 9), ({"merchants": 2}, -1)],
    ids=["the_state_pin_of_the_last_batch", "no_state_yet"],
)
def test_a_rekey_batch_pins_its_index_where_the_last_batch_left_it(monkeypatch, last, state_pin):
    decided, _ = decide(
        monkeypatch,
        "merchants_by_name",
        ViewBatches(committed(3, last), None, 4),
        {"merchants": 3},
        {"merchants"},
    )

    assert decided == BatchPlan("merchants_by_name", 4, INC, last, {"merchants": 3, "_routing": state_pin})


@pytest.mark.parametrize(
    ("now", "data", "expected_mode"),
    [
        ({"purchases": 5, "customers": 8, "display_products": 4}, {"customers"}, None),  # a dimension alone
        ({"purchases": 6, "customers": 2, "display_products": 3}, {"purchases"}, INC),
    ],
    ids=["a_dimension_change_is_not_its_work", "a_fact_change_is"],
)
def test_a_lookup_enrich_runs_for_its_facts_changes_alone(monkeypatch, now, data, expected_mode):
    last = {"purchases": 5, "customers": 2, "display_products": 3}

    decided, _ = decide(monkeypatch, "looked_up", ViewBatches(committed(3, last), None, 4), now, data)

    if expected_mode is None:
        assert decided == Skip("no new versions since batch 3: purchases@5", last, now)
    else:
        assert decided == BatchPlan("looked_up", 4, expected_mode, last, now)


@pytest.mark.parametrize(("after", "upto", "may"), [(5, 5, False), (5, 4, True)])
def test_a_range_that_is_empty_or_goes_back_is_answered_without_reading_the_log(after, upto, may):
    assert plan.may_hold_changes("/no/such/table", after, upto) is may
