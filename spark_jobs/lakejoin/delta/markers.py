"""The batch commit (DESIGN §2, version 2): a batch is its output table's own Delta commit.

That commit carries the batch in two places of Delta's log:
- a `txn` action (`txnAppId` = `lakejoin.<pipeline>.<view>`, `txnVersion`), which Delta keeps
  through checkpoints and log cleanup, and which makes the commit apply at most once;
- commitInfo's `userMetadata`: the batch id, its mode, the versions of its inputs and the
  view's definition (spec/definition.py), which the next plan compares with the spec's.

The batch commit's `txnVersion` is `2 * batch + 1`. A lakejoin before issue 37 wrote some
batches in two output commits and stamped the first `2 * batch`; this version writes every batch
in one commit, so an even txn version is only ever such a batch, half written by a run that died
between its two commits (`OutputBatches.half_written_by_older`).

Everything here reads Delta's log with delta-rs: no JVM.

>>> output_batches("lakehouse/views/display_products", "lakejoin.shop.display_products")  # doctest: +SKIP
OutputBatches(txn_version=7, version=12)
"""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakejoin.delta.history import numbered_history
from lakejoin.delta.identity import TableIdentity, identities_from, identities_json
from lakejoin.delta.records import BatchMode

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMAT = 2  # the protocol version a batch commit's metadata declares
FINAL = "batch"  # the marker part of an output's batch commit
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
FAILPOINT = "LAKEJOIN_FAILPOINT"
HISTORY_PAGE = 32  # commits read per page of an output's history, newest first


def app_id(pipeline: str, view: str) -> str:
    """The `txnAppId` of a view's batch commits."""
    return f"lakejoin.{pipeline}.{view}"


@dataclass(frozen=True)
class BatchMarker:
    """What an output commit says of its batch (its `userMetadata`)."""

    batch_id: int
    part: str  # FINAL on an output's batch commit
    mode: BatchMode
    start_versions: dict[str, int]
    pinned_versions: dict[str, int]
    run: str = field(default_factory=lambda: uuid.uuid4().hex)  # tells this run's commits apart
    definition: dict[str, Any] | None = None  # the view's definition (spec/definition.py)
    # A repair's last version of each range it re-derived (start, end]; its pins stay the
    # committed batch's, so they do not say where the range ended.
    repair_ends: dict[str, int] = field(default_factory=dict)
    # Which table each pin is of: its table id and pinned commit (delta/identity.py).
    identities: dict[str, TableIdentity] = field(default_factory=dict)
    # The strategy that wrote the batch commit (sink/strategy.py); None on older commits.
    write: str | None = None

    @property
    def txn_version(self) -> int:
        """The `txnVersion` of the batch's output commit."""
        return 2 * self.batch_id + 1

    def as_json(self) -> str:
        return json.dumps(
            {
                "lakejoin": FORMAT,
                "batch": self.batch_id,
                "part": self.part,
                "mode": self.mode.value,
                "start": self.start_versions,
                "pins": self.pinned_versions,
                "run": self.run,
                **({"definition": self.definition} if self.definition is not None else {}),
                **({"ends": self.repair_ends} if self.repair_ends else {}),
                **({"ids": identities_json(self.identities)} if self.identities else {}),
                **({"write": self.write} if self.write is not None else {}),
            },
            sort_keys=True,
        )

    @classmethod
    def from_commit(cls, commit: dict[str, Any]) -> BatchMarker | None:
        """The marker of one commit of delta-rs's `history()` (None: not a batch commit)."""
        try:
            meta = json.loads(commit.get("userMetadata") or "null")
        except ValueError:
            return None
        if not isinstance(meta, dict) or meta.get("lakejoin") != FORMAT:
            return None
        return cls(
            batch_id=int(meta["batch"]),
            part=str(meta["part"]),
            mode=BatchMode(meta["mode"]),
            start_versions={k: int(v) for k, v in meta["start"].items()},
            pinned_versions={k: int(v) for k, v in meta["pins"].items()},
            run=str(meta.get("run", "")),
            definition=meta.get("definition") if isinstance(meta.get("definition"), dict) else None,
            repair_ends={k: int(v) for k, v in (meta.get("ends") or {}).items()},
            identities=identities_from(meta.get("ids")),
            write=str(meta["write"]) if meta.get("write") is not None else None,
        )


