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
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.harness import Run


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.profile [--orders N] [--scenario S] [--rate R] ...`: prints the profile."""
    from bench.harness import Session, run

    return run(
        argv,
        program="python -m bench.profile",
        doc=__doc__ or "",
        session=Session("lakejoin-profile", extra={"spark.driver.memory": "10g"}),
        work="build/bench-profile",
        orders=1_500_000,
        measure=measure,
        options=_options,
        seed=False,
        out=False,
    )


def _options(parser: argparse.ArgumentParser) -> None:
    """profile's own options, after the harness's common ones."""
    from bench.changes import Scenario

    parser.add_argument("--scenario", default="facts", choices=[s.value for s in Scenario])
    parser.add_argument("--rate", type=float, default=0.01)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--save", help="also write the raw profile here (pstats format)")
    parser.add_argument("--batches", type=int, default=2, help="change batches; the last one is profiled")


def measure(run: Run) -> int:
    """A first batch of every view, then `--batches` change batches, the last under cProfile."""
    from bench.changes import Scenario
    from bench.variants import spec_for
    from lakejoin.engine.batch import run_view

    args, spark = run.args, run.spark
    sizes, sources = run.sources(seed=42)
    spec = spec_for("profile", run.work / "inc", sources)
    for view in spec.view_order():
        run_view(spark, spec, view, checks=False)
    changes = run.maker(sizes, sources, seed=42)
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
