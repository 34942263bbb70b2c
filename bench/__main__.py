"""`python -m bench`: incremental batches against full recompute (issue 6).

    python -m bench                       # the full matrix at 1.5 M and 15 M orders -> docs/benchmarks.md
    python -m bench --smoke               # 100 k orders, 1 % change, 3 scenarios, INC and FULL -> build/
    python -m bench --out /tmp/side --not-judged ...   # a side run: in the tables, not in the targets
    python -m bench.merge /tmp/side/bench/results.jsonl --run "..."   # add it to docs/ (bench/merge.py)
    python -m bench judge [--check]       # targets.json and the pages, from the records (bench/judge.py)
    python -m bench fixed_cost --orders 1500000   # = python -m bench.fixed_cost ... (every module)

Figures go to `<out>/bench/results.jsonl` as they are measured, then `<out>/benchmarks.md` and
`<out>/bench/benchmark.png`. The exit status is 1 when the correctness gate failed on any batch.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bench.changes import Scenario
from bench.matrix import VARIANTS, Matrix, run_matrix

if TYPE_CHECKING:
    from bench.harness import Run

# The smoke run is CI's gate (INC == FULL on every view), so it covers every source table and
# mechanism in as few batches as it can: mixed changes facts and fk sides, hot_dim propagates a
# dimension row and popular tags, skewed takes the fan-out fallback. It runs the two variants the
# contract is about, INC against FULL: the baselines (floor, per_record, naive) are figures for
# the full benchmark, not lakejoin's correctness, and doubled the smoke's time in CI.
SMOKE_VARIANTS = ("full", "inc")
SMOKE_SCENARIOS = ("mixed", "hot_dim", "skewed")
# The gate needs every mechanism, not size: at 100 k orders a smoke batch is the same code path
# as at 1.5 M (the fan-out shares scale with the tables) at a fifteenth of the table writes. (At
# 300 k the smoke took 10.6 of CI's 64 minutes, session 28; its INC batches are mostly fixed cost.)
SMOKE_ORDERS = 100_000
# The matrix's options: their defaults, and what --smoke stands for.
MATRIX = {
    "orders": "1500000,15000000",
    "rates": "0.001,0.01,0.1",
    "scenarios": ",".join(s.value for s in Scenario),
    "variants": ",".join(VARIANTS),
}
SMOKE = {
    "orders": str(SMOKE_ORDERS),
    "rates": "0.01",
    "scenarios": ",".join(SMOKE_SCENARIOS),
    "variants": ",".join(SMOKE_VARIANTS),
}


def _options(parser: argparse.ArgumentParser) -> None:
    """The matrix's own options, after the harness's common ones."""
    smoke_help = "100 k orders, 1 %% change, 3 scenarios (CI's gate; it sets the four below)"
    parser.add_argument("--smoke", action="store_true", help=smoke_help)
    parser.add_argument("--orders", help=f"order counts, comma-separated (default {MATRIX['orders']})")
    parser.add_argument("--rates", help=f"change rates, comma-separated (default {MATRIX['rates']})")
    parser.add_argument("--scenarios", help=f"default {MATRIX['scenarios']}")
    parser.add_argument("--variants", help=f"default {MATRIX['variants']}")
    parser.add_argument(
        "--not-judged",
        action="store_true",
        help="a side run: its batches go in the tables, the targets skip them (see bench/report.py)",
    )


def smoke(args: argparse.Namespace) -> argparse.Namespace:
    """`--smoke` as the options it stands for (CI's gate), refused with any of them (ValueError:
    it would override them); `--out` goes to build/ unless given. Without `--smoke`, an option
    not given takes its default (MATRIX)."""
    given = [f"--{name}" for name in MATRIX if getattr(args, name) is not None]
    if args.smoke and given:
        raise ValueError(f"--smoke sets {', '.join(given)} itself: drop {' and '.join(given)}, or --smoke")
    chosen = SMOKE if args.smoke else MATRIX
    for name, value in chosen.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.smoke and args.out == "docs":
        args.out = "build/bench-smoke"
    return args


# The subcommands, each a module of bench/ with its own `main(argv)`: `python -m bench NAME ...`
# runs `python -m bench.NAME ...`. An argv that starts with an option is the matrix's.
COMMANDS = (
    "judge",
    "merge",
    "fixed_cost",
    "job_lines",
    "tiny_views",
    "composite_key",
    "audit_cost",
    "explain_cost",
    "plan_cost",
    "lineage_cost",
    "profile",
    "run_path",
)


def summary(command: str) -> str:
    """The first line of bench/`command`.py's docstring (read as text: no import, no Spark),
    without its `python -m bench...` prefix, which the list of commands says already."""
    source = (Path(__file__).parent / f"{command}.py").read_text()
    doc = ast.get_docstring(ast.parse(source)) or ""
    return re.sub(r"^`python -m bench[ .]\w+`: ", "", doc.split("\n", 1)[0])


def commands_help() -> str:
    """The help's list of the other commands, each with its module's summary on one line."""
    width = max(len(c) for c in COMMANDS) + 2
    lines = [f"  {c:<{width}}{summary(c)}" for c in COMMANDS]
    return "\n".join(
        [
            "Other commands (python -m bench NAME --help: its options; = python -m bench.NAME):",
            *lines,
            "Retired studies (state_choice, write_paths): docs/bench/studies.md.",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m bench [options]`: the matrix; `python -m bench NAME ...`: bench/NAME.py's main."""
    given = sys.argv[1:] if argv is None else argv
    if given[:1] and given[0] in COMMANDS:  # judge and merge start no Spark
        from importlib import import_module

        command: Callable[[list[str]], int] = import_module(f"bench.{given[0]}").main
        return command(list(given[1:]))
    from bench.harness import Session, run

    return run(
        argv,
        program="python -m bench",
        doc=__doc__ or "",
        session=Session("lakejoin-bench", driver_memory="10g", extra={"spark.driver.maxResultSize": "4g"}),
        work="build/bench-lake",
        measure=measure,
        options=_options,
        # run_matrix clears each size's folder under --work itself, just before writing its tables.
        clear=False,
        epilog=commands_help(),
    )


