"""The batch commit's marks (delta/markers.py), as truth tables: what a txn version says of a
view's batches, and what a commit's userMetadata says of its batch; and what the plan makes of an
output an older lakejoin left half written. No Spark, no JVM."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from lakejoin.delta.markers import FINAL, BatchMarker, OutputBatches, app_id, find_commit
from lakejoin.delta.records import BatchMode

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("txn", "committed", "half_written_by_older"),
    [
        (None, None, None),  # no batch ever committed into the output
        (3, 1, None),  # batch 1's batch commit (2 * 1 + 1)
        (5, 2, None),
        (13, 6, None),  # after abandoned batches 3-5: ids skip, the txn follows the id
        (4, None, 2),  # an older lakejoin's first of batch 2's two commits, and no batch commit
    ],
)
def test_a_txn_version_tells_the_last_batch_commit(txn, committed, half_written_by_older):
    batches = OutputBatches(txn, 10)
    assert batches.last_committed == committed
    assert batches.half_written_by_older == half_written_by_older


def test_a_marker_stamps_its_part_and_reads_back_from_the_commit():
    pins = {"products": 9, "merchants": 4, "_routing": 7}
    final = BatchMarker(3, FINAL, BatchMode.INCREMENTAL, {"products": 5, "merchants": 4}, pins)

    assert final.txn_version == 7
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

        def update_incremental(self) -> None:  # no commit lands while it is read
            pass

        def version(self) -> int:
            return 300

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

        def update_incremental(self) -> None:
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


def test_a_batch_an_older_lakejoin_left_half_written_stops_the_plan_with_the_full_refresh_fix(tmp_path):
    """A lakejoin before issue 37 wrote some batches in two output commits, the first stamped
    `2 * batch` and marked part "pre"; a run that died between them left the output's txn even.
    This version does not finish such a batch: the plan stops and says to run the view with
    --full-refresh, which plans past it (batch 3, after batch 1, the last committed)."""
    import pyarrow as pa
    from deltalake import CommitProperties, Transaction, write_deltalake

    from lakejoin.delta.log import BatchLog
    from lakejoin.engine.plan import view_batches
    from lakejoin.errors import BatchStateError
    from lakejoin.spec.parse import load_spec
    from tests.unit.shop import SHOP

    file = tmp_path / "shop.yaml"
    file.write_text(SHOP.replace("./store", str(tmp_path / "store")), encoding="utf-8")
    spec = load_spec(file)
    view = spec.views["display_products"]
    pins = {"products": 4, "merchants": 2}
    committed = BatchMarker(1, FINAL, BatchMode.FULL_REFRESH, {}, pins)
    first_of_two = replace(BatchMarker(2, FINAL, BatchMode.INCREMENTAL, pins, {"products": 6}), part="pre")
    for marker, txn in ((committed, 3), (first_of_two, 4)):
        stamp = CommitProperties(
            custom_metadata={"userMetadata": marker.as_json()},
            app_transactions=[Transaction(app_id=app_id(spec.name, view.name), version=txn)],
        )
        write_deltalake(view.path, pa.table({"product_id": ["p1"]}), mode="append", commit_properties=stamp)
    log = BatchLog.of(spec)

    with pytest.raises(BatchStateError) as raised:
        view_batches(spec, view, log)
    error = raised.value
    assert error.where == f"view 'display_products' output ({view.path})"
    assert error.what.startswith("batch 2 is half written into the output: an older lakejoin, which wrote ")
    assert error.what.endswith("writes every batch in one commit and no longer finishes such a batch")
    assert error.fix.startswith("rebuild the view with --full-refresh")
    assert error.fix.endswith(f": lakejoin run {spec.file} --view display_products --full-refresh")
    refresh = view_batches(spec, view, log, need_pins=False)  # what a full refresh plans from
    assert refresh.committed is not None and refresh.committed.batch_id == 1
    assert refresh.committed.pinned_versions == pins and refresh.next_id == 3
