"""Issue 36, "a change is a change of content", without Spark: the tests' model of it
(tests/content.py) as a truth table, the batch that finds no change of content, and where the
next batch reads on from after it (engine/plan.read_on)."""

from __future__ import annotations

import pytest

from lakejoin.delta.plans import BatchPlan
from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus
from lakejoin.engine.batch import nothing_changed
from lakejoin.engine.plan import read_on
from tests.content import changed_keys, last_changes

pytestmark = pytest.mark.unit

INS, DEL, PRE, POST = "insert", "delete", "update_preimage", "update_postimage"
C, A, U = BatchStatus.COMMITTED, BatchStatus.ABANDONED, BatchStatus.UNCHANGED
INC, FULL, REPAIR = BatchMode.INCREMENTAL, BatchMode.FULL_REFRESH, BatchMode.REPAIR


def feed(*changes: tuple) -> list[dict]:
    """Change feed rows of (key, value, change type, commit version)."""
    return [
        {"id": k, "v": v, "_change_type": t, "_commit_version": n, "_commit_timestamp": None}
        for k, v, t, n in changes
    ]


def last(*changes: tuple) -> dict:
    """Each key's last change of content as (value or None when deleted, version)."""
    return {k: (row["v"] if row else None, n) for k, (n, row) in last_changes(feed(*changes), "id").items()}


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param([], {}, id="no_rows"),
        pytest.param([("k", "a", INS, 1)], {"k": ("a", 1)}, id="an_insert_is_a_change"),
        pytest.param([("k", "a", DEL, 4)], {"k": (None, 4)}, id="a_delete_is_a_change"),
        pytest.param([("k", "a", PRE, 2), ("k", "b", POST, 2)], {"k": ("b", 2)}, id="an_update"),
        pytest.param([("k", "a", PRE, 2), ("k", "a", POST, 2)], {}, id="a_rewrite_is_none"),
        pytest.param([("k", None, PRE, 2), ("k", None, POST, 2)], {}, id="nulls_are_equal"),
        pytest.param(
            [("k", "a", PRE, 2), ("k", "b", POST, 2), ("k", "b", PRE, 5), ("k", "b", POST, 5)],
            {"k": ("b", 2)},
            id="a_rewrite_keeps_the_version_of_the_change_before_it",
        ),
        pytest.param([("k", "a", DEL, 3), ("k", "a", INS, 3)], {}, id="an_overwrite_that_keeps_the_row"),
        pytest.param(
            [("k", "a", DEL, 3), ("k", "b", INS, 3)], {"k": ("b", 3)}, id="an_overwrite_that_changes_it"
        ),
        # Gone in between: a batch ending at version 3 would have deleted it.
        pytest.param(
            [("k", "a", DEL, 3), ("k", "a", INS, 4)],
            {"k": ("a", 4)},
            id="delete_then_equal_insert_in_two_commits_is_two_changes",
        ),
        pytest.param(
            [("k", "a", PRE, 2), ("k", "a", POST, 2), ("k", "a", DEL, 6)],
            {"k": (None, 6)},
            id="a_rewrite_then_a_delete",
        ),
        pytest.param(
            [("x", "a", PRE, 2), ("x", "a", POST, 2), ("y", "a", PRE, 2), ("y", "c", POST, 2)],
            {"y": ("c", 2)},
            id="one_commit_rewrites_one_key_and_changes_another",
        ),
    ],
)
def test_a_commit_changes_a_key_when_its_row_after_differs_from_its_row_before(changes, expected):
    assert last(*changes) == expected
    assert last(*changes[::-1]) == expected  # the feed's order does not matter


HISTORY = [
    ("k", "a", INS, 1),
    ("k", "a", PRE, 2),
    ("k", "a", POST, 2),  # rewrite
    ("k", "a", PRE, 3),
    ("k", "b", POST, 3),  # change
    ("k", "b", DEL, 4),
    ("k", "b", INS, 4),  # overwrite, kept
    ("k", "b", DEL, 5),  # delete
    ("k", "b", INS, 6),  # back, equal
    ("k", "b", PRE, 7),
    ("k", "b", POST, 7),  # rewrite
    ("j", "z", INS, 2),
    ("j", "z", PRE, 6),
    ("j", "z", POST, 6),  # rewrite
]


