"""What an output write reports once its batch commit is in: the counts of the rows it wrote,
with the rows the batch commit appended and its version, or the news that another run
committed this batch first (delta/markers.py: the batch commit is the output's own).

Every way of writing an output ends here (writers.py's, key_upsert.py's), so that a batch
commit Delta skipped is found and told the same way whichever path wrote it.
"""

from __future__ import annotations

from lakejoin.delta.markers import OutputCommit, operation_metrics
from lakejoin.errors import CommittedElsewhereError
from lakejoin.sink.merge_terms import MergeCounts


def final_counts(path: str, commit: OutputCommit, counts: MergeCounts) -> MergeCounts:
    """`counts` with the rows the batch commit appended (Delta's operationMetrics, when the
    batch commit is an append) and its version; a batch commit Delta skipped means another run
    committed this batch first."""
    found = commit.committed(path)
    if found is None:
        raise CommittedElsewhereError(
            f"another run committed batch {commit.final.batch_id} first; this run wrote nothing more",
            where=f"output {path}",
            fix="nothing to do: the batch is committed once; run again for newer changes",
        )
    version, info = found
    appended = operation_metrics(info).get("numOutputRows", 0) if info.get("operation") == "WRITE" else 0
    return MergeCounts(
        inserted=counts.inserted + appended,
        updated=counts.updated,
        deleted=counts.deleted,
        applied=True,
        version=version,
    )
