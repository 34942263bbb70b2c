"""delta/identity.py: which table a pin is of, from delta-rs's reading of the log alone. Real
delta-rs tables in tmp_path; no JVM."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake

from lakejoin.delta.identity import TableIdentity, TableLog, foreign_commits, identities_from, replaced
from lakejoin.delta.markers import FINAL, BatchMarker
from lakejoin.delta.records import BatchMode

pytestmark = pytest.mark.unit

ROWS = pa.table({"k": ["a", "b"], "v": [1, 2]})


def commits(path: str, n: int) -> None:
    for _ in range(n):
        write_deltalake(path, ROWS, mode="append", configuration={"delta.enableChangeDataFeed": "true"})


def pinned(path: str) -> tuple[int, TableIdentity]:
    log = TableLog.at(path)
    assert log is not None
    return log.version, log.identity(log.version)


def test_the_same_table_with_newer_commits_is_the_table_pinned(tmp_path):
    path = str(tmp_path / "t")
    commits(path, 2)
    version, identity = pinned(path)
    commits(path, 3)

    assert replaced("'t'", TableLog.at(path), version, identity) is None
    assert identity.commit.startswith("WRITE@")


@pytest.mark.parametrize("again", [1, 5], ids=["below_the_pin", "above_the_pin"])
def test_a_table_dropped_and_written_again_is_not_the_table_pinned(tmp_path, again):
    path = str(tmp_path / "t")
    commits(path, 3)
    version, identity = pinned(path)
    shutil.rmtree(path)
    commits(path, again)

    why = replaced("'t'", TableLog.at(path), version, identity)

    assert why is not None and "dropped and written again" in why
    assert identity.table_id in why and str(TableLog.at(path).table_id) in why


def test_a_table_gone_is_said_so_and_an_unrecorded_pin_is_not_checked(tmp_path):
    path = str(tmp_path / "t")
    commits(path, 1)
    version, identity = pinned(path)
    shutil.rmtree(path)

    assert "is gone" in (replaced("'t'", TableLog.at(path), version, identity) or "")
    assert replaced("'t'", TableLog.at(path), version, None) is None


def test_another_commit_at_the_pinned_version_is_a_rewritten_log(tmp_path):
    path = str(tmp_path / "t")
    commits(path, 2)
    version, identity = pinned(path)
    other = TableIdentity(identity.table_id, "WRITE@1")

    why = replaced("'t'", TableLog.at(path), version, other)

    assert why is not None and "log was rewritten" in why and f"version {version}" in why


def test_foreign_commits_are_those_that_change_rows_and_are_not_lakejoins(tmp_path):
    path = str(tmp_path / "out")
    commits(path, 1)
    marker = BatchMarker(1, FINAL, BatchMode.FULL_REFRESH, {}, {"s": 0})
    write_deltalake(
        path,
        ROWS,
        mode="append",
        commit_properties=CommitProperties(custom_metadata={"userMetadata": marker.as_json()}),
    )
    after = int(DeltaTable(path).version())
    DeltaTable(path).optimize.compact()  # rows unchanged: no change

    def ours(commit: dict) -> bool:
        return BatchMarker.from_commit(commit) is not None

    assert foreign_commits(TableLog(DeltaTable(path)), after, ours) == []
    DeltaTable(path).delete("k = 'a'")
    DeltaTable(path).restore(after)

    assert foreign_commits(TableLog(DeltaTable(path)), after, ours) == [
        f"DELETE (version {after + 2})",
        f"RESTORE (version {after + 3})",
    ]


def test_identities_travel_in_the_batch_commit_and_odd_values_are_left_out():
    identity = TableIdentity("id-1", "MERGE@5")
    marker = BatchMarker(2, FINAL, BatchMode.INCREMENTAL, {"s": 1}, {"s": 2}, identities={"s": identity})

    assert BatchMarker.from_commit({"userMetadata": marker.as_json()}) == marker
    assert identities_from({"s": ["a", "b"], "t": "x", "u": [1, 2]}) == {"s": TableIdentity("a", "b")}
    assert identities_from(None) == {}


def test_a_log_read_after_other_commits_landed_numbers_each_commit_by_its_own_version(tmp_path):
    """delta-rs numbers `history()` down from the version a table object was loaded at, but lists
    the newest commits: the pin a batch records, read after another run's commit landed, must be
    its own commit's (four runs of one pipeline started together met this)."""
    import time

    from lakejoin.delta.history import numbered_history

    path = str(tmp_path / "t")
    commits(path, 3)
    log, table = TableLog.at(path), DeltaTable(path)  # both loaded at version 2
    assert log is not None and log.version == 2
    time.sleep(0.005)  # commit times in ms: the commits after these differ from version 2's
    commits(path, 2)  # another run's commits: versions 3 and 4

    fresh = {int(c["version"]): c["timestamp"] for c in DeltaTable(path).history()}
    assert log.identity(2) == TableIdentity(log.table_id, f"WRITE@{fresh[2]}")
    assert [int(c["version"]) for c in log.commits_after(-1) or []] == [2, 1, 0]  # the log's own view
    found, complete = numbered_history(table, 2, upto=3)
    assert [(int(c["version"]), c["timestamp"]) for c in found] == [(3, fresh[3]), (2, fresh[2])]
    assert not complete and numbered_history(table)[1]
