"""Which slice of a view's keys a batch audits, and how much of the view the audit has covered
(issue 40), from the batch log alone: no Spark.

Audit batches take a view's `slices` slices in turn; a round of `slices` audit batches checks
every key. A round cuts the keys by ranges of the key (or by a hash of it) from the output's
files at the version its first batch committed (engine/audit.py). Which batches audit:
- `every: N`: the first incremental batch and every N-th batch id after it;
- otherwise a budget (0.1 by default): a batch audits when the time of the view's batches since
  the last audit (their phases but the audit) times the budget reaches that audit's time. The
  audit then costs about that share of the view's batch time, at any size: a view whose audit
  takes as long as its batch audits every 10th batch, a view whose audit is cheap each one.
  Before the first audit, its time is taken to be what the view's last full refresh spent
  deriving its rows (`refreshed_cost`), against the batches after that refresh: a small view
  pays no audit on its first incremental batch. A view with no full refresh in its log (a log
  rebuilt, an upgrade) audits its next incremental batch, so the cost is known.
A full refresh derives every key anew and counts as every slice checked. Each audit batch logs
its slice, its differences, the number of slices and a fingerprint of how its round cut the
keys (metrics `audit.slice`, `audit.differences`, `audit.slices`, `audit.cuts`; 0: it checked
every key), and the phase's `ms.audit`; `coverage` reads them back for `lakejoin status` and
`lakejoin audit`. Only slices cut alike add up to every key.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus
from lakejoin.spec.model import Audit

SLICE, DIFFERENCES = "audit.slice", "audit.differences"
SLICES, CUTS = "audit.slices", "audit.cuts"
EVERY_KEY = 0  # the `audit.cuts` of a batch that checked every key
AUDIT_MS = "ms.audit"
_RAN = (BatchStatus.COMMITTED, BatchStatus.UNCHANGED)


def round_start(history: list[BatchRecord], slice_: int | None) -> int | None:
    """The output version whose files cut the keys of the round that batch auditing `slice_`
    belongs to (engine/audit.py): the version the round's slice-0 batch committed. None when
    the batch audits slice 0 (it starts a round, on the version it commits), audits none, or
    finds no start (it then checks every key)."""
    if slice_ is None or slice_ == 0:
        return None
    started = [r for r in history if r.status is BatchStatus.COMMITTED and r.metrics.get(SLICE, -1) == 0]
    return started[-1].output_version if started and started[-1].output_version >= 0 else None


def next_slice(history: list[BatchRecord], audit: Audit, batch_id: int) -> int | None:
    """The slice incremental batch `batch_id` audits, after the batches of `history` (oldest
    first); None: it audits none."""
    if not audit.enabled:
        return None
    audited = [r for r in history if r.status is BatchStatus.COMMITTED and SLICE in r.metrics]
    following = 0 if not audited else (audited[-1].metrics[SLICE] + 1) % audit.slices
    if audited and (audited[-1].metrics.get(SLICES) != audit.slices or CUTS not in audited[-1].metrics):
        following = 0  # `slices` changed, or the round began before rounds were cut by range
    if audit.every is not None:
        first = next((r.batch_id for r in audited), batch_id)
        return following if (batch_id - first) % audit.every == 0 else None
    refreshed = [r for r in history if r.status is BatchStatus.COMMITTED and r.mode is BatchMode.FULL_REFRESH]
    if audited:  # the audit's time, against the batches' since it (its own batch's other phases too)
        since, cost = audited[-1].batch_id, audited[-1].metrics.get(AUDIT_MS, 0)
    elif refreshed:  # no audit yet: a slice re-derives about what the full refresh derived
        since, cost = refreshed[-1].batch_id + 1, refreshed_cost(refreshed[-1])
    else:
        return following
    spent = sum(
        ms
        for r in history
        if r.batch_id >= since and r.status in _RAN
        for name, ms in r.metrics.items()
        if name.startswith("ms.") and name != AUDIT_MS
    )
    return following if spent * audit.budget >= cost else None


def refreshed_cost(refresh: BatchRecord) -> int:
    """What a view's first audit is taken to cost before one has run: the milliseconds its last
    full refresh spent deriving its rows (every phase but the plan and the write). A slice
    derives its keys by the kind's full recompute, whose joins read whole tables (docs/audit.md),
    so it costs about that."""
    return sum(
        ms
        for name, ms in refresh.metrics.items()
        if name.startswith("ms.") and name not in (AUDIT_MS, "ms.plan", "ms.write", "ms.commit")
    )


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
    """What the committed batches of `history` (oldest first) checked, newest first: slices of
    one cut (`audit.cuts` and `audit.slices` alike, so they partition the keys the same way),
    back to a full refresh or a batch that checked every key, or to a batch that found a
    difference (the keys it found stay wrong until a repair, so nothing before it counts)."""
    done = [r for r in history if r.status is BatchStatus.COMMITTED]
    last_difference = next((r for r in reversed(done) if r.metrics.get(DIFFERENCES, 0)), None)
    checked: set[int] = set()
    newest: set[int] | None = None  # the slices of the newest cut, for the count shown
    cut: tuple[int | None, int | None] | None = None
    for record in reversed(done):
        if record is last_difference:
            break
        every = record.metrics.get(CUTS) == EVERY_KEY and SLICE in record.metrics
        if record.mode is BatchMode.FULL_REFRESH or every:
            checked = set(range(audit.slices))
        elif SLICE in record.metrics:
            this = (record.metrics.get(CUTS), record.metrics.get(SLICES))
            if this != cut:  # cut otherwise: its slices do not add to the ones after it
                newest = checked if newest is None and cut is not None else newest
                checked, cut = set(), this
            if this[1] == audit.slices:
                checked.add(record.metrics[SLICE])
        if len(checked) >= audit.slices:
            within = done[-1].batch_id - record.batch_id + 1
            return Coverage(audit.slices, audit.slices, within, last_difference)
    shown = newest if newest is not None else checked
    return Coverage(audit.slices, len(shown), None, last_difference)
