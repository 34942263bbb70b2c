"""Which slice of a view's keys a batch audits, and how much of the view the audit has covered
(issue 40), from the batch log alone: no Spark.

A view's keys fall into `slices` slices by a hash of the key. Audit batches take the slices in
turn, so `slices` audit batches check every key. Which batches audit:
- `every: N`: the first incremental batch and every N-th batch id after it;
- otherwise a budget (0.1 by default): a batch audits when the time of the view's batches since
  the last audit (their phases but the audit) times the budget reaches that audit's time. The
  audit then costs about that share of the view's batch time, at any size: a view whose audit
  takes as long as its batch audits every 10th batch, a view whose audit is cheap each one.
  The first incremental batch audits, so the cost is known.
A full refresh derives every key anew and counts as every slice checked. Each audit batch logs
its slice and its differences (metrics `audit.slice`, `audit.differences`, and the phase's
`ms.audit`); `coverage` reads them back for `lakejoin status` and `lakejoin audit`.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus
from lakejoin.spec.model import Audit

SLICE, DIFFERENCES = "audit.slice", "audit.differences"
AUDIT_MS = "ms.audit"
_RAN = (BatchStatus.COMMITTED, BatchStatus.UNCHANGED)


def next_slice(history: list[BatchRecord], audit: Audit, batch_id: int) -> int | None:
    """The slice incremental batch `batch_id` audits, after the batches of `history` (oldest
    first); None: it audits none."""
    if not audit.enabled:
        return None
    audited = [r for r in history if r.status is BatchStatus.COMMITTED and SLICE in r.metrics]
    following = 0 if not audited else (audited[-1].metrics[SLICE] + 1) % audit.slices
    if audit.every is not None:
        first = next((r.batch_id for r in audited), batch_id)
        return following if (batch_id - first) % audit.every == 0 else None
    if not audited:
        return following
    last = audited[-1]
    spent = sum(
        ms
        for r in history
        if r.batch_id >= last.batch_id and r.status in _RAN
        for name, ms in r.metrics.items()
        if name.startswith("ms.") and name != AUDIT_MS
    )
    return following if spent * audit.budget >= last.metrics.get(AUDIT_MS, 0) else None


@dataclass(frozen=True)
class Coverage:
    """How much of a view the audit has checked: `within`, the number of the latest batches in
    which every slice was checked with no difference since (None: not every slice), or else how
    many slices were; and the last batch that found a difference."""

    slices: int
    checked: int
    within: int | None
    last_difference: BatchRecord | None

    def text(self) -> str:
        if self.within is not None:
            covered = f"every key checked within the last {self.within} batches"
        else:
            covered = f"{self.checked} of {self.slices} slices of the keys checked"
        last = self.last_difference
        found = "none" if last is None else f"batch {last.batch_id} ({last.metrics.get(DIFFERENCES, 0)} keys)"
        return f"{covered}; last difference: {found}"


def coverage(history: list[BatchRecord], audit: Audit) -> Coverage:
    """What the committed batches of `history` (oldest first) checked, newest first: their
    slices, back to a full refresh (a check of every key) or to a batch that found a difference
    (the keys it found stay wrong until a repair, so nothing before it counts)."""
    done = [r for r in history if r.status is BatchStatus.COMMITTED]
    last_difference = next((r for r in reversed(done) if r.metrics.get(DIFFERENCES, 0)), None)
    checked: set[int] = set()
    for record in reversed(done):
        if record is last_difference:
            break
        if record.mode is BatchMode.FULL_REFRESH:
            checked = set(range(audit.slices))
        elif SLICE in record.metrics:
            checked.add(record.metrics[SLICE])
        if len(checked) >= audit.slices:
            within = done[-1].batch_id - record.batch_id + 1
            return Coverage(audit.slices, audit.slices, within, last_difference)
    return Coverage(audit.slices, len(checked), None, last_difference)
