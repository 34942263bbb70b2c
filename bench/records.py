"""Does planning a batch get slower the more batches a pipeline has run? The batch records on
their own, outside the matrix: every batch of every view appends two one-row files (its plan
and its commit), and a plan reads every record of its view.

    python -m bench.records --views 5 --batches 100      # -> docs/bench/records.jsonl

The records table is filled as a pipeline would (`BatchStore.plan` and `commit`), first without
compaction (lakejoin before it compacted them), and every `--every` batches the script times:
- the plan's read (`BatchStore.histories` of one view, Spark);
- the report pages' read (`read_histories` of the whole pipeline, delta-rs, no JVM);
- the appends of the interval (a plan and a commit record each).
At the end it compacts the records once (what `BatchStore.commit` now does every
`COMPACT_EVERY` batches of a view) and times the same reads again. It fails (exit 1) when the
compaction changed a record.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

PIPELINE = "bench_records"


def timed(call: Callable[[], object], repeat: int = 3) -> float:
    """The median wall seconds of `repeat` calls."""
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def main(argv: list[str] | None = None) -> int:
    from rich.progress import Progress

    from lakejoin.engine.records import BatchMode, BatchRecord, BatchStatus, BatchStore, read_histories
    from lakejoin.session import spark_session
    from lakejoin.sources import data_files

    parser = argparse.ArgumentParser(prog="python -m bench.records", description=__doc__.split("\n")[0])
    parser.add_argument("--views", type=int, default=5)
    parser.add_argument("--batches", type=int, default=100, help="batches of every view")
    parser.add_argument("--every", type=int, default=20, help="batches between two measures")
    parser.add_argument("--work", default="build/bench-records")
    parser.add_argument("--out", default="docs/bench/records.jsonl")
    args = parser.parse_args(argv)

    spark = spark_session(app_name="lakejoin-bench-records")
    path = str(Path(args.work).resolve() / "batches")
    shutil.rmtree(path, ignore_errors=True)
    store = BatchStore(spark, PIPELINE, path, compact_every=0)
    views = [f"view_{i}" for i in range(args.views)]
    results: list[dict[str, Any]] = []

    def measure(batches: int, appends: list[float], state: str) -> None:
        point = {
            "event": "records",
            "state": state,
            "views": args.views,
            "batches": batches,
            "records": 2 * batches * args.views,
            "files": data_files(spark, path),
            "plan_read_s": timed(lambda: store.histories([views[0]])),
            "pages_read_s": timed(lambda: read_histories(PIPELINE, path)),
            "append_s": statistics.median(appends) if appends else None,
        }
        results.append(point)
        print(json.dumps(point), flush=True)

    appends: list[float] = []
    with Progress() as progress:
        task = progress.add_task("batch records", total=args.batches * args.views)
        for batch_id in range(1, args.batches + 1):
            for view in views:
                record = BatchRecord(
                    view, batch_id, BatchStatus.PLANNED, BatchMode.INCREMENTAL, {"s": 0}, {"s": 1}
                )
                started = time.perf_counter()
                store.plan(record)
                store.commit(replace(record, status=BatchStatus.COMMITTED, metrics={"inserted": 1}))
                appends.append((time.perf_counter() - started) / 2)
                progress.advance(task)
            if batch_id % args.every == 0 or batch_id == args.batches:
                measure(batch_id, appends, "not compacted")
                appends = []

    before = store.histories(views)
    started = time.perf_counter()
    store.compact()
    compaction = time.perf_counter() - started
    measure(args.batches, [], "compacted")
    results[-1]["compaction_s"] = compaction
    same = store.histories(views) == before
    results[-1]["records_unchanged"] = same

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as handle:
        for point in results:
            handle.write(json.dumps(point) + "\n")
    print(f"compaction: {compaction:.1f} s; records unchanged: {same}; figures appended to {out}")
    spark.stop()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
