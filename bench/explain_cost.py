"""`python -m bench.explain_cost`: how long `lakejoin explain` takes for one key (issue 39).

The benchmark's five views on its tables (15 M orders by default): a first batch, then
TINY_BATCHES tiny batches (`harness.tiny_change`), so every output has a full build and a
few small commits behind it. The JVM is then stopped, and for each view three keys are asked
of `lakejoin explain --json`, each in a process of its own, as a user runs it:
- a key the last tiny batch changed (its row and the inputs' change rows of that batch);
- a key the first batch wrote and no batch since touched;
- a key that is in no output (a new order id past the last one; a made-up e-mail), which is
  explained at the pins of the view's last batch.
Each is timed RUNS times, wall clock of the whole command (Python's start and imports
included); the median is judged. Each process also reports whether pyspark was imported (it
must not be: explain reads through delta-rs only).

`--reuse` keeps a lake an earlier run built (the Spark part takes ~15 min at 15 M).

Figures go to `<out>/bench/explain_cost.json` and an entry of `<out>/bench/targets.json`
("explain at 15 M orders, one key, no JVM", limit 2 s: the slowest median).

    python -m bench.explain_cost --orders 15000000 --out docs
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.harness import Run

LIMIT = 2.0
RUNS = 3
TINY_BATCHES = 2
OWNER = "explain_cost"  # its targets.json entry's `batch`

# Runs explain as `lakejoin explain --json` does and says whether pyspark was imported.
PROBE = """\
import contextlib, io, json, sys, time
started = time.perf_counter()
from lakejoin.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["explain", sys.argv[1], sys.argv[2], *sys.argv[3:], "--json"])
print(json.dumps({"code": code, "seconds": time.perf_counter() - started,
                  "pyspark": "pyspark" in sys.modules, "answer": json.loads(out.getvalue())}))
"""


def build(run: Run, unread: int = 0) -> Path:
    """The lake, its batches and the spec's file; the JVM stopped at the end. `unread`: tiny
    changes made after the last batch, which no batch reads (bench.plan_cost plans them)."""
    from bench.tables import spec_text

    run.clear_work()
    lake = run.lake("fixed_cost")
    run.views(lake.spec, "first")
    for batch in range(TINY_BATCHES):
        run.tiny_change(lake, batch)
        run.views(lake.spec, f"tiny-{batch}")
    wrong = run.gate(lake.spec)
    for batch in range(TINY_BATCHES, TINY_BATCHES + unread):
        run.tiny_change(lake, batch)
    run.stop_spark()
    if wrong:
        raise SystemExit(f"the views {wrong} differ from a recompute: nothing to explain")
    file = run.work / "explain_cost.yaml"
    file.write_text(spec_text("fixed_cost", run.work / "lakejoin", lake.paths))
    return file


def keys(file: Path) -> dict[str, dict[str, list[str]]]:
    """Per view, the three keys asked (as the command line's texts), found with delta-rs."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    from lakejoin.spec.definition import output_key
    from lakejoin.spec.parse import load_spec

    spec = load_spec(file)
    chosen = {}
    for name, view in spec.views.items():
        key = list(output_key(spec, view))
        table = DeltaTable(view.path)
        last = int(table.version())
        feed = pa.table(table.load_cdf(last, last).read_all()).select(key).to_pylist()
        if not feed:
            raise SystemExit(f"view '{name}': its last commit changed no row")
        sql = f"SELECT {', '.join(key)} FROM t LIMIT 1"
        first = pa.table(QueryBuilder().register("t", table).execute(sql).read_all()).to_pylist()[0]
        missing = {"email": "nobody@example.invalid"} if key == ["email"] else {c: 10**12 for c in key}
        chosen[name] = {
            "changed_last": [str(feed[0][c]) for c in key],
            "untouched": [str(first[c]) for c in key],
            "missing": [str(missing[c]) for c in key],
        }
    return chosen


def ask(file: Path, view: str, texts: list[str]) -> dict[str, Any]:
    """One `lakejoin explain --json` in a process of its own: wall seconds, and what it said."""
    from bench.harness import timed_probe

    wall, said = timed_probe(PROBE, str(file), view, *texts)
    answer = said["answer"]
    return {
        "wall_seconds": round(wall, 3),
        "in_process_seconds": round(said["seconds"], 3),
        "pyspark_imported": said["pyspark"],
        "found": answer.get("row") is not None,
        "batch": (answer.get("read_at") or {}).get("batch_id"),
    }


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.explain_cost [--orders N] [--reuse] ...`; exit 1 when the target is missed."""
    from bench.harness import Session, run

    return run(
        argv,
        program="python -m bench.explain_cost",
        doc=__doc__ or "",
        session=Session("lakejoin-explain-cost"),
        work="build/explain-cost-lake",
        orders=15_000_000,
        measure=measure,
        options=lambda parser: parser.add_argument(
            "--reuse", action="store_true", help="keep the lake an earlier run built"
        ),
        clear=False,  # build() clears it, unless --reuse finds the lake
    )


def measure(run: Run) -> int:
    """Build the lake (Spark stopped after), then time `lakejoin explain` processes per key."""
    from bench.measure import lakejoin_commit

    run.args.work = str(run.work.resolve())
    file = run.work / "explain_cost.yaml"
    if not (run.args.reuse and file.exists()):
        started = time.perf_counter()
        file = build(run)
        print(f"lake built in {time.perf_counter() - started:.0f} s", flush=True)

    results = []
    for view, cases in keys(file).items():
        for case, texts in cases.items():
            runs = [ask(file, view, texts) for _ in range(RUNS)]
            walls = [r["wall_seconds"] for r in runs]
            result = {
                "view": view,
                "case": case,
                "key": texts,
                "median_wall_seconds": statistics.median(walls),
                "runs": runs,
            }
            results.append(result)
            print(f"{view} {case} {texts}: median {result['median_wall_seconds']} s {walls}", flush=True)

    record = {
        "orders": run.args.orders,
        "commit": lakejoin_commit(),
        "command": run.command,
        "runs_per_key": RUNS,
        "results": results,
        "pyspark_imported": any(r["pyspark_imported"] for res in results for r in res["runs"]),
    }
    (run.out / "explain_cost.json").write_text(json.dumps(record, indent=2) + "\n")
    [entry] = targets(record)
    run.replace_targets(OWNER, [entry])
    worst = max(results, key=lambda r: r["median_wall_seconds"])
    print(
        f"slowest median {entry['measured']} s ({worst['view']} {worst['case']}); "
        f"pyspark imported: {record['pyspark_imported']}"
    )
    return 0 if entry["met"] else 1


def targets(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's targets.json entry: the slowest key's median, met only when no `lakejoin
    explain` imported pyspark (pure: `python -m bench judge` re-derives it)."""
    results = record["results"]
    worst = max(results, key=lambda r: r["median_wall_seconds"])
    measured = worst["median_wall_seconds"]
    return [
        {
            "target": f"explain at {record['orders'] / 1e6:g} M orders, one key, no JVM (seconds: the "
            f"slowest median of {len(results)} keys, {worst['view']} {worst['case']}; a whole `lakejoin "
            "explain` process)",
            "measured": measured,
            "limit": LIMIT,
            "met": measured <= LIMIT and not record["pyspark_imported"],
            "batch": OWNER,
            "commit": record["commit"],
        }
    ]


if __name__ == "__main__":
    raise SystemExit(main())
