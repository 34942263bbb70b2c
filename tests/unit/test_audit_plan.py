"""Which slice a batch audits and what the audit has covered, from the batch log (issue 40)."""

from __future__ import annotations

import pytest

from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus
from lakejoin.quality.audit_plan import (
    AUDIT_MS,
    CUTS,
    DIFFERENCES,
    EVERY_KEY,
    SLICE,
    SLICES,
    coverage,
    next_slice,
    round_start,
)
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
    slices: int = 4,
    cuts: int = 7,
) -> BatchRecord:  # noqa: ANN001
    metrics = {"ms.changes": ms // 2, "ms.write": ms - ms // 2}
    if slice_ is not None:
        metrics |= {SLICE: slice_, DIFFERENCES: differences, AUDIT_MS: audit_ms, SLICES: slices, CUTS: cuts}
    return BatchRecord("v", n, status, mode, {}, {}, metrics=metrics)


def run(audit: Audit, batches: int, *, ms: int, audit_ms: int) -> list[int | None]:
    """The slices batches 2.. audit after a full refresh, each batch taking `ms` and each
    audit `audit_ms`."""
    history = [batch(1, mode=BatchMode.FULL_REFRESH, ms=ms)]
    for n in range(2, batches + 2):
        slice_ = next_slice(history, audit, n)
        history.append(
            batch(n, slice_, ms=ms, audit_ms=audit_ms if slice_ is not None else 0, slices=audit.slices)
        )
    return [r.metrics.get(SLICE) for r in history[1:]]


def test_every_nth_batch_takes_the_next_slice():
    assert run(Audit(slices=3, every=2), 8, ms=1000, audit_ms=5000) == [0, None, 1, None, 2, None, 0, None]
    assert run(Audit(slices=4, every=1), 5, ms=1000, audit_ms=5000) == [0, 1, 2, 3, 0]
    assert next_slice([], Audit(enabled=False), 2) is None


def test_the_budget_keeps_the_audit_to_its_share_of_the_batch_time():
    # The full refresh (batch 1) derived its rows in 0.5 s (its write does not count), so the
    # first audit is taken to cost that: at a budget of 0.1 it waits for 5 s of batches.
    # Then an audit as long as a batch: every 10th batch (its own batch counts).
    slices = run(FOUR, 30, ms=1000, audit_ms=1000)
    audited = [n for n, s in enumerate(slices, start=2) if s is not None]
    assert audited == [7, 17, 27] and [s for s in slices if s is not None] == [0, 1, 2]
    # An audit a tenth of a batch: every batch after the first.
    assert run(FOUR, 10, ms=1000, audit_ms=100) == [None] * 5 + [0, 1, 2, 3, 0]
    # A bigger budget audits more often.
    assert run(Audit(slices=4, budget=0.5), 6, ms=1000, audit_ms=1000) == [None, 0, None, 1, None, 2]


def test_a_small_view_pays_no_audit_on_its_first_incremental_batch():
    """Before any audit, the view's last full refresh tells what one costs; with no full refresh
    in the log (a log rebuilt from the outputs), the next incremental batch audits to learn it."""
    refresh = batch(1, mode=BatchMode.FULL_REFRESH, ms=8000)  # 4 s deriving, 4 s writing
    assert next_slice([refresh], FOUR, 2) is None
    tiny = [refresh, *(batch(n, ms=1000) for n in range(2, 41))]  # 39 s of 1 s batches
    assert next_slice(tiny, FOUR, 41) is None
    assert next_slice([*tiny, batch(41, ms=1000)], FOUR, 42) == 0  # 40 s * 0.1 >= 4 s
    assert next_slice([batch(5, ms=1000)], FOUR, 6) == 0
    assert next_slice([], FOUR, 2) == 0


def test_the_budget_counts_batches_that_found_nothing_new_and_not_failed_ones():
    history = [batch(2, 0, ms=1000, audit_ms=2000)]
    history += [batch(n, status=BatchStatus.UNCHANGED, ms=5000) for n in (3, 4, 5)]
    assert next_slice(history, Audit(slices=4, budget=0.1), 6) is None  # 16 s * 0.1 < 2 s
    history.append(batch(6, status=BatchStatus.ABANDONED, ms=100_000))
    assert next_slice(history, Audit(slices=4, budget=0.1), 7) is None
    history.append(batch(7, ms=4000))
    assert next_slice(history, Audit(slices=4, budget=0.1), 8) == 1  # 20 s * 0.1 >= 2 s


def test_every_key_checked_within_the_last_batches_whose_slices_were_cut_alike():
    history = [batch(1, mode=BatchMode.FULL_REFRESH), *(batch(n, (n - 2) % 4) for n in range(2, 9))]
    found = coverage(history, FOUR)
    assert (found.within, found.last_difference) == (4, None)  # batches 5-8: slices 3, 0, 1, 2
    assert found.text() == "every key checked within the last 4 batches; last difference: none"
    # Batches 6-8 cut the keys otherwise than batches 2-5: slices 3, 0, 1, 2 no longer add up.
    recut = history[:5] + [batch(n, (n - 2) % 4, cuts=8) for n in range(6, 9)]
    assert coverage(recut, FOUR).within == 7  # back to batch 2: batches 2-5 are one whole cut
    found = coverage(recut[3:], FOUR)  # batches 4-8: slices 2, 3 of one cut, 0, 1, 2 of another
    assert (found.within, found.checked) == (None, 3)
    # A batch that checked every key (its round's version unreadable) counts as a full check.
    assert coverage([batch(2, 1, cuts=EVERY_KEY), batch(3, 2)], FOUR).within == 2
    # Slices of another number of slices do not count.
    assert coverage([batch(n, n - 2, slices=8) for n in range(2, 10)], FOUR).within is None


def test_a_round_begins_again_when_the_number_of_slices_changed_or_was_not_logged():
    assert next_slice([batch(2, 1, slices=8)], Audit(slices=4, every=1), 3) == 0
    old = batch(2, 1)
    del old.metrics[CUTS]  # logged before rounds were cut by range
    assert next_slice([old], Audit(slices=4, every=1), 3) == 0
    assert next_slice([batch(2, 1)], Audit(slices=4, every=1), 3) == 2


def test_a_round_starts_on_the_version_its_first_batch_committed():
    history = [batch(2, 0), batch(3), batch(4, 1)]
    history[0] = BatchRecord(
        "v",
        2,
        BatchStatus.COMMITTED,
        BatchMode.INCREMENTAL,
        {},
        {},
        metrics=history[0].metrics,
        output_version=11,
    )
    assert round_start(history, 2) == 11
    assert round_start(history, 0) is None  # a batch auditing slice 0 starts a round
    assert round_start(history, None) is None
    assert round_start(history[1:], 2) is None  # no start known: that batch checks every key


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


def test_a_round_cuts_the_keys_at_the_least_key_of_the_file_at_each_slice_of_the_rows():
    from lakejoin.engine.audit import cuts

    laid_out = [(i * 100, 100) for i in range(8)]  # 8 disjoint files of 100 rows: 0-99, 100-199...
    assert cuts(laid_out, 4) == (200, 400, 600)
    assert cuts(list(reversed(laid_out)), 4) == (200, 400, 600)  # files in any order
    assert cuts([*laid_out, (None, 5), (900, 0)], 4) == (200, 400, 600)  # no stats, no rows
    assert cuts(laid_out, 1) == ()
    # More slices than files: a slice per file, the rest empty, as long as half of them cut.
    assert cuts([(0, 100), (100, 100), (200, 100)], 4) == (100, 200)
    # Too few distinct file minimums (a key led by a column of few values): hash instead.
    assert cuts([("eu", 1000), ("eu", 1000), ("us", 1000)], 64) == ()
    assert cuts([("a", 10)], 4) == ()


def test_a_round_reads_its_cuts_from_the_output_files_at_its_first_version(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    from lakejoin.engine.audit import slicing

    path = str(tmp_path / "out")
    for first in range(0, 40, 10):  # version 3: four files, keys 0-9, 10-19...
        write_deltalake(path, pa.table({"k": list(range(first, first + 10)), "t": [1.5] * 10}), mode="append")
    write_deltalake(path, pa.table({"k": [5], "t": [0.5]}), mode="append")  # version 4: after the round began

    cut = slicing(path, 3, ("k",), 4)
    assert (cut.column, cut.cuts) == ("k", (10, 20, 30))
    assert cut.text(0) == "slice 0 of 4 (k below 10, or null)"
    assert cut.text(2) == "slice 2 of 4 (k from 20 to below 30)"
    assert cut.text(3) == "slice 3 of 4 (k from 30)"
    assert slicing(path, 3, ("t", "k"), 4).text(1) == "slice 1 of 4 (by a hash of the key)"  # a float leads
    assert not slicing(path, None, ("k",), 4).ranges
    gone = slicing(path, 99, ("k",), 4)  # a version delta-rs cannot read: the batch checks every key
    assert gone.slices == 1 and gone.text(2).startswith("every key")
    few = slicing(path, 3, ("k",), 8)  # 4 files, 8 slices: the last 4 are empty
    assert few.cuts == (10, 20, 30) and few.text(4).startswith("slice 4 of 8 (no key")
