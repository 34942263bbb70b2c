"""`python -m bench.audit_cost`: what the continuous audit adds to a batch (issue 40).

The benchmark's `orders_customers` fk_join (orders left-joined with customers) on its tables
(15 M orders by default), a first batch, then batches of the `facts` scenario at 1 % (orders and
products updated, inserted, deleted), under the default audit (one of 64 slices, in the
batches the budget of 0.1 allows: the first incremental batch, then whenever the batches since
the last audit took ten times its time). A batch's audit phase is timed by the batch itself
(`phase_seconds["audit"]`, after the output commit). Two figures:
- an audit batch's audit seconds over the rest of that batch (what one slice costs);
- the audit's seconds over the rest of every batch's (what the view pays, with the budget).

The same batches count what join health adds (issue 40): every Spark job started inside its own
steps (`engine.health.prior`, the affected keys among the view's flagged keys, and
`count_batch`, each run in a job group of its own); the flags are counted in the job that
materialises the rows, the null fks in the job that materialises the changes, and the flagged
keys are written by delta-rs (no job). `--orphans` customers (1,000 by default) are deleted
before the first batch, so the view has flagged keys to look among (about ten orders each);
each batch's `health.*` metrics are kept beside it.

Figures go to `<out>/bench/audit_cost.json` (or `--name`'s) and three entries of
`<out>/bench/targets.json` ("audit slice cost as a share of the batch", limit 0.1 each; "join
health: added Spark jobs per batch", limit 1), but with `--every`: a fixed schedule compares
audits (a whole small output on the driver against a slice of it, `--whole-max-rows 0`), it
is not the default the targets are of.

    python -m bench.audit_cost --orders 15000000 --out docs
    python -m bench.audit_cost --orders 1000 --every 1 --name audit_cost_tiny --out docs
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.harness import Run

VIEW = "orders_customers"
ROUNDS = 12
HEALTH_GROUP = "lakejoin-join-health"
ORPHANS = 1000
RATE = 0.01


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.audit_cost [--orders N] [--every N] [--name X] ...`; exit 0."""
    from bench.harness import Session, run

    return run(
        argv,
        program="python -m bench.audit_cost",
        doc=__doc__ or "",
        session=Session("lakejoin-audit-cost", driver_memory="8g", settings=_settings),
        work="build/audit-cost-lake",
        orders=15_000_000,
        measure=measure,
        options=_options,
    )


def _options(parser: argparse.ArgumentParser) -> None:
    """audit_cost's own options, after the harness's common ones."""
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="batches after the first")
    parser.add_argument(
        "--orphans",
        type=int,
        default=ORPHANS,
        help="customers deleted before the first batch: their orders are the view's flagged keys",
    )
    parser.add_argument(
        "--deletion-vectors",
        action="store_true",
        help="the sources keep deletion vectors, so a CDC MERGE leaves their files laid out by key "
        "(figures go to audit_cost_dv.json and entries of their own)",
    )
    parser.add_argument(
        "--whole-max-rows",
        type=int,
        default=None,
        help="spark.lakejoin.audit.wholeMaxRows: up to how many output rows the audit checks every key "
        "on the driver (0: slices in Spark, as before issue 52's session 63)",
    )
    parser.add_argument(
        "--every", type=int, default=None, help="audit every N-th batch (default: the budget decides)"
    )
    parser.add_argument("--name", default=None, help="the figures' file and entries (default audit_cost)")


def _settings(args: argparse.Namespace) -> dict[str, str]:
    """The Spark setting --whole-max-rows asks for (fixed when Spark starts)."""
    from lakejoin.engine.audit import WHOLE_MAX_ROWS

    return {} if args.whole_max_rows is None else {WHOLE_MAX_ROWS: str(args.whole_max_rows)}


