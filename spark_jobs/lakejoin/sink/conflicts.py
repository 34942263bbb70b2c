"""What a batch reports when another commit landed on a table it was writing: the one mapping of
every writer's conflict (Delta's through Spark, delta-rs's, the one-commit upsert's
ConcurrentCommitError) to the batch's ConcurrentBatchError, which names the view's table and
the batch; and, for an output, the check that turns a conflict with another run's commit of
this very batch into CommittedElsewhereError (the batch is in, once).

The writers (driver_merge.py, key_upsert.py, spark_merge.py) raise their conflicts as they
are; only the batch knows the view and the batch it was writing.

>>> batch_error(ValueError("java.util.concurrent.ThreadPoolExecutor"), 3, where="view 'v' output") is None
True
"""

from __future__ import annotations

from lakejoin.delta.conflicts import is_conflict
from lakejoin.delta.markers import output_batches
from lakejoin.errors import CommittedElsewhereError, ConcurrentBatchError
from lakejoin.sink.key_upsert_jvm import ConcurrentCommitError

__all__ = ["batch_error", "or_committed", "output_error"]


def batch_error(exc: BaseException, batch_id: int, *, where: str) -> ConcurrentBatchError | None:
    """The batch's error for a conflict (None: `exc` is none, and says its own cause): Delta's
    conflicts (ConcurrentTransactionException: another run's commit of the same batch landed
    during this one's; ConcurrentAppend/Delete...: its MERGE touched the same files), delta-rs's,
    and the one-commit upsert's ConcurrentCommitError; told by their classes (delta/conflicts.py),
    never by the word "concurrent", which nearly every JVM stack trace holds."""
    if not (isinstance(exc, ConcurrentCommitError) or is_conflict(exc)):
        return None
    origin = getattr(exc, "java_exception", None)  # py4j's own text: "An error occurred while calling"
    text = str(origin.getMessage() or "") if origin is not None else str(exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return ConcurrentBatchError(
        f"another commit landed on this table while batch {batch_id} was writing it (another run of "
        f"the view, or someone's OPTIMIZE, DELETE or UPDATE); this run stopped: {first}",
        where=where,
        fix="run the view again: it plans from what is committed; do not run two batches of one view at once",
    )


def or_committed(exc: ConcurrentBatchError, path: str, app: str, batch_id: int) -> ConcurrentBatchError:
    """`exc`, or the news that the batch is in: a conflict with another run's commit of this very
    batch (its txn version `app` on the output at `path`) leaves this run nothing to do."""
    if isinstance(exc, CommittedElsewhereError):
        return exc
    done = output_batches(path, app).last_committed
    if done is None or done < batch_id:
        return exc
    return CommittedElsewhereError(
        f"another run committed batch {batch_id} first (its commit landed while this "
        "run's was being written); this run wrote nothing more",
        where=f"output {path}",
        fix="nothing to do: the batch is committed once; run again for newer changes",
    )


def output_error(
    exc: BaseException, *, path: str, app: str, batch_id: int, where: str
) -> ConcurrentBatchError | None:
    """What a failed write of the batch into the view's output at `path` (its txn `app`)
    reports: a conflict as `batch_error` says it, or CommittedElsewhereError when another run
    committed the batch meanwhile (`or_committed`); a ConcurrentBatchError already said (the
    commit check's CommittedElsewhereError) through `or_committed` too. None: no conflict."""
    conflict = exc if isinstance(exc, ConcurrentBatchError) else batch_error(exc, batch_id, where=where)
    if conflict is None:
        return None
    return or_committed(conflict, path, app, batch_id)
