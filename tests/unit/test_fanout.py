"""views/fanout.py: when a batch's changes on the one side of a join reach so many rows of the
many side that it recomputes the whole view, and the figures and the note it leaves. The row
count comes from the Delta log (stood in for here); the batch's context is used only for the
source's pinned version and the notes, so a stand-in holds those two."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from lakejoin.spec.model import Source
from lakejoin.views import fanout

pytestmark = pytest.mark.unit

PRODUCTS = Source("products", "/lake/products", "product_id", None)


@dataclass
class Pinned:
    """What `fans_out` asks of a batch's context: the pinned version, and the notes."""

    notes: dict[str, str] = field(default_factory=dict)

    def version(self, source: Source) -> int:
        assert source is PRODUCTS
        return 7


@pytest.mark.parametrize(
    ("reached", "rows", "full", "permille"),
    [
        (0, 1000, False, 0),  # nothing reached: the table is not even counted
        (1, 1000, False, 1),
        (200, 1000, False, 200),  # at the threshold: still incremental
        (201, 1000, True, 201),
        (5, 0, False, 0),  # an empty many side: no share to speak of
        (10, 10, True, 1000),
    ],
)
def test_a_batch_recomputes_in_full_above_the_share_of_rows_its_changes_reach(
    monkeypatch, reached, rows, full, permille
):
    counted: list[tuple[str, int]] = []

    def logged(path: str, version: int) -> int:
        counted.append((path, version))
        return rows

    monkeypatch.setattr(fanout, "logged_row_count", logged)
    ctx, counts = Pinned(), {"other": 1}

    decided = fanout.fans_out(ctx, PRODUCTS, reached, 0.2, counts, changed="right keys", of="left rows")

    assert decided is full
    assert counts == {
        "other": 1,
        "fanout_facts": reached,
        "fanout_permille": permille,
        "full_recompute": int(full),
    }
    assert counted == ([("/lake/products", 7)] if reached else [])
    if reached:
        assert ctx.notes["strategy"] == fanout.fanout_note(
            reached, rows, 0.2, full=full, changed="right keys", of="left rows"
        )
    else:
        assert ctx.notes == {}


@pytest.mark.parametrize(
    ("full", "note"),
    [
        (
            False,
            "incremental: the changed right keys reach 3 of 40 left rows (7.5%), "
            "within the fan-out threshold of 20%",
        ),
        (
            True,
            "full recompute: the changed right keys reach 30 of 40 left rows (75.0%), "
            "above the fan-out threshold of 20%",
        ),
    ],
)
def test_the_note_says_the_strategy_the_share_and_the_threshold(full, note):
    reached = 30 if full else 3
    assert fanout.fanout_note(reached, 40, 0.2, full=full, changed="right keys", of="left rows") == note


def test_a_note_of_no_rows_shows_no_share():
    assert "reach 0 of 0 facts (0.0%)" in fanout.fanout_note(
        0, 0, 0.5, full=False, changed="keys", of="facts"
    )


@pytest.mark.parametrize(
    ("reached", "rows", "threshold", "full"),
    [
        (0, 1000, 0.2, False),
        (200, 1000, 0.2, False),  # at the threshold: incremental
        (201, 1000, 0.2, True),
        (5, 0, 0.2, False),  # an empty many side
        (0, 0, 0.0, False),
        (1, 1000, 0.0, True),  # a threshold of 0: any reached row recomputes
        (1000, 1000, 1.0, False),  # of 1: never
        (3, 2, 1.0, True),  # more rows reached than counted (a stale count) is above it
    ],
)
def test_the_fanout_rule(reached, rows, threshold, full):
    assert fanout.recomputes_in_full(reached, rows, threshold) is full


@pytest.mark.parametrize(
    ("reached", "rows", "min_rows", "full"),
    [
        (6, 20, 1000, False),  # 30 % of a small table, within the floor: routed
        (1000, 2000, 1000, False),  # at the floor: routed
        (1001, 2000, 1000, True),  # past the floor and above the share
        (1001, 100_000, 1000, False),  # past the floor, within the share
        (6, 20, 0, True),  # no floor: the share alone decides
    ],
)
def test_a_reach_within_the_floor_is_routed_whatever_its_share(reached, rows, min_rows, full):
    assert fanout.recomputes_in_full(reached, rows, 0.2, min_rows) is full


def test_the_floor_note_says_why_a_large_share_stays_incremental():
    note = fanout.fanout_note(6, 20, 0.2, full=False, changed="right keys", of="left rows", min_rows=1000)
    assert note == (
        "incremental: the changed right keys reach 6 of 20 left rows (30.0%), "
        "within the fan-out floor of 1,000 rows"
    )


def test_a_reach_within_the_floor_counts_no_rows_by_a_scan(monkeypatch):
    """A table the log cannot count (deletion vectors) would be counted by a Spark scan; a reach
    within the floor decides nothing by its share, so the small batch scans nothing (the stand-in
    context has no snapshot to scan)."""
    monkeypatch.setattr(fanout, "logged_row_count", lambda path, version: None)
    ctx, counts = Pinned(), {}

    decided = fanout.fans_out(
        ctx, PRODUCTS, 6, 0.2, counts, changed="right keys", of="left rows", min_rows=1000
    )

    assert decided is False
    assert counts == {"fanout_facts": 6, "fanout_permille": 0, "full_recompute": 0}
    assert ctx.notes["strategy"] == (
        "incremental: the changed right keys reach 6 left rows, within the fan-out floor of 1,000 rows"
    )
