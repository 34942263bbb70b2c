"""What Spark scanned: the data files each SQL execution read, by table, from Spark's own SQL
status store (the one the UI's SQL tab shows, kept with the UI off too).

    mark = scans.mark(spark)
    ...  # a batch
    read = scans.since(spark, mark)  # {table path: files read by Spark's scans}

A file scan's node in the executed plan names its table (`Location: ...[path]`) and counts the
files it read after data skipping (`number of files read`); reads of a table's `_delta_log`
are Delta's own and not counted. A read on the driver (delta-rs) and a local relation are no
Spark scan at all.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

_LOCATION = re.compile(r"Location: [\w$]+(?:\(\d+ paths?\))?\[(?P<paths>[^\]]*)\]")


def _seq(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.size())]


def _store(spark: Any) -> Any:
    return spark._jsparkSession.sharedState().statusStore()


def _drain(spark: Any) -> None:
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()


def mark(spark: Any) -> int:
    """The newest SQL execution's id so far (-1: none). Plans then name their tables' paths in
    full (Spark abbreviates a scan's location to 100 characters)."""
    spark.conf.set("spark.sql.maxMetadataStringLength", "100000")
    _drain(spark)
    ids = [e.executionId() for e in _seq(_store(spark).executionsList())]
    return max(ids, default=-1)


def since(spark: Any, after: int) -> Counter[str]:
    """Data files read by Spark's file scans in the SQL executions after `after`, by the path of
    the table they read (`file:` prefix and trailing slash dropped)."""
    _drain(spark)
    store = _store(spark)
    read: Counter[str] = Counter()
    for execution in _seq(store.executionsList()):
        run = execution.executionId()
        if run <= after:
            continue
        values = {t._1(): t._2() for t in _seq(store.executionMetrics(run).toSeq())}
        for node in _seq(store.planGraph(run).allNodes()):
            found = _LOCATION.search(node.desc())
            if found is None:
                continue
            files = 0
            for metric in _seq(node.metrics()):
                if metric.name() == "number of files read":
                    files = int(str(values.get(metric.accumulatorId(), "0")).replace(",", "") or 0)
            for path in found.group("paths").split(", "):
                path = path.removeprefix("file:").rstrip("/")
                if "/_delta_log" not in path and files:
                    read[path] += files
    return read


def plans(spark: Any, after: int, upto: int | None = None) -> list[str]:
    """The executed plans (physical, as the UI's SQL tab shows them) of the SQL executions after
    `after` and up to `upto` (None: the newest), in order."""
    _drain(spark)
    found = []
    for execution in _seq(_store(spark).executionsList()):
        run = execution.executionId()
        if run > after and (upto is None or run <= upto):
            found.append((run, str(execution.physicalPlanDescription())))
    return [plan for _, plan in sorted(found)]


def reads_stored_rows(plan: str) -> bool:
    """Whether an executed plan reads rows Spark holds (a file scan, or a checkpoint's or an
    RDD's rows), not only local relations (rows the driver gave it)."""
    return (
        bool(_LOCATION.search(plan)) or "ExistingRDD" in plan or "Scan " in plan.replace("LocalTableScan", "")
    )
