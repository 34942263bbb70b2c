"""The one mapping of a write's failure to what the batch reports (sink/conflicts.py): a
conflict of any writer becomes the batch's ConcurrentBatchError naming the view's table and the
batch; for an output, a conflict with another run's commit of this very batch is the batch
committed; anything else is no conflict and says its own cause. The output's log is delta-rs's,
no JVM."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakejoin.errors import CommittedElsewhereError, ConcurrentBatchError
from lakejoin.sink import driver_merge
from lakejoin.sink.conflicts import output_error
from lakejoin.sink.key_upsert_jvm import ConcurrentCommitError

pytestmark = pytest.mark.unit

WHERE = "view 'v' output (/out)"


def _output(tmp_path, txn: int | None) -> str:
    """An output whose last batch commit carries txn version `txn` of the app "app"."""
    from deltalake import CommitProperties, Transaction, write_deltalake

    path = str(tmp_path / "out")
    done = [Transaction(app_id="app", version=txn)] if txn is not None else None
    write_deltalake(path, pa.table({"k": [1]}), commit_properties=CommitProperties(app_transactions=done))
    return path


def _delta_rs_conflict() -> Exception:
    from deltalake.exceptions import CommitFailedError

    return CommitFailedError(
        "Failed to commit transaction: Commit failed: a concurrent transaction deleted data"
    )


@pytest.mark.parametrize(
    ("make", "reported"),
    [
        (_delta_rs_conflict, ConcurrentBatchError),
        (
            lambda: ConcurrentCommitError("Delta refused the upsert (ConcurrentAppendException)"),
            ConcurrentBatchError,
        ),
        (lambda: ValueError("java.util.concurrent.ThreadPoolExecutor"), None),
        (lambda: OSError(28, "No space left on device"), None),
    ],
    ids=["delta_rs", "upsert", "python", "disk_full"],
)
def test_a_writers_conflict_is_the_batchs_error_naming_the_view_and_the_batch(tmp_path, make, reported):
    found = output_error(make(), path=_output(tmp_path, None), app="app", batch_id=3, where=WHERE)

    if reported is None:
        assert found is None
        return
    assert type(found) is reported
    assert found is not None and found.where == WHERE
    assert "while batch 3 was writing it" in found.what and "run the view again" in found.fix


@pytest.mark.parametrize(("txn", "elsewhere"), [(5, False), (None, False), (7, True), (9, True)])
def test_a_conflict_after_another_run_committed_the_batch_is_the_batch_committed(tmp_path, txn, elsewhere):
    """Batch 3 commits with txn version 7 (delta/markers.py): a conflict once it (or a later
    batch) is in leaves this run nothing to do; before it, the conflict stays an error."""
    path = _output(tmp_path, txn)

    found = output_error(_delta_rs_conflict(), path=path, app="app", batch_id=3, where=WHERE)

    assert isinstance(found, CommittedElsewhereError) is elsewhere


def test_an_error_the_commit_check_already_said_passes_as_it_is(tmp_path):
    said = CommittedElsewhereError("another run committed batch 3 first", where="output /out")

    assert output_error(said, path=_output(tmp_path, None), app="app", batch_id=3, where=WHERE) is said


def test_the_driver_merge_raises_a_refused_commit_as_it_is(tmp_path, monkeypatch):
    """delta-rs's conflict leaves driver_merge.py unnamed: the batch's mapping names the view."""
    from deltalake import DeltaTable, write_deltalake
    from deltalake.exceptions import CommitFailedError

    path = str(tmp_path / "out")
    write_deltalake(path, pa.table({"k": [1, 2], "v": ["a", "b"]}))

    def refused(self, *args, **kwargs):
        raise _delta_rs_conflict()

    monkeypatch.setattr(DeltaTable, "merge", refused)
    batch = pa.table({"k": [1], "v": ["c"], driver_merge.KEEP: [True]})
    with pytest.raises(CommitFailedError) as raised:
        driver_merge.merge_rows(path, batch, ["k", "v"], ["k"], txn=("app", 3))

    found = output_error(raised.value, path=path, app="app", batch_id=3, where=WHERE)
    assert isinstance(found, ConcurrentBatchError) and not isinstance(found, CommittedElsewhereError)
    assert found.where == WHERE