def measure(run: Run) -> int:
    """A first batch, then `--rounds` facts batches at 1 %, the audit and join health timed and
    counted; the record (named by --name) and, with the default audit, its three entries."""
    from bench.changes import Scenario
    from bench.measure import lakejoin_commit
    from bench.variants import spec_for
    from lakejoin.engine.batch import batch_log

    args, work = run.args, run.work
    name = args.name or ("audit_cost_dv" if args.deletion_vectors else "audit_cost")
    spark = run.spark
    sizes, paths = run.sources()
    spec = spec_for("audit_cost", work / "lakejoin", paths)
    assert spec.views[VIEW].audit.enabled, "the benchmark measures the default audit"
    if args.every is not None:  # the view's audit on a fixed schedule, from its first batch
        from dataclasses import replace

        view = spec.views[VIEW]
        audited = replace(view, audit=replace(view.audit, every=args.every))
        spec = replace(spec, views={**spec.views, VIEW: audited})
    if args.deletion_vectors:
        for table in ("orders", "customers"):
            dvs = "'delta.enableDeletionVectors' = 'true'"
            spark.sql(f"ALTER TABLE delta.`{paths[table]}` SET TBLPROPERTIES ({dvs})")
    maker = run.maker(sizes, paths)
    # Orders whose customer is gone: join health's flagged keys, among which each batch looks.
    spark.sql(f"DELETE FROM delta.`{paths['customers']}` WHERE customer_id < {args.orphans}")
    run.views(spec, "first", order=[VIEW])

    import lakejoin.engine.batch as batch_module

    context = spark.sparkContext

    def grouped(step: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            """A step of join health inside a job group of its own, then the view's group back."""
            group = context.getLocalProperty("spark.jobGroup.id")
            context.setJobGroup(HEALTH_GROUP, HEALTH_GROUP)
            try:
                return step(*args, **kwargs)
            finally:
                context.setJobGroup(group or "", group or "")

        return counted

    # What join health runs of its own: the affected keys among the flagged keys, and the count.
    batch_module.prior = grouped(batch_module.prior)  # type: ignore[assignment]
    batch_module.count_batch = grouped(batch_module.count_batch)  # type: ignore[assignment]
    tracker = context.statusTracker()

    batches = []
    for number in range(1, args.rounds + 1):
        changed = maker.apply(Scenario.FACTS, RATE, number)
        health_before = len(tracker.getJobIdsForGroup(HEALTH_GROUP))
        figures = run.views(spec, f"facts-{number}", order=[VIEW])[VIEW]
        audit = figures["phases"].get("audit", 0.0)
        health_jobs = len(tracker.getJobIdsForGroup(HEALTH_GROUP)) - health_before
        logged = batch_log(spec).last_committed(VIEW)
        health = {k: v for k, v in (logged.metrics if logged else {}).items() if k.startswith("health.")}
        batches.append(
            {
                **figures,
                "changed": changed,
                "audit_seconds": audit,
                "health_jobs": health_jobs,
                "health": health,
                "audit_note": (logged.notes.get("audit") if logged else None) if audit else None,
            }
        )
        print(f"batch {number}: audit {audit:.2f} s of {figures['seconds']:.2f} s", flush=True)
    run.stop_spark()

    audited = [b for b in batches if b["audit_seconds"]]
    per_audit = statistics.median(
        round(b["audit_seconds"] / (b["seconds"] - b["audit_seconds"]), 3) for b in audited
    )
    spent = sum(b["audit_seconds"] for b in batches)
    paid = round(spent / (sum(b["seconds"] for b in batches) - spent), 3)
    record: dict[str, Any] = {
        "orders": args.orders,
        "rate": RATE,
        "view": VIEW,
        "commit": lakejoin_commit(),
        "command": run.command,
        "batches": batches,
        "audit_batches": len(audited),
        "per_audit_share": per_audit,
        "paid_share": paid,
        "health_jobs": max(b["health_jobs"] for b in batches),
        "source_deletion_vectors": args.deletion_vectors,
        "audit_scopes": sorted({b["audit_note"] for b in audited if b["audit_note"]}),
    }
    flagged = max(b["health"].get("health.missing_right", 0) for b in batches)
    (run.out / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n")
    scale = f"{args.orders / 1e6:g} M orders, facts at {RATE:.0%}, {VIEW}"
    if args.deletion_vectors:
        scale += ", sources with deletion vectors"
    if args.whole_max_rows is not None:
        scale += f", audit.wholeMaxRows {args.whole_max_rows}"
    if args.every is not None:
        scale += f", audit every {args.every}"
    entries = [
        {
            "target": f"audit slice cost as a share of the batch ({scale}: an audit batch's audit seconds "
            f"over the rest of it, median of {len(audited)})",
            "measured": per_audit,
            "limit": 0.1,
            "met": per_audit <= 0.1,
        },
        {
            "target": f"audit cost as a share of the view's batch time, default budget ({scale}: audit "
            f"seconds over the rest of {args.rounds} batches, {len(audited)} of them audited)",
            "measured": paid,
            "limit": 0.1,
            "met": paid <= 0.1,
        },
        {
            "target": f"join health: added Spark jobs per batch ({scale}: jobs started inside its own "
            f"steps, most of {args.rounds} batches; {flagged:,} flagged keys to look among)",
            "measured": record["health_jobs"],
            "limit": 1,
            "met": record["health_jobs"] <= 1,
        },
    ]
    for entry in entries:
        entry.update(batch=name, commit=record["commit"])
    if args.every is None:  # the targets are of the default audit; a fixed schedule only compares
        run.replace_targets(name, entries)
    print(f"one audit: {per_audit} of its batch; over {args.rounds} batches: {paid} ({len(audited)} audits)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
