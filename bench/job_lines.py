"""Charge every Spark job a batch starts to the lakejoin line that started it.

    python -m bench.job_lines --orders 20000

Each py4j call made from lakejoin's code runs under a Spark job group named after the innermost
lakejoin frame (file:line function), so Spark's status tracker can say how many jobs each line
started. Builds the benchmark's tables, runs a first batch of every view, changes a few rows of
every source, and prints the jobs of the next batch per view, line by line. A profiling aid for
people, not a test and not a target.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.harness import Run

_guard = threading.local()


def _lakejoin_line() -> str:
    frame: Any = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if "/lakejoin/" in name and "/bench/" not in name:
            short = name.split("/lakejoin/", 1)[1]
            return f"{short}:{frame.f_lineno} {frame.f_code.co_name}"
        frame = frame.f_back
    return "(outside lakejoin)"


SECONDS: dict[str, float] = {}


def attribute(spark: Any) -> set[str]:
    """Patch py4j so every Java call runs under a job group named after its lakejoin line."""
    from py4j import java_gateway

    jsc = spark.sparkContext._jsc
    groups: set[str] = set()
    original = java_gateway.JavaMember.__call__
    current: dict[str, str | None] = {"label": None}

    def call(self: Any, *args: Any) -> Any:
        if getattr(_guard, "busy", False):
            return original(self, *args)
        label = _lakejoin_line()
        if label != current["label"]:
            _guard.busy = True
            try:
                jsc.setJobGroup(label, label, False)
            finally:
                _guard.busy = False
            current["label"] = label
            groups.add(label)
        started = time.perf_counter()
        try:
            return original(self, *args)
        finally:
            SECONDS[label] = SECONDS.get(label, 0.0) + time.perf_counter() - started

    java_gateway.JavaMember.__call__ = call
    return groups


def _stage_names(tracker: Any, job_ids: set[int]) -> Counter[str]:
    """How many of these jobs' stages ran under each call-site name (skipped stages included)."""
    names: Counter[str] = Counter()
    for job_id in job_ids:
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job else []:
            stage = tracker.getStageInfo(stage_id)
            names[stage.name if stage else "(stage not retained)"] += 1
    return names


def _sql_executions(spark: Any) -> list[dict[str, Any]]:
    """Every SQL query of the application so far, as the Spark UI's REST API lists them."""
    import json
    import urllib.request

    context = spark.sparkContext
    url = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}/sql?details=true&length=100000"
    with urllib.request.urlopen(url) as answer:  # noqa: S310 - the local Spark UI
        return json.load(answer) or [{"id": -1}]


def _print_slowest(spark: Any, lines: dict[str, set[int]], after: int, n: int) -> None:
    """The `n` slowest SQL queries since query `after`: seconds, the lakejoin line that ran them,
    and each scan's rows and files (which table a query's time goes to)."""
    queries = [q for q in _sql_executions(spark) if q.get("id", -1) > after]
    for query in sorted(queries, key=lambda q: -q.get("duration", 0))[:n]:
        jobs = [*query.get("successJobIds", []), *query.get("failedJobIds", [])]
        group = next((line for line, ids in lines.items() if ids & set(jobs)), "?")
        print(f"    {query.get('duration', 0) / 1000:6.2f} s  query {query['id']} ({len(jobs)} jobs) {group}")
        for node in query.get("nodes", []):
            if "Scan" not in node.get("nodeName", ""):
                continue
            metrics = {m["name"]: m["value"] for m in node.get("metrics", [])}
            shown = {k: v for k, v in metrics.items() if "rows" in k or "files" in k or "time" in k}
            print(f"           {node['nodeName'][:60]}: {shown}")


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.job_lines [--orders N] [--views ...] [--conf k=v] [--stages] [--sql N]`."""
    from bench.harness import Session, run

    return run(
        argv,
        program="python -m bench.job_lines",
        doc=__doc__ or "",
        session=Session(
            "lakejoin-job-lines", settings=lambda a: {"spark.ui.enabled": "true"} if a.sql else {}
        ),
        work="build/job-lines-lake",
        orders=20_000,
        measure=measure,
        options=_options,
        seed=False,
        out=False,
    )


def _ui(args: argparse.Namespace) -> dict[str, str]:
    """Spark's UI on only for --sql (its REST API lists the queries)."""
    return {"spark.ui.enabled": "true"} if args.sql else {}


def _options(parser: argparse.ArgumentParser) -> None:
    """job_lines' own options, after the harness's common ones."""
    parser.add_argument("--views", nargs="*", help="only these views (default: every view)")
    parser.add_argument("--conf", nargs="*", default=[], help="Spark settings key=value, measured batch only")
    parser.add_argument("--stages", action="store_true", help="also name the stages of each line's jobs")
    parser.add_argument(
        "--sql", type=int, default=0, metavar="N", help="also show each view's N slowest queries (Spark UI)"
    )


def measure(run: Run) -> int:
    """A first batch and a tiny batch of every view, a second tiny change, then each view's batch
    with its jobs and seconds by lakejoin line (printed)."""
    from bench.harness import tiny_change
    from lakejoin.engine.batch import run_view

    args = run.args
    lake = run.lake("job_lines", seed=42)
    spark, spec, maker = run.spark, lake.spec, lake.maker
    for view in spec.view_order():
        run_view(spark, spec, view)
    tiny_change(spark, maker, 1)
    for view in spec.view_order():
        run_view(spark, spec, view)
    tiny_change(spark, maker, 2)
    for setting in args.conf:
        spark.conf.set(*setting.split("=", 1))
    tracker = spark.sparkContext.statusTracker()
    groups = attribute(spark)
    for view in spec.view_order():
        if args.views and view not in args.views:
            continue
        seen = {g: set(tracker.getJobIdsForGroup(g)) for g in list(groups)}
        last_query = _sql_executions(spark)[-1]["id"] if args.sql else 0
        SECONDS.clear()
        summary = run_view(spark, spec, view)
        new = {g: set(tracker.getJobIdsForGroup(g)) - seen.get(g, set()) for g in list(groups)}
        jobs = Counter({g: len(ids) for g, ids in new.items()})
        total = sum(jobs.values())
        phases = ", ".join(f"{p} {s:.1f}" for p, s in summary.phase_seconds.items())
        print(f"\n== {view}: {summary.outcome.value}, {total} jobs ({phases})")
        for line in sorted(set(jobs) | set(SECONDS)):
            if jobs.get(line) or SECONDS.get(line, 0) > 0.05:
                print(f"  {jobs.get(line, 0):4d} jobs {SECONDS.get(line, 0):6.2f} s  {line}")
                if args.stages:
                    for name, count in sorted(_stage_names(tracker, new.get(line, set())).items()):
                        print(f"         {count:4d} x {name}")
        if args.sql:
            _print_slowest(spark, new, last_query, args.sql)
    run.stop_spark()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
