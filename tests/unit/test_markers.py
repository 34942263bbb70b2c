"""The batch commit's marks (delta/markers.py), as truth tables: what a txn version says of a
view's batches, and what a commit's userMetadata says of its batch. No Spark, no JVM."""

from __future__ import annotations

import json

import pytest

from lakejoin.delta.markers import FINAL, PRE, BatchMarker, OutputBatches, find_commit
from lakejoin.delta.records import BatchMode

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("txn", "committed", "half_written"),
    [
        (None, None, None),  # no batch ever committed into the output
        (3, 1, None),  # batch 1's batch commit (2 * 1 + 1)
        (4, None, 2),  # batch 2's first commit landed, its batch commit did not
        (5, 2, None),
        (12, None, 6),  # after abandoned batches 3-5: ids skip, the txn follows the id
    ],
)
def test_a_txn_version_tells_the_last_batch_commit_or_a_half_written_batch(txn, committed, half_written):
    batches = OutputBatches(txn, 10)
    assert batches.last_committed == committed
    assert batches.half_written == half_written


def test_a_marker_stamps_its_part_and_reads_back_from_the_commit():
    pins = {"products": 9, "merchants": 4, "_routing": 7}
    pre = BatchMarker(3, PRE, BatchMode.INCREMENTAL, {"products": 5, "merchants": 4}, pins)
    final = BatchMarker(3, FINAL, BatchMode.INCREMENTAL, {"products": 5, "merchants": 4}, pins, run=pre.run)

    assert (pre.txn_version, final.txn_version) == (6, 7)
    assert BatchMarker.from_commit({"userMetadata": final.as_json()}) == final
    assert json.loads(final.as_json())["lakejoin"] == 2
    assert "ends" not in json.loads(final.as_json())  # only a repair's marker says where it ended


def test_a_repair_marker_carries_where_each_range_it_re_derived_ended():
    pins = {"products": 9, "merchants": 4}
    repair = BatchMarker(
        4, FINAL, BatchMode.REPAIR, {"products": 2, "merchants": 4}, pins, repair_ends={"products": 5}
    )

    assert json.loads(repair.as_json())["ends"] == {"products": 5}
    assert BatchMarker.from_commit({"userMetadata": repair.as_json()}) == repair


@pytest.mark.parametrize(
    "metadata",
    [None, "", "not json", '"a string"', '{"lakejoin": 1, "batch": 1}', '{"other": "tool"}'],
)
def test_a_commit_that_is_not_a_batch_commit_has_no_marker(metadata):
    assert BatchMarker.from_commit({"userMetadata": metadata}) is None


def test_the_output_history_is_searched_newest_first_a_page_at_a_time(tmp_path, monkeypatch):
    """find_commit reads 32 commits, then 128, ... until one matches or the history ends."""
    marker = BatchMarker(1, FINAL, BatchMode.FULL_REFRESH, {}, {"s": 0})
    commits = [{"version": v, "userMetadata": None} for v in range(300, 0, -1)]
    commits.append({"version": 0, "userMetadata": marker.as_json()})
    reads: list[int] = []

    class History:
        def __init__(self, path: str) -> None:
            assert path == str(tmp_path)

        def history(self, limit: int) -> list[dict]:
            reads.append(limit)
            return commits[:limit]

    monkeypatch.setattr("deltalake.DeltaTable", History)
    found = find_commit(str(tmp_path), lambda m: m.part == FINAL)

    assert found is not None and found[0] == 0 and found[1] == marker
    assert reads == [32, 128, 512]
    assert find_commit(str(tmp_path), lambda m: m.batch_id == 9) is None


def test_a_search_up_to_a_version_skips_the_newer_commits(tmp_path, monkeypatch):
    """find_commit(at=V) answers as of output version V (lakejoin explain --at): its first page
    reaches back past the newer commits."""
    commits = [
        {"version": v, "userMetadata": BatchMarker(v, FINAL, BatchMode.INCREMENTAL, {}, {"s": v}).as_json()}
        for v in range(100, -1, -1)
    ]
    reads: list[int] = []

    class History:
        def __init__(self, path: str) -> None:
            pass

        def version(self) -> int:
            return 100

        def history(self, limit: int) -> list[dict]:
            reads.append(limit)
            return commits[:limit]

    monkeypatch.setattr("deltalake.DeltaTable", History)
    found = find_commit(str(tmp_path), lambda m: True, at=40)

    assert found is not None and (found[0], found[1].batch_id) == (40, 40)
    assert reads == [32 + 60]