def measure(run: Run) -> int:
    """Every size's matrix, then the report; the exit status is 1 when a gate failed."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from bench.report import write_report

    try:
        args = smoke(run.args)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    unknown = set(args.variants.split(",")) - set(VARIANTS)
    if unknown:
        print(f"unknown variants {sorted(unknown)}: choose from {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    out, work = Path(args.out), run.work.resolve()
    results = run.out / "results.jsonl"
    results.unlink(missing_ok=True)
    matrices = [
        Matrix(
            orders=int(orders),
            rates=tuple(float(r) for r in args.rates.split(",")),
            scenarios=tuple(Scenario(s) for s in args.scenarios.split(",")),
            variants=tuple(v for v in VARIANTS if v in args.variants.split(",")),
            seed=args.seed,
            vacuum=int(orders) > 2_000_000,
            judged=not args.not_judged,
        )
        for orders in args.orders.split(",")
    ]
    console = Console()
    spark = run.spark
    started = time.perf_counter()
    failures: list[str] = []
    steps = sum(len(m.batches) for m in matrices)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} batches"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("starting", total=steps)
        for matrix in matrices:

            def say(text: str, matrix: Matrix = matrix) -> None:
                progress.update(task, description=f"{matrix.orders:,} orders: {text}")
                if text.endswith("correctness gate"):
                    progress.advance(task)

            failures += run_matrix(spark, matrix, work, results, say)
    command = "python -m bench " + run.command
    report = write_report(results, out, command=command.strip(), total_seconds=time.perf_counter() - started)
    console.print(f"figures: {report} ({results})")
    for failure in failures:
        console.print(f"[red]correctness gate failed[/red]: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
