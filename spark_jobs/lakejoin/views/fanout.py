"""When a batch recomputes the whole view instead of routing its changes: the fan-out rule
(enrich, fk_join and list_join share it).

A change on the one side of a join reaches many rows of the many side; above a share of them,
a full recompute is cheaper than routing every key (docs/bench/analysis.md). Apart from the
view kinds because the rule, its figures and its note in the batch report are the same for all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from lakejoin.delta.sources import logged_row_count

if TYPE_CHECKING:
    from lakejoin.spec.model import Source
    from lakejoin.views.context import BatchContext


class FanOutSettings(Protocol):
    """A view definition's fan-out settings (spec/kind_parts.FANOUT)."""

    @property
    def fanout_threshold(self) -> float: ...

    @property
    def fanout_min_rows(self) -> int: ...


@dataclass(frozen=True)
class FanOutRule:
    """A kind's fan-out rule, as data: the `many` side whose rows the changes of the `ones`
    reach, the view's settings, and the words its note uses. The batch applies it with the
    reach it counted (`fans_out`); `lakejoin plan` with the reach it estimates from the logs
    (engine/estimates.py): both decide with `recomputes_in_full`."""

    many: Source
    ones: tuple[Source, ...]
    threshold: float
    min_rows: int
    changed: str  # what changed on the one side ("right keys")
    of: str  # what they reach on the many side ("left rows")

    @classmethod
    def of_join(cls, left: Source, right: Source, join: FanOutSettings) -> FanOutRule:
        """The rule of the two joins: the changed right keys reach left rows."""
        return cls(left, (right,), join.fanout_threshold, join.fanout_min_rows, "right keys", "left rows")


def recomputes_in_full(reached: int, rows: int, threshold: float, min_rows: int = 0) -> bool:
    """Whether changes reaching `reached` of the many side's `rows` rows make the batch a full
    recompute: more than `min_rows` of them and above `threshold` of them (none of an empty
    table). A reach of a few rows is routed whatever its share: on a table of 20 rows, 6 is 30 %,
    and routing 6 keys costs a fraction of a recompute's scans."""
    return rows > 0 and reached > min_rows and reached > threshold * rows


def fanout_note(
    reached: int, rows: int, threshold: float, *, full: bool, changed: str, of: str, min_rows: int = 0
) -> str:
    strategy = "full recompute" if full else "incremental"
    if not full and 0 < reached <= min_rows:
        share = f" ({reached / rows:.1%})" if rows else ""
        whole = f" of {rows}" if rows else ""
        return (
            f"{strategy}: the changed {changed} reach {reached}{whole} {of}{share}, "
            f"within the fan-out floor of {min_rows:,} rows"
        )
    share_of = reached / rows if rows else 0.0
    verdict = "above" if full else "within"
    return (
        f"{strategy}: the changed {changed} reach {reached} of {rows} {of} ({share_of:.1%}), "
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
    min_rows: int = 0,
) -> bool:
    """Whether a batch whose changes on the one side reach `reached` rows of `source` (the many
    side) should recompute the whole view instead: more than `min_rows` and above `threshold` of
    its rows, a full recompute is cheaper than routing every key (docs/bench/analysis.md).
    Records the figures in `counts` and the reason in the batch's notes."""
    # The log's file statistics count the rows without a Spark job; a table with deletion
    # vectors is counted by a scan, and only when the reach passes the floor (below it the
    # share decides nothing, so a small batch never scans the table to count it).
    rows = 0
    if reached:
        logged = logged_row_count(source.path, ctx.version(source))
        if logged is not None:
            rows = logged
        elif reached > min_rows:
            rows = ctx.snapshot(source).count()
    full = recomputes_in_full(reached, rows, threshold, min_rows)
    counts.update(
        fanout_facts=reached,
        fanout_permille=round(1000 * reached / rows) if rows else 0,
        full_recompute=int(full),
    )
    if reached or full:
        ctx.notes["strategy"] = fanout_note(
            reached, rows, threshold, full=full, changed=changed, of=of, min_rows=min_rows
        )
    return full


def rule_fans_out(ctx: BatchContext, rule: FanOutRule, reached: int, counts: dict[str, int]) -> bool:
    """`fans_out` with a kind's `rule`."""
    return fans_out(
        ctx,
        rule.many,
        reached,
        rule.threshold,
        counts,
        changed=rule.changed,
        of=rule.of,
        min_rows=rule.min_rows,
    )
