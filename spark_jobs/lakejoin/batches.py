"""Batch records: the plan (pinned versions) and the commit of every batch of every view.

The records live in one append-only Delta table under the pipeline's storage. A batch is
planned (its versions persisted) before any work, and committed after its checks pass. A
planned batch without a commit is retried with exactly the versions it pinned.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import signal
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Every append adds a one-row file, and a plan reads every file of its views: without
# compaction a plan's read grows with the number of batches ever run (docs/bench/analysis.md).
COMPACT_EVERY = 20  # batches of a view between compactions of the records

SCHEMA = (
    "pipeline STRING, view STRING, batch_id BIGINT, status STRING, mode STRING, "
    "start_versions MAP<STRING, BIGINT>, pinned_versions MAP<STRING, BIGINT>, "
    "recorded_at TIMESTAMP, metrics MAP<STRING, BIGINT>, notes STRING"
)


class BatchStatus(enum.Enum):
    PLANNED = "planned"
    COMMITTED = "committed"
    ABANDONED = "abandoned"


class BatchMode(enum.Enum):
    INCREMENTAL = "incremental"
    FULL_REFRESH = "full_refresh"
    REPAIR = "repair"  # re-derives the keys a past range touched, at the last committed pins


@dataclass(frozen=True)
class BatchRecord:
    view: str
    batch_id: int
    status: BatchStatus
    mode: BatchMode
    start_versions: dict[str, int]
    pinned_versions: dict[str, int]
    recorded_at: datetime | None = None
    metrics: dict[str, int] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)


class BatchStore:
    """The batch records of one pipeline, kept as a Delta table at `path`."""

    def __init__(
        self, spark: SparkSession, pipeline: str, path: str, *, compact_every: int = COMPACT_EVERY
    ) -> None:
        self.spark = spark
        self.pipeline = pipeline
        self.path = path
        self.compact_every = compact_every  # 0: never compact

    def _exists(self) -> bool:
        from delta.tables import DeltaTable

        return DeltaTable.isDeltaTable(self.spark, self.path)

    def history(self, view: str) -> list[BatchRecord]:
        """Every record of `view`, oldest first; a committed batch appears once, as committed."""
        return self.histories([view])[view]

    def histories(self, views: Collection[str]) -> dict[str, list[BatchRecord]]:
        """`history` of several views, from one read of the records."""
        found: dict[str, list] = {view: [] for view in views}
        if not self._exists():
            return found
        from pyspark.sql import functions as F

        rows = (
            self.spark.read.format("delta")
            .load(self.path)
            .where((F.col("pipeline") == self.pipeline) & F.col("view").isin(list(found)))
            .orderBy("batch_id", "recorded_at")
            .collect()
        )
        for row in rows:
            found[row["view"]].append(row)
        return {view: _one_per_batch(view_rows) for view, view_rows in found.items()}

    def last(self, view: str) -> BatchRecord | None:
        return last_of(self.history(view))

    def last_committed(self, view: str) -> BatchRecord | None:
        return last_of(self.history(view), BatchStatus.COMMITTED)

    def plan(self, record: BatchRecord) -> None:
        self._append(record, txn_version=2 * record.batch_id)

    def commit(self, record: BatchRecord) -> None:
        self._append(record, txn_version=2 * record.batch_id + 1)
        if self.compact_every and record.batch_id % self.compact_every == 0:
            self.compact(at_least=self.compact_every)

    def compact(self, *, at_least: int = 2) -> None:
        """Rewrite the records' small files into one with Delta's OPTIMIZE (no row changes), when
        there are `at_least` files: views run in step, so when one view's batch compacts, the
        others reaching the same batch number find a few files and leave them.

        Housekeeping only: a failure (say, a concurrent compaction from a view running in
        parallel) is logged, and the next view to reach a multiple of `compact_every` tries again.
        """
        from delta.tables import DeltaTable

        from lakejoin.sources import data_files

        try:
            if data_files(self.spark, self.path) < at_least:
                return
            DeltaTable.forPath(self.spark, self.path).optimize().executeCompaction()
        except Exception:
            log.warning("lakejoin: could not compact the batch records at %s", self.path, exc_info=True)

    def _append(self, record: BatchRecord, *, txn_version: int) -> None:
        row = (
            self.pipeline,
            record.view,
            record.batch_id,
            record.status.value,
            record.mode.value,
            record.start_versions,
            record.pinned_versions,
            datetime.now(UTC).replace(tzinfo=None),
            record.metrics,
            json.dumps(record.notes, sort_keys=True),
        )
        frame = self.spark.createDataFrame([row], SCHEMA)
        for attempt in range(3):
            try:
                (
                    frame.write.format("delta")
                    .mode("append")
                    # Append-only, so deletion vectors would buy nothing, and the no-Spark
                    # readers (pending.py, reports) use delta-rs, which cannot read them.
                    .option("delta.enableDeletionVectors", "false")
                    .option("txnAppId", f"lakejoin.{self.pipeline}.{record.view}.batches")
                    .option("txnVersion", txn_version)
                    .save(self.path)
                )
                return
            except Exception as exc:
                # Views of one pipeline may run in parallel; only the very first appends race
                # to create the table. Blind appends never conflict once it exists.
                if attempt == 2 or "Concurrent" not in str(exc) and "ProtocolChanged" not in str(exc):
                    raise


def read_histories(pipeline: str, path: str, view: str | None = None) -> dict[str, list[BatchRecord]]:
    """Every view's `BatchStore.history`, read with delta-rs: no JVM, for the report pages.

    `path` is the batch records' table on a local or mounted filesystem.
    """
    from deltalake import DeltaTable

    if not (Path(path) / "_delta_log").is_dir():
        return {}
    filters = [("pipeline", "=", pipeline)] + ([("view", "=", view)] if view else [])
    rows = DeltaTable(path).to_pyarrow_table(filters=filters).to_pylist()
    by_view: dict[str, list[dict]] = {}
    for row in sorted(rows, key=lambda r: (r["batch_id"], r["recorded_at"])):
        # Arrow gives a MAP column as a list of (key, value) pairs.
        row.update({c: dict(row[c] or []) for c in ("start_versions", "pinned_versions", "metrics")})
        by_view.setdefault(row["view"], []).append(row)
    return {view: _one_per_batch(view_rows) for view, view_rows in by_view.items()}


def last_of(records: list[BatchRecord], status: BatchStatus | None = None) -> BatchRecord | None:
    """The newest of a view's records (of those with `status`, when given)."""
    chosen = [r for r in records if status is None or r.status is status]
    return chosen[-1] if chosen else None


