"""`python -m bench.fixed_cost`: what a batch costs when (almost) nothing changed (issue 23).

On the benchmark's tables (1.5 M orders by default), after a first full batch of every view:
- every view with nothing new: seconds and Spark jobs (the plan alone, delta-rs);
- a tiny change (a few rows of every source table), twice, on a warm JVM: per changed view,
  seconds, Spark jobs (every job the batch started, counted by Spark's status tracker through a
  job group per view) and Delta commits into the view's output and state tables.
The second tiny batch is the one judged. After every batch each output is compared with a
from-scratch recompute (count and whole-table hash).

Figures go to `<out>/bench/fixed_cost.json` (one record per orders count: a run replaces the
record of its own size and keeps the others) and into `<out>/bench/targets.json` (one entry per
target, the entries of other scripts kept). The micro-batch targets of issue 37 need two sizes,
measured on the same day:

    python -m bench.fixed_cost --orders 1500000 --out docs
    python -m bench.fixed_cost --orders 15000000 --out docs
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.harness import TINY_ROWS

if TYPE_CHECKING:
    from bench.harness import Run

LIMITS = {"tiny_seconds": 4.0, "nothing_new_seconds": 0.2, "nothing_new_jobs": 0, "jobs": 50, "commits": 2}
# Issue 37: a micro-batch (the tiny batch: at most 30 keys) into an order view of the largest
# table, and how much slower it is there than at the smallest size (the cost should follow the
# change, not the table).
MICRO = {"seconds": 3.0, "growth": 1.3}
# Issue 52: a micro-batch in about a second, per kind, fixed costs included.
MICRO_BATCH = {1_500_000: 1.0, 15_000_000: 2.0}
MICRO_BATCH_JOBS, MICRO_BATCH_CHECK = 8, 0.1
ORDER_VIEWS = ("orders_customers", "orders_enriched", "skewed_orders_customers")
JUDGED_SIZE = 1_500_000  # the size the size-less targets (jobs, commits, nothing new) are judged at
OWNER = "fixed_cost"  # its targets.json entries' `batch` starts with it (bench/targets.py `owns`)
MICRO_SIZE = 15_000_000  # the micro-batch targets are judged at this size (or larger) only


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.fixed_cost [--orders N] [--out docs] ...`; exit 1 when a gate failed."""
    from bench.harness import Session, run

    return run(
        argv,
        program="python -m bench.fixed_cost",
        doc=__doc__ or "",
        session=Session("lakejoin-fixed-cost", driver_memory="8g"),
        work="build/fixed-cost-lake",
        orders=1_500_000,
        measure=measure,
    )


def measure(run: Run) -> int:
    """A first batch, a batch with nothing new, two tiny batches each gated; then the record
    joins the others on file (by size), and targets.json and fixed_cost.md are re-written."""
    from bench.measure import lakejoin_commit

    lake = run.lake("fixed_cost")
    record: dict[str, Any] = {"orders": run.args.orders, "commit": lakejoin_commit()}
    record["first"] = run.views(lake.spec, "first")
    record["nothing_new"] = run.views(lake.spec, "nothing-new")
    for batch in (1, 2):
        run.tiny_change(lake, batch)
        record[f"tiny_{batch}"] = run.views(lake.spec, f"tiny-{batch}")
        record[f"gate_{batch}"] = run.gate(lake.spec)
        print(f"gate after tiny batch {batch}: {record[f'gate_{batch}'] or 'every view exact'}", flush=True)
    run.stop_spark()

    record["command"] = run.command
    runs = load_runs(run.out / "fixed_cost.json")
    runs[str(run.args.orders)] = record
    (run.out / "fixed_cost.json").write_text(json.dumps(runs, indent=2) + "\n")
    run.replace_targets(OWNER, targets(runs))
    (run.out / "fixed_cost.md").write_text(report(runs))
    return 1 if record["gate_1"] or record["gate_2"] else 0


def load_runs(path: Path) -> dict[str, dict[str, Any]]:
    """The records on file, by orders count (a file of one bare record is read as that one run)."""
    if not path.exists():
        return {}
    held = json.loads(path.read_text())
    return {str(held["orders"]): held} if "orders" in held else dict(held)


def report(runs: dict[str, dict[str, Any]]) -> str:
    """Every size on file as Markdown, smallest first: a table per round."""
    lines = [
        "# The fixed cost of a batch (protocol version 2)",
        "",
        "Seconds are wall time of `run_view` on this 2-core machine; jobs are every Spark job the "
        "batch started (Spark's status tracker, one job group per view); commits are new versions of "
        "the view's output and state tables. Never assertions in a test.",
        "",
    ]
    for size in sorted(runs, key=int):
        lines += run_report(runs[size])
    return "\n".join(lines)


def run_report(record: dict[str, Any]) -> list[str]:
    """One run: a table per round, then its correctness gate."""
    command = record.get("command", f"--orders {record['orders']}")
    lines = [
        f"## {record['orders']:,} orders",
        "",
        f"Written by `python -m bench.fixed_cost {command}` at lakejoin {record['commit']}.",
        "",
    ]
    rounds = {"first": "first batch (full)", "nothing_new": "nothing new", "tiny_1": "tiny batch, cold"}
    rounds["tiny_2"] = "tiny batch, warm (judged)"
    for name, title in rounds.items():
        lines += [f"### {title}", "", "| view | outcome | s | jobs | commits | affected keys | phases (s) |"]
        lines.append("|---|---|---|---|---|---|---|")
        for view, v in record[name].items():
            phases = ", ".join(f"{k} {s:.2f}" for k, s in v["phases"].items())
            lines.append(
                f"| {view} | {v['outcome']} | {v['seconds']:.2f} | {v['jobs']} | {v['commits']} "
                f"| {v['affected_keys']} | {phases} |"
            )
        lines.append("")
    gates = [record["gate_1"], record["gate_2"]]
    verdict = "every view exact" if not any(gates) else f"views off: {gates}"
    lines += [
        f"Correctness gate after each tiny batch (count and whole-table hash against a recompute): {verdict}",
        "",
    ]
    return lines


