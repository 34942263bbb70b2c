"""When a batch recomputes the whole view instead of routing its changes: the fan-out rule
(enrich, fk_join and list_join share it).

A change on the one side of a join reaches many rows of the many side; above a share of them,
a full recompute is cheaper than routing every key (docs/bench/analysis.md). Apart from the
view kinds because the rule, its figures and its note in the batch report are the same for all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakejoin.delta.sources import logged_row_count

if TYPE_CHECKING:
    from lakejoin.spec.model import Source
    from lakejoin.views.context import BatchContext


def recomputes_in_full(reached: int, rows: int, threshold: float) -> bool:
    """Whether changes reaching `reached` of the many side's `rows` rows make the batch a full
    recompute: above `threshold` of them (none of an empty table)."""
    return rows > 0 and reached > threshold * rows


def fanout_note(reached: int, rows: int, threshold: float, *, full: bool, changed: str, of: str) -> str:
    share = reached / rows if rows else 0.0
    verdict = "above" if full else "within"
    strategy = "full recompute" if full else "incremental"
    return (
        f"{strategy}: the changed {changed} reach {reached} of {rows} {of} ({share:.1%}), "
        f"{verdict} the fan-out threshold of {threshold:.0%}"
    )


def fans_out(
    ctx: BatchContext,
    source: Source,
    reached: int,
    threshold: float,
    counts: dict[str, int],
    *,
    changed: str,
    of: str,
) -> bool:
    """Whether a batch whose changes on the one side reach `reached` rows of `source` (the many
    side) should recompute the whole view instead: above `threshold` of its rows, a full
    recompute is cheaper than routing every key (docs/bench/analysis.md). Records the figures in
    `counts` and the reason in the batch's notes."""
    # The log's file statistics count the rows without a Spark job; a table with deletion
    # vectors is counted by a scan, and only when a change reaches any row.
    rows = 0
    if reached:
        logged = logged_row_count(source.path, ctx.version(source))
        rows = logged if logged is not None else ctx.snapshot(source).count()
    full = recomputes_in_full(reached, rows, threshold)
    counts.update(
        fanout_facts=reached,
        fanout_permille=round(1000 * reached / rows) if rows else 0,
        full_recompute=int(full),
    )
    if reached or full:
        ctx.notes["strategy"] = fanout_note(reached, rows, threshold, full=full, changed=changed, of=of)
    return full
