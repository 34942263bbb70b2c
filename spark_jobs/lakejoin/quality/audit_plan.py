"""Which slice of a view's keys a batch audits, and how much of the view the audit has covered
(issue 40), from the batch log alone: no Spark.

A view's keys fall into `slices` slices by a hash of the key. Audit batches (the first, then
every `every`-th batch id) take the slices in turn, so `slices` audit batches check every key.
A full refresh derives every key anew and counts as every slice checked. Each audit batch logs
its slice and its differences (metrics `audit.slice`, `audit.differences`); `coverage` reads
them back for `lakejoin status` and the report pages.

>>> slice_of(1, Audit(slices=4)), slice_of(5, Audit(slices=4)), slice_of(2, Audit(slices=4, every=2))
(0, 0, None)
"""

from __future__ import annotations

from dataclasses import dataclass

from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus
from lakejoin.spec.model import Audit

SLICE, DIFFERENCES = "audit.slice", "audit.differences"


def slice_of(batch_id: int, audit: Audit) -> int | None:
    """The slice batch `batch_id` audits (None: it audits none)."""
    if not audit.enabled or (batch_id - 1) % audit.every:
        return None
    return ((batch_id - 1) // audit.every) % audit.slices


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
