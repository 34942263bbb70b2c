"""What the benchmark measures around each run: peak memory, the Delta operations it committed
(from each table's own history), and a whole-table fingerprint for the correctness gate."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MB = 1024 * 1024


@dataclass
class Peak:
    """Peak resident memory of this process and its children (the JVM), and peak JVM heap in use."""

    rss_mb: float = 0.0
    heap_mb: float = 0.0
    python_mb: float = 0.0


def lakejoin_commit() -> str:
    """The commit of the code being measured (`-dirty` when the work tree has changes)."""
    described = subprocess.run(
        ["git", "describe", "--always", "--dirty", "--abbrev=7"], capture_output=True, text=True
    )
    return described.stdout.strip() or "?"


@contextmanager
def peak_memory(spark: SparkSession, every: float = 0.25) -> Iterator[Peak]:
    """Sample memory while the block runs. The JVM is asked to collect garbage first, so the heap
    peak is this block's own (its RSS only grows, so RSS is the run's high-water mark)."""
    import psutil

    peak = Peak()
    runtime = spark.sparkContext._jvm.java.lang.Runtime.getRuntime()  # type: ignore[union-attr]
    runtime.gc()
    me = psutil.Process(os.getpid())
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            try:
                python = me.memory_info().rss
                total = python + sum(c.memory_info().rss for c in me.children(recursive=True))
                heap = runtime.totalMemory() - runtime.freeMemory()
            except Exception:  # a child ended between the listing and the read; sample again
                continue
            peak.rss_mb = max(peak.rss_mb, total / MB)
            peak.python_mb = max(peak.python_mb, python / MB)
            peak.heap_mb = max(peak.heap_mb, heap / MB)
            done.wait(every)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        done.set()
        thread.join()


@dataclass
class Writes:
    """What the Delta commits of one run wrote, summed over tables (Delta's operationMetrics)."""

    commits: int = 0
    rows_written: int = 0  # rows inserted, updated or copied into new files
    rows_copied: int = 0  # unchanged rows rewritten because they shared a file with a change
    files_added: int = 0
    files_removed: int = 0
    by_operation: dict[str, int] = field(default_factory=dict)


def table_versions(spark: SparkSession, root: Path) -> dict[str, int]:
    """The latest version of every Delta table under `root` (read with delta-rs: no Spark job)."""
    from deltalake import DeltaTable

    versions = {}
    for log in root.rglob("_delta_log"):
        path = str(log.parent)
        if DeltaTable.is_deltatable(path):
            versions[path] = int(DeltaTable(path).version())
    return versions


def writes_since(spark: SparkSession, root: Path, before: dict[str, int]) -> Writes:
    """Sum the operationMetrics of every commit under `root` newer than `before` (delta-rs's
    history: the commits' own commitInfo, whichever engine wrote them)."""
    from deltalake import DeltaTable

    from lakejoin.delta.markers import operation_metrics

    writes = Writes()
    for path, version in table_versions(spark, root).items():
        since = before.get(path, -1)
        if version <= since:
            continue
        for commit in DeltaTable(path).history(limit=version - since):
            if int(commit.get("version", -1)) <= since:
                continue
            metrics = operation_metrics(commit)
            operation = str(commit.get("operation", "?"))
            writes.commits += 1
            writes.by_operation[operation] = writes.by_operation.get(operation, 0) + 1
            writes.rows_copied += metrics.get("numTargetRowsCopied", 0)
            writes.rows_written += (
                metrics.get("numTargetRowsInserted", 0)
                + metrics.get("numTargetRowsUpdated", 0)
                + metrics.get("numTargetRowsCopied", 0)
                + metrics.get("numOutputRows", 0)
            )
            writes.files_added += metrics.get("numTargetFilesAdded", 0) + metrics.get("numFiles", 0)
            writes.files_removed += metrics.get("numTargetFilesRemoved", 0) + metrics.get(
                "numRemovedFiles", 0
            )
    return writes


def fingerprint(spark: SparkSession, path: str) -> tuple[int, int]:
    """(row count, order-independent sum of a 64-bit hash of every whole row) of a table."""
    from pyspark.sql import functions as F

    rows = spark.read.format("delta").load(path)
    hashed = F.xxhash64(*[F.col(f"`{c}`") for c in rows.columns]).cast("decimal(38,0)")
    result = rows.agg(F.count(F.lit(1)).alias("n"), F.sum(hashed).alias("h")).first()
    assert result is not None
    return int(result["n"]), int(result["h"] or 0)


class Stopwatch:
    """Wall time per named phase, in the order the phases ran."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