def _one_per_batch(rows: list) -> list[BatchRecord]:
    """Rows of one view, oldest first, as records: a batch's commit (or abandon) wins over its plan."""
    latest: dict[int, BatchRecord] = {}
    for row in rows:
        record = _from_row(row)
        if record.batch_id not in latest or record.status is not BatchStatus.PLANNED:
            latest[record.batch_id] = record
    return [latest[batch_id] for batch_id in sorted(latest)]


def _from_row(row) -> BatchRecord:  # noqa: ANN001 - pyspark Row
    return BatchRecord(
        view=row["view"],
        batch_id=int(row["batch_id"]),
        status=BatchStatus(row["status"]),
        mode=BatchMode(row["mode"]),
        start_versions=dict(row["start_versions"] or {}),
        pinned_versions=dict(row["pinned_versions"] or {}),
        recorded_at=row["recorded_at"],
        metrics={k: int(v) for k, v in (row["metrics"] or {}).items()},
        notes=json.loads(row["notes"] or "{}"),
    )


FAILPOINT = "LAKEJOIN_FAILPOINT"
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


@contextmanager
def idempotent(spark: SparkSession, app_id: str, txn_version: int) -> Iterator[None]:
    """Make each Delta write inside this block apply at most once per (app_id, version) and
    table; a block inside another restores the outer one's pair when it ends.

    Delta records the pair in the table's log; a retry of the same batch skips the write.
    """
    outer = current_txn(spark)
    spark.conf.set(TXN_APP_ID, app_id)
    spark.conf.set(TXN_VERSION, str(txn_version))
    try:
        yield
    finally:
        if outer is None:
            spark.conf.unset(TXN_APP_ID)
            spark.conf.unset(TXN_VERSION)
        else:
            spark.conf.set(TXN_APP_ID, outer[0])
            spark.conf.set(TXN_VERSION, str(outer[1]))


def current_txn(spark: SparkSession) -> tuple[str, int] | None:
    """The (app_id, version) of the `idempotent` block the session is in, if any."""
    app_id, version = spark.conf.get(TXN_APP_ID, None), spark.conf.get(TXN_VERSION, None)
    return (app_id, int(version)) if app_id and version else None


def failpoint(name: str) -> None:
    """Test hook: `LAKEJOIN_FAILPOINT=<name>` kills the process here, as a crash would."""
    if os.environ.get(FAILPOINT) == name:
        os.kill(os.getpid(), signal.SIGKILL)
