"""Which slice a batch audits and what the audit has covered, from the batch log (issue 40)."""

from __future__ import annotations

import pytest

from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus
from lakejoin.quality.audit_plan import AUDIT_MS, DIFFERENCES, SLICE, coverage, next_slice
from lakejoin.spec.model import Audit

pytestmark = pytest.mark.unit

FOUR = Audit(slices=4)


def batch(
    n: int,
    slice_: int | None = None,
    differences: int = 0,
    mode=BatchMode.INCREMENTAL,
    status=BatchStatus.COMMITTED,
    ms: int = 1000,
    audit_ms: int = 0,
) -> BatchRecord:  # noqa: ANN001
    metrics = {"ms.changes": ms // 2, "ms.write": ms - ms // 2}
    if slice_ is not None:
        metrics |= {SLICE: slice_, DIFFERENCES: differences, AUDIT_MS: audit_ms}
    return BatchRecord("v", n, status, mode, {}, {}, metrics=metrics)


def run(audit: Audit, batches: int, *, ms: int, audit_ms: int) -> list[int | None]:
    """The slices batches 2.. audit after a full refresh, each batch taking `ms` and each
    audit `audit_ms`."""
    history = [batch(1, mode=BatchMode.FULL_REFRESH, ms=ms)]
    for n in range(2, batches + 2):
        slice_ = next_slice(history, audit, n)
        history.append(batch(n, slice_, ms=ms, audit_ms=audit_ms if slice_ is not None else 0))
    return [r.metrics.get(SLICE) for r in history[1:]]


def test_every_nth_batch_takes_the_next_slice():
    assert run(Audit(slices=3, every=2), 8, ms=1000, audit_ms=5000) == [0, None, 1, None, 2, None, 0, None]
    assert run(Audit(slices=4, every=1), 5, ms=1000, audit_ms=5000) == [0, 1, 2, 3, 0]
    assert next_slice([], Audit(enabled=False), 2) is None


def test_the_budget_keeps_the_audit_to_its_share_of_the_batch_time():
    # An audit as long as a batch, at a budget of 0.1: every 10th batch (its own batch counts).
    slices = run(FOUR, 30, ms=1000, audit_ms=1000)
    audited = [n for n, s in enumerate(slices, start=2) if s is not None]
    assert audited == [2, 12, 22] and [s for s in slices if s is not None] == [0, 1, 2]
    # An audit a tenth of a batch: every batch.
    assert run(FOUR, 5, ms=1000, audit_ms=100) == [0, 1, 2, 3, 0]
    # A bigger budget audits more often.
    assert run(Audit(slices=4, budget=0.5), 6, ms=1000, audit_ms=1000) == [0, None, 1, None, 2, None]


def test_the_budget_counts_batches_that_found_nothing_new_and_not_failed_ones():
    history = [batch(2, 0, ms=1000, audit_ms=2000)]
    history += [batch(n, status=BatchStatus.UNCHANGED, ms=5000) for n in (3, 4, 5)]
    assert next_slice(history, Audit(slices=4, budget=0.1), 6) is None  # 16 s * 0.1 < 2 s
    history.append(batch(6, status=BatchStatus.ABANDONED, ms=100_000))
    assert next_slice(history, Audit(slices=4, budget=0.1), 7) is None
    history.append(batch(7, ms=4000))
    assert next_slice(history, Audit(slices=4, budget=0.1), 8) == 1  # 20 s * 0.1 >= 2 s


def test_every_key_checked_within_the_last_batches_that_covered_every_slice():
    history = [batch(1, mode=BatchMode.FULL_REFRESH), *(batch(n, (n - 1) % 4) for n in range(2, 8))]
    found = coverage(history, FOUR)
    assert (found.within, found.last_difference) == (4, None)  # batches 4-7: slices 3, 0, 1, 2
    assert found.text() == "every key checked within the last 4 batches; last difference: none"


def test_a_full_refresh_checks_every_key():
    found = coverage([batch(1, mode=BatchMode.FULL_REFRESH), batch(2, 1)], FOUR)
    assert found.within == 2


def test_a_difference_restarts_the_count_and_is_named():
    history = [batch(1, mode=BatchMode.FULL_REFRESH), batch(2, 1), batch(3, 2, differences=3), batch(4, 3)]
    found = coverage(history, FOUR)
    assert (found.within, found.checked, found.last_difference.batch_id) == (None, 1, 3)
    assert found.text() == "1 of 4 slices of the keys checked; last difference: batch 3 (3 keys)"


def test_batches_that_did_not_commit_check_nothing():
    history = [batch(1, 0), batch(2, 1, status=BatchStatus.ABANDONED), batch(3, 2)]
    assert coverage(history, FOUR).checked == 2
