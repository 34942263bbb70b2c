"""`python -m bench.audit_cost`: what the continuous audit adds to a batch (issue 40).

The benchmark's `orders_customers` fk_join (orders left-joined with customers) on its tables
(15 M orders by default), a first batch, then batches of the `facts` scenario at 1 % (orders and
products updated, inserted, deleted), each audited (the default audit: one of 64 slices per
batch). A batch's audit phase is timed by the batch itself (`phase_seconds["audit"]`, after
the output commit); the share is the audit's seconds over the rest of the batch. Spark's status
tracker counts the jobs the audit started (its own job group).

Figures go to `<out>/bench/audit_cost.json` and an entry of `<out>/bench/targets.json`
("audit slice cost as a share of the batch", limit 0.1).

    python -m bench.audit_cost --orders 15000000 --out docs
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

VIEW = "orders_customers"
ROUNDS = 3
RATE = 0.01


def main(argv: list[str] | None = None) -> int:
    from bench.changes import ChangeMaker, Scenario
    from bench.fixed_cost import run_views
    from bench.measure import lakejoin_commit
    from bench.tables import Sizes, write_sources
    from bench.targets import replace_entries
    from bench.variants import spec_for
    from lakejoin.delta.session import spark_session

    parser = argparse.ArgumentParser(prog="python -m bench.audit_cost", description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=15_000_000)
    parser.add_argument("--out", default="docs")
    parser.add_argument("--work", default="build/audit-cost-lake")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--driver-memory", default="8g")
    args = parser.parse_args(argv)

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    spark = spark_session(app_name="lakejoin-audit-cost", extra={"spark.driver.memory": args.driver_memory})
    sizes = Sizes.at(args.orders)
    paths = write_sources(spark, work, sizes, args.seed)
    spec = spec_for("audit_cost", work / "lakejoin", paths)
    assert spec.views[VIEW].audit.enabled, "the benchmark measures the default audit"
    maker = ChangeMaker(spark, paths, sizes, args.seed)
    run_views(spark, spec, "first", order=[VIEW])

    batches = []
    for number in range(1, ROUNDS + 1):
        changed = maker.apply(Scenario.FACTS, RATE, number)
        figures = run_views(spark, spec, f"facts-{number}", order=[VIEW])[VIEW]
        audit = figures["phases"].get("audit", 0.0)
        rest = figures["seconds"] - audit
        share = round(audit / rest, 3)
        batches.append({**figures, "changed": changed, "audit_seconds": audit, "share": share})
        print(f"batch {number}: audit {audit:.2f} s of {figures['seconds']:.2f} s", flush=True)
    spark.stop()

    share = statistics.median(b["share"] for b in batches)
    record: dict[str, Any] = {
        "orders": args.orders,
        "rate": RATE,
        "view": VIEW,
        "commit": lakejoin_commit(),
        "command": " ".join(argv if argv is not None else sys.argv[1:]),
        "batches": batches,
        "median_share": share,
    }
    out = Path(args.out) / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "audit_cost.json").write_text(json.dumps(record, indent=2) + "\n")
    entry = {
        "target": f"audit slice cost as a share of the batch ({args.orders / 1e6:g} M orders, facts at "
        f"{RATE:.0%}, {VIEW}, median of {ROUNDS} batches: audit seconds over the rest of the batch)",
        "measured": share,
        "limit": 0.1,
        "met": share <= 0.1,
        "batch": "audit_cost",
        "commit": record["commit"],
    }
    replace_entries(out / "targets.json", "audit_cost", [entry])
    print(f"audit share of the batch: {share} (median of {[b['share'] for b in batches]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