@dataclass(frozen=True)
class OutputBatches:
    """Where a view's output stands: the `txnVersion` of its newest batch commit (None: no batch
    has committed into it) and its newest table version (-1: no table)."""

    txn_version: int | None
    version: int

    @property
    def last_committed(self) -> int | None:
        """The newest committed batch (None: none has, or see `half_written_by_older`)."""
        if self.txn_version is None or not self.txn_version % 2:
            return None
        return self.txn_version // 2

    @property
    def half_written_by_older(self) -> int | None:
        """The batch a lakejoin before issue 37 left half written (its first of two output
        commits landed, its batch commit did not), which this version does not finish."""
        if self.txn_version is None or self.txn_version % 2:
            return None
        return self.txn_version // 2


def output_batches(path: str, app: str) -> OutputBatches:
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(path):
        return OutputBatches(None, -1)
    table = DeltaTable(path)
    return OutputBatches(table.transaction_version(app), int(table.version()))


def operation_metrics(commit: dict[str, Any]) -> dict[str, int]:
    """A commit's numeric operationMetrics under Spark's names (`numOutputRows`,
    `numTargetRowsUpdated`...): delta-rs, which writes a batch of few keys, records the same
    counts in snake case (`num_output_rows`) and as numbers, Spark as strings."""
    metrics = {}
    for name, value in (commit.get("operationMetrics") or {}).items():
        if not str(value).isdigit():
            continue
        first, *rest = str(name).split("_")
        metrics[first + "".join(word[:1].upper() + word[1:] for word in rest)] = int(value)
    return metrics


def find_commit(
    path: str, wanted: Any, *, at: int | None = None
) -> tuple[int, BatchMarker, dict[str, Any]] | None:
    """The newest commit of the output at `path` (of those up to version `at`, when given) whose
    marker satisfies `wanted(marker)`, as (version, marker, commitInfo), read newest first a
    page at a time; None when the history (what log cleanup left of it) holds none."""
    from deltalake import DeltaTable

    table = DeltaTable(path)
    limit = HISTORY_PAGE
    while True:
        commits, complete = numbered_history(table, limit, upto=at)
        for commit in commits:
            marker = BatchMarker.from_commit(commit)
            if marker is not None and wanted(marker):
                return int(commit["version"]), marker, commit
        if complete:
            return None
        limit *= 4


@contextmanager
def stamped(spark: SparkSession, app: str, marker: BatchMarker) -> Iterator[None]:
    """Every Delta write inside this block carries `marker`: it applies at most once per
    (`app`, its txn version) and table, and its commitInfo holds the batch."""
    with idempotent(spark, app, marker.txn_version):
        spark.conf.set(USER_METADATA, marker.as_json())
        try:
            yield
        finally:
            spark.conf.unset(USER_METADATA)


@contextmanager
def idempotent(spark: SparkSession, app: str, txn_version: int) -> Iterator[None]:
    """Make each Delta write inside this block apply at most once per (app, version) and table;
    a block inside another restores the outer one's pair when it ends."""
    outer = current_txn(spark)
    spark.conf.set(TXN_APP_ID, app)
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
    app, version = spark.conf.get(TXN_APP_ID, None), spark.conf.get(TXN_VERSION, None)
    return (app, int(version)) if app and version else None


def failpoint(name: str) -> None:
    """Test hook: `LAKEJOIN_FAILPOINT=<name>` kills the process here, as a crash would."""
    if os.environ.get(FAILPOINT) == name:
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True)
class OutputCommit:
    """How a batch stamps its output write, the batch commit: `final` under the txn app id `app`."""

    app: str
    final: BatchMarker

    def committed(self, path: str) -> tuple[int, dict[str, Any]] | None:
        """The version and commitInfo of this run's batch commit (None: Delta skipped it, because
        another run committed this batch first)."""
        found = find_commit(path, lambda m: m.run == self.final.run and m.part == FINAL)
        return (found[0], found[2]) if found else None