def _slowest(record: dict[str, Any], views: tuple[str, ...] | None = None) -> float:
    """The judged (warm) tiny batch's slowest committed view, among `views` if given."""
    tiny = record["tiny_2"]
    return max(
        v["seconds"] for n, v in tiny.items() if v["outcome"] == "committed" and (not views or n in views)
    )


def _size(orders: int | str) -> str:
    return f"{int(orders) / 1e6:g} M orders"


def targets(runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every targets.json entry of the records on file (pure: `python -m bench judge` re-derives them)."""
    entries = []
    for orders, record in sorted(runs.items(), key=lambda kv: int(kv[0])):
        entries.append(
            {
                "target": f"tiny batch ({TINY_ROWS} rows a source) per view, warm JVM, {_size(orders)}: "
                "slowest view, s",
                "measured": _slowest(record),
                "limit": LIMITS["tiny_seconds"],
                "batch": f"fixed_cost tiny_2, {_size(orders)}",
                "commit": record["commit"],
            }
        )
    judged = runs.get(str(JUDGED_SIZE)) or runs[min(runs, key=int)]
    tiny, idle = judged["tiny_2"], judged["nothing_new"]
    changed = [v for v in tiny.values() if v["outcome"] == "committed"]
    for target, measured, limit in (
        (
            "a view with nothing new: slowest view, s",
            max(v["seconds"] for v in idle.values()),
            "nothing_new_seconds",
        ),
        ("a view with nothing new: Spark jobs", max(v["jobs"] for v in idle.values()), "nothing_new_jobs"),
        (
            "Spark jobs per changed view per batch (tiny batch, most of any view)",
            max(v["jobs"] for v in changed),
            "jobs",
        ),
        (
            "Delta commits per changed view per batch (output and state tables, most of any view)",
            max(v["commits"] for v in changed),
            "commits",
        ),
    ):
        entries.append(
            {
                "target": target,
                "measured": measured,
                "limit": LIMITS[limit],
                "batch": f"fixed_cost tiny_2, {_size(judged['orders'])}",
                "commit": judged["commit"],
            }
        )
    entries += _micro_batch_entries(runs)
    largest, smallest = runs[max(runs, key=int)], runs[min(runs, key=int)]
    big, small = _size(largest["orders"]), _size(smallest["orders"])
    if int(largest["orders"]) >= MICRO_SIZE:
        entries.append(
            {
                "target": f"micro-batch (the tiny batch, <= 30 keys) per order view, warm JVM, {big}: "
                "slowest order view, s",
                "measured": _slowest(largest, ORDER_VIEWS),
                "limit": MICRO["seconds"],
                "batch": f"fixed_cost tiny_2, {big}",
                "commit": largest["commit"],
            }
        )
    if int(largest["orders"]) >= MICRO_SIZE and largest is not smallest:
        entries.append(
            {
                "target": f"micro-batch growth: slowest order view's micro-batch at {big} against {small}, x",
                "measured": round(_slowest(largest, ORDER_VIEWS) / _slowest(smallest, ORDER_VIEWS), 2),
                "limit": MICRO["growth"],
                "batch": f"fixed_cost tiny_2, {big} and {small}",
                "commit": ", ".join(sorted({largest["commit"], smallest["commit"]})),
            }
        )
    for entry in entries:
        entry["met"] = entry["measured"] <= entry["limit"]
    return entries


def _micro_batch_entries(runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Issue 52's entries: per kind, the slowest view's warm tiny batch at each size it names;
    the most Spark jobs of any view and the longest check phase at the judged size. A record
    written before views carried their kind takes the kinds of the judged size's record."""
    judged = runs.get(str(JUDGED_SIZE)) or runs[min(runs, key=int)]
    kinds = {n: v["kind"] for n, v in judged["tiny_2"].items() if "kind" in v}
    entries = []
    for orders, limit in MICRO_BATCH.items():
        record = runs.get(str(orders))
        if record is None:
            continue
        by_kind: dict[str, list[float]] = {}
        for name, v in record["tiny_2"].items():
            kind = v.get("kind", kinds.get(name))
            if v["outcome"] == "committed" and kind is not None:
                by_kind.setdefault(kind, []).append(v["seconds"])
        for kind, seconds in sorted(by_kind.items()):
            entries.append(
                {
                    "target": "micro-batch (a few changed rows, <= 30 keys), per view, warm, "
                    f"{_size(orders)}: slowest view, {kind}",
                    "measured": max(seconds),
                    "limit": limit,
                    "batch": f"fixed_cost tiny_2, {_size(orders)}",
                    "commit": record["commit"],
                }
            )
    changed = [v for v in judged["tiny_2"].values() if v["outcome"] == "committed"]
    for target, measured, limit in (
        ("Spark jobs per micro-batch, most of any view", max(v["jobs"] for v in changed), MICRO_BATCH_JOBS),
        (
            "check phase of a micro-batch, s (slowest view)",
            max(v["phases"].get("check", 0.0) for v in changed),
            MICRO_BATCH_CHECK,
        ),
    ):
        entries.append(
            {
                "target": target,
                "measured": measured,
                "limit": limit,
                "batch": f"fixed_cost tiny_2, {_size(judged['orders'])}",
                "commit": judged["commit"],
            }
        )
    return entries


if __name__ == "__main__":
    raise SystemExit(main())
