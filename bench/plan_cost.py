"""`python -m bench.plan_cost`: how long `lakejoin plan` takes for every view (issue 54).

The lake `bench.explain_cost` builds (the benchmark's five views on its tables, 15 M orders by
default, a first batch and two tiny ones; `--reuse` keeps one an earlier run of either built),
and a third tiny change that no batch has read yet, so every view has a next batch to plan
(incremental, with its change rows, write and time estimate). The JVM is then stopped and
`lakejoin plan SPEC --json` is run RUNS times, each in a process of its own as a user runs it,
wall clock of the whole command (Python's start and imports included); the median is judged.
Each process also reports whether pyspark was imported (it must not be).

Figures go to `<out>/bench/plan_cost.json` and an entry of `<out>/bench/targets.json`
("lakejoin plan at 15 M orders, every view, no JVM", limit 2 s).

    python -m bench.plan_cost --orders 15000000 --out docs [--reuse --work build/explain-cost-lake]
"""

from __future__ import annotations

import json
import statistics
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from bench.harness import Run

LIMIT = 2.0
RUNS = 5
OWNER = "plan_cost"  # its targets.json entry's `batch`

# Runs `lakejoin plan --json` as the command line does and says whether pyspark was imported.
PROBE = """\
import contextlib, io, json, sys, time
started = time.perf_counter()
from lakejoin.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["plan", sys.argv[1], "--json"])
print(json.dumps({"code": code, "seconds": time.perf_counter() - started,
                  "pyspark": "pyspark" in sys.modules, "answer": json.loads(out.getvalue())}))
"""


def ask(file: Path) -> dict[str, Any]:
    """One `lakejoin plan --json` in a process of its own: wall seconds, and what it said."""
    from bench.harness import timed_probe

    wall, said = timed_probe(PROBE, str(file))
    views = said["answer"]["views"]
    return {
        "wall_seconds": round(wall, 3),
        "in_process_seconds": round(said["seconds"], 3),
        "pyspark_imported": said["pyspark"],
        "actions": {v["view"]: v["action"] for v in views},
        "writes": {v["view"]: v["write"] for v in views},
    }


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.plan_cost [--orders N] [--reuse] ...`; exit 1 when the target is missed."""
    from bench.harness import Session, run

    return run(
        argv,
        program="python -m bench.plan_cost",
        doc=__doc__ or "",
        session=Session("lakejoin-plan-cost"),
        work="build/explain-cost-lake",
        orders=15_000_000,
        measure=measure,
        options=lambda parser: parser.add_argument(
            "--reuse",
            action="store_true",
            help="keep the lake an earlier run built (plan_cost or explain_cost)",
        ),
        clear=False,  # build() clears it, unless --reuse finds the lake
    )


def measure(run: Run) -> int:
    """Build the lake (Spark stopped after), then time `lakejoin plan` processes."""
    from bench.explain_cost import build
    from bench.measure import lakejoin_commit

    run.args.work = str(run.work.resolve())
    file = run.work / "explain_cost.yaml"
    if not (run.args.reuse and file.exists()):
        started = time.perf_counter()
        file = build(run, unread=1)
        print(f"lake built in {time.perf_counter() - started:.0f} s", flush=True)
    runs = [ask(file) for _ in range(RUNS)]
    walls = [r["wall_seconds"] for r in runs]
    record = {
        "orders": run.args.orders,
        "commit": lakejoin_commit(),
        "command": run.command,
        "median_wall_seconds": statistics.median(walls),
        "runs": runs,
        "pyspark_imported": any(r["pyspark_imported"] for r in runs),
    }
    (run.out / "plan_cost.json").write_text(json.dumps(record, indent=2) + "\n")
    [entry] = targets(record)
    run.replace_targets(OWNER, [entry])
    print(f"median {entry['measured']} s {walls}; pyspark imported: {record['pyspark_imported']}")
    print(f"plans: {runs[-1]['actions']}; writes: {runs[-1]['writes']}")
    return 0 if entry["met"] else 1


def targets(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's targets.json entry: the median, met only when no `lakejoin plan` imported
    pyspark (pure: `python -m bench judge` re-derives it)."""
    views = len(record["runs"][0]["actions"])
    measured = record["median_wall_seconds"]
    return [
        {
            "target": f"lakejoin plan at {record['orders'] / 1e6:g} M orders, every view, no JVM (seconds: "
            f"the median of {len(record['runs'])} whole `lakejoin plan --json` processes, {views} views)",
            "measured": measured,
            "limit": LIMIT,
            "met": measured <= LIMIT and not record["pyspark_imported"],
            "batch": OWNER,
            "commit": record["commit"],
        }
    ]


if __name__ == "__main__":
    raise SystemExit(main())
