"""Which slice a batch audits and what the audit has covered, from the batch log (issue 40)."""

from __future__ import annotations

import pytest

from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus
from lakejoin.quality.audit_plan import DIFFERENCES, SLICE, coverage, slice_of
from lakejoin.spec.model import Audit

pytestmark = pytest.mark.unit

FOUR = Audit(slices=4)


def batch(
    n: int,
    slice_: int | None = None,
    differences: int = 0,
    mode=BatchMode.INCREMENTAL,
    status=BatchStatus.COMMITTED,
) -> BatchRecord:  # noqa: ANN001
    metrics = {} if slice_ is None else {SLICE: slice_, DIFFERENCES: differences}
    return BatchRecord("v", n, status, mode, {}, {}, metrics=metrics)


def test_audit_batches_take_the_slices_in_turn():
    assert [slice_of(n, FOUR) for n in range(1, 10)] == [0, 1, 2, 3, 0, 1, 2, 3, 0]
    every_2 = Audit(slices=3, every=2)
    assert [slice_of(n, every_2) for n in range(1, 9)] == [0, None, 1, None, 2, None, 0, None]
    assert slice_of(1, Audit(enabled=False)) is None


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
