"""Profile one INC batch: where a batch's wall time goes, function by function.

    python -m bench.profile --orders 1500000 --scenario facts --rate 0.01

Builds a fresh lakehouse at the given size (build/bench-profile), runs lakejoin's first batch,
applies one change batch, then runs every view's incremental batch under cProfile and prints
the lakejoin functions that hold the time (Spark and Delta calls are charged to the lakejoin
line that made them), and each phase per view.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from bench.changes import ChangeMaker, Scenario
    from bench.tables import Sizes, write_sources
    from bench.variants import spec_for
    from lakejoin.delta.session import spark_session
    from lakejoin.engine.batch import run_view

    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=1_500_000)
    parser.add_argument("--scenario", default="facts", choices=[s.value for s in Scenario])
    parser.add_argument("--rate", type=float, default=0.01)
    parser.add_argument("--work", default="build/bench-profile")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--save", help="also write the raw profile here (pstats format)")
    parser.add_argument("--batches", type=int, default=2, help="change batches; the last one is profiled")
    args = parser.parse_args(argv)

    spark = spark_session(app_name="lakejoin-profile", extra={"spark.driver.memory": "10g"})
    root = Path(args.work)
    shutil.rmtree(root, ignore_errors=True)
    sizes = Sizes.at(args.orders)
    sources = write_sources(spark, root, sizes, seed=42)
    spec = spec_for("profile", root / "inc", sources)
    for view in spec.view_order():
        run_view(spark, spec, view, checks=False)
    changes = ChangeMaker(spark, sources, sizes, seed=42)
    profiler = cProfile.Profile()
    for batch in range(1, args.batches + 1):
        changes.apply(Scenario(args.scenario), args.rate, batch)
        last = batch == args.batches
        for view in spec.view_order():
            if last:
                profiler.enable()
            summary = run_view(spark, spec, view)
            if last:
                profiler.disable()
                phases = ", ".join(f"{p} {s:.2f}" for p, s in summary.phase_seconds.items())
                print(f"{view}: {summary.outcome.value}, |K| {summary.affected_keys}: {phases}")
    if args.save:
        profiler.dump_stats(args.save)
    stats = pstats.Stats(profiler, stream=sys.stdout).sort_stats("cumulative")
    stats.print_stats(r"lakejoin|great_expectations/data_context|delta/tables", args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