@pytest.mark.parametrize("cut", range(0, 8))
def test_where_a_batch_ends_does_not_change_the_answer(cut):
    """The last change of content over versions 1..7 is the later of the last changes of 1..cut
    and cut+1..7, whatever the cut: the answer does not depend on batch boundaries."""
    rows = feed(*HISTORY)
    whole = last_changes(rows, "id")
    first = last_changes([r for r in rows if r["_commit_version"] <= cut], "id")
    then = last_changes([r for r in rows if r["_commit_version"] > cut], "id")

    assert {**first, **then} == whole == {"k": (6, {"id": "k", "v": "b"}), "j": (2, {"id": "j", "v": "z"})}
    assert changed_keys(rows, "id", cut, 7) == set(then)


def test_the_keys_changed_in_a_range_leave_out_rewrites():
    rows = feed(*HISTORY)

    assert [changed_keys(rows, "id", n - 1, n) for n in range(1, 8)] == [
        {"k"},
        {"j"},
        {"k"},
        set(),
        {"k"},
        {"k"},
        set(),
    ]


# --- a batch with no change of content ----------------------------------------------------------


def plan(mode: BatchMode = INC) -> BatchPlan:
    return BatchPlan(
        "v", 5, mode, {"facts": 3, "dims": 1, "_routing": 2}, {"facts": 7, "dims": 1, "_routing": 2}
    )


@pytest.mark.parametrize(
    ("batch", "changed", "expected"),
    [
        pytest.param(plan(), {"facts": 0, "dims": 0}, "facts 4..7", id="none_changed"),
        pytest.param(plan(), {"facts": 1, "dims": 0}, None, id="one_key_changed"),
        pytest.param(plan(), {"facts": 0, "dims": 2}, None, id="a_key_of_another_source_changed"),
        pytest.param(plan(REPAIR), {"facts": 0}, None, id="a_repair_commits"),
        pytest.param(plan(FULL), {}, None, id="a_full_refresh_reads_no_changes"),
    ],
)
def test_an_incremental_batch_without_a_change_of_content_is_nothing_new(batch, changed, expected):
    reason = nothing_changed(batch, changed)

    if expected is None:
        assert reason is None
    else:
        assert reason is not None and reason.startswith("nothing new: no change of content in ")
        assert expected in reason and "dims" not in reason  # only the sources that moved


# --- where the next batch reads on from --------------------------------------------------------


def record(batch_id: int, status: BatchStatus, start: int, pinned: int) -> BatchRecord:
    return BatchRecord(
        "v", batch_id, status, INC, {"facts": start, "_routing": 2}, {"facts": pinned, "_routing": 2}
    )


COMMITTED = record(4, C, 1, 3)


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        pytest.param([], None, id="none_after_the_committed_batch"),
        pytest.param([record(5, U, 3, 5)], 5, id="one_unchanged_batch"),
        pytest.param([record(5, U, 3, 5), record(6, U, 5, 9)], 6, id="a_chain_of_them"),
        pytest.param(
            [record(5, U, 3, 5), record(6, A, 5, 6), record(7, U, 5, 9)], 7, id="across_an_abandoned"
        ),
        pytest.param([record(5, U, 2, 5)], None, id="one_that_did_not_start_at_the_committed_pins"),
        pytest.param([record(5, U, 3, 5), record(6, U, 4, 9)], 5, id="the_chain_breaks"),
        pytest.param([record(3, U, 3, 5)], None, id="one_older_than_the_committed_batch"),
    ],
)
def test_the_next_batch_reads_on_from_the_last_unchanged_batch_after_the_committed_one(after, expected):
    found = read_on([record(2, C, -1, 1), COMMITTED, *after], COMMITTED)

    assert (found.batch_id if found else None) == expected


def test_without_a_committed_batch_nothing_is_read_on():
    assert read_on([record(5, U, 3, 5)], None) is None
