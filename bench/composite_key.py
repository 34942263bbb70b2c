"""`python -m bench.composite_key`: a view keyed by two columns against the same view keyed by one.

Issue 38.

Two copies of the benchmark's orders (1.5 M by default), one keyed by `order_id`, one by
`(region, order_id)` (`region` a string, `r0`..`r7`, fixed per order), each joined to the
customers by an fk_join of the same settings. Every change is made once and written to both
copies (the same rows, the same MERGE), so the two views see the same work. Rounds, each view
timed by `run_view` on one warm JVM, one after the other, the first view of a round
alternating (a tiny batch takes 4-7 s here, and the machine's noise between two runs of one
view is as large as the difference measured):
- a first batch (full);
- TINY_ROUNDS tiny batches (2 orders and 2 customers updated): the median of all but the first
  (cold) is judged;
- RATE_ROUNDS 1 % batches (1 % of the orders and of the customers updated, inserted or
  deleted): the median is judged.
After the tiny rounds and after every 1 % round each output is compared with a from-scratch
recompute (count and hash).

Figures go to `<out>/bench/composite_key.json`, a page `<out>/bench/composite_key.md` and two
entries of `<out>/bench/targets.json`: the composite view's seconds over the single-key view's,
for the tiny and the 1 % batch (limit 1.2).

    python -m bench.composite_key --orders 1500000 --out docs
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from bench.harness import Run

LIMIT = 1.2
REGIONS = 8
VIEWS = ("single", "composite")
TINY_ROWS = 2
TINY_ROUNDS = 6
RATE = 0.01
RATE_ROUNDS = 3


def spec_text(storage: Path, paths: dict[str, str]) -> str:
    return f"""\
pipeline: composite_key
storage: {storage}
sources:
  customers: {{path: {paths["customers"]}, key: customer_id}}
  orders: {{path: {paths["orders"]}, key: order_id}}
  orders_ck: {{path: {paths["orders_ck"]}, key: [region, order_id]}}
views:
  single:
    fk_join: {{left: orders, right: customers, fk: customer_id, how: left,
              right_columns: [name, nation_id], right_prefix: customer_}}
  composite:
    fk_join: {{left: orders_ck, right: customers, fk: customer_id, how: left,
              right_columns: [name, nation_id], right_prefix: customer_}}
"""


def with_region(frame: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    region = F.concat(F.lit("r"), (F.col("order_id") % REGIONS).cast("string"))
    return frame.select(region.alias("region"), *frame.columns)


def mirror(spark: SparkSession, path: str, change: DataFrame) -> None:
    """The change rows of `orders` (with their operation) merged into the copy keyed by
    (region, order_id), as `ChangeMaker.merge` merges them into `orders`."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from bench.changes import OP

    rows = with_region(change)
    columns = [c for c in rows.columns if c != OP]
    values: dict[str, Any] = {c: F.col(f"s.{c}") for c in columns}
    same = (F.col("t.region") == F.col("s.region")) & (F.col("t.order_id") == F.col("s.order_id"))
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(rows.alias("s"), same)
        .whenMatchedDelete(condition=F.col(f"s.{OP}") == "d")
        .whenMatchedUpdate(condition=F.col(f"s.{OP}") == "u", set=values)
        .whenNotMatchedInsert(condition=F.col(f"s.{OP}") == "i", values=values)
        .execute()
    )


def change(
    spark: SparkSession, maker: Any, paths: dict[str, str], orders: DataFrame, customers: DataFrame
) -> None:
    """One change of the orders (both copies) and of the customers."""
    orders = orders.localCheckpoint()
    maker.merge("orders", orders)
    mirror(spark, paths["orders_ck"], orders)
    maker.merge("customers", customers.localCheckpoint())


def run_round(spark: SparkSession, spec: Any, label: str, number: int = 0) -> dict[str, dict[str, Any]]:
    """Both views' batches, the single-key view first in an even round, second in an odd one."""
    from bench.harness import run_views

    order = VIEWS if number % 2 == 0 else VIEWS[::-1]
    figures = run_views(spark, spec, label, order=order)
    return {v: figures[v] for v in VIEWS}


def median_round(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per view, the round of median seconds (the lower middle of an even count), whole."""
    picked = {}
    for view in VIEWS:
        ranked = sorted(rounds, key=lambda r: r[view]["seconds"])
        picked[view] = {
            **ranked[(len(ranked) - 1) // 2][view],
            "all_seconds": [r[view]["seconds"] for r in rounds],
        }
    return picked


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.composite_key [--orders N] [--out docs] ...`; exit 1 when a gate failed."""
    from bench.harness import Session, run

    return run(
        argv,
        program="python -m bench.composite_key",
        doc=__doc__ or "",
        session=Session("lakejoin-composite-key", driver_memory="8g"),
        work="build/composite-key-lake",
        orders=1_500_000,
        measure=measure,
    )


def measure(run: Run) -> int:
    """A first batch, TINY_ROUNDS tiny and RATE_ROUNDS 1 % rounds of both views, gated; then the
    record, its targets.json entries and composite_key.md."""
    from bench.measure import lakejoin_commit
    from lakejoin.spec.parse import parse_spec

    spark, work = run.spark, run.work
    sizes, paths = run.sources()
    paths["orders_ck"] = str(work / "sources" / "orders_ck")
    with_region(spark.read.format("delta").load(paths["orders"])).write.format("delta").option(
        "delta.enableChangeDataFeed", "true"
    ).save(paths["orders_ck"])
    spec = parse_spec(spec_text(work / "lakejoin", paths), file="<bench composite_key>")
    maker = run.maker(sizes, paths)

    record: dict[str, Any] = {"orders": run.args.orders, "commit": lakejoin_commit(), "gates": {}}
    record["first"] = run_round(spark, spec, "first")
    tiny = []
    for batch in range(1, TINY_ROUNDS + 1):
        ids = {
            t: spark.range(n - (batch + 1) * TINY_ROWS, n - batch * TINY_ROWS)
            for t, n in (("orders", sizes.orders), ("customers", sizes.customers))
        }
        change(
            spark,
            maker,
            paths,
            maker.updates("orders", ids["orders"], 100 + batch),
            maker.updates("customers", ids["customers"], 100 + batch),
        )
        tiny.append(run_round(spark, spec, f"tiny-{batch}", batch))
    record["tiny_cold"] = tiny[0]
    record["tiny"] = median_round(tiny[1:])
    record["gates"]["tiny"] = run.gate(spec)
    spread = []
    for batch in range(1, RATE_ROUNDS + 1):
        change(
            spark,
            maker,
            paths,
            maker.spread("orders", RATE, 2 + batch),
            maker.spread("customers", RATE, 2 + batch),
        )
        spread.append(run_round(spark, spec, f"one-percent-{batch}", batch))
        record["gates"][f"one_percent_{batch}"] = run.gate(spec)
    record["one_percent"] = median_round(spread)
    run.stop_spark()
    wrong = {k: v for k, v in record["gates"].items() if v}
    print(f"gates: {wrong or 'every view exact after every round'}", flush=True)

    record["command"] = run.command
    (run.out / "composite_key.json").write_text(json.dumps(record, indent=2) + "\n")
    run.replace_targets("composite_key", targets(record))
    (run.out / "composite_key.md").write_text(page(record))
    return 1 if wrong else 0


ROUNDS = (
    ("first", "first batch (full)"),
    ("tiny_cold", "tiny batch, cold"),
    ("tiny", f"tiny batch, warm, median of {TINY_ROUNDS - 1}"),
    ("one_percent", f"1 % batch, median of {RATE_ROUNDS}"),
)
GATES = {
    "first": (),
    "tiny_cold": ("tiny",),
    "tiny": ("tiny",),
    "one_percent": tuple(f"one_percent_{n}" for n in range(1, RATE_ROUNDS + 1)),
}


def page(record: dict[str, Any]) -> str:
    """The run as a page: each round's seconds, jobs and slowest phase for both views."""
    lines = [
        "# A view keyed by two columns against one (issue 38)",
        "",
        f"Written by `python -m bench.composite_key {record['command']}` at lakejoin {record['commit']}, "
        f"{record['orders']:,} orders, on this 2-core machine. Wall seconds of `run_view`, one warm JVM; "
        "never assertions in a test.",
        "",
        "| round | one column: s (jobs) | two columns: s (jobs) | ratio | largest phase (two) | exact |",
        "|---|---|---|---|---|---|",
    ]
    rounds = []
    for name, title in ROUNDS:
        single, composite = record[name]["single"], record[name]["composite"]
        phases = composite.get("phases") or {}
        largest = max(phases.items(), key=lambda kv: kv[1], default=("-", 0.0))
        gates = [record["gates"][g] for g in GATES[name]]
        exact = "-" if not gates else "**no**" if any(gates) else "yes"
        lines.append(
            f"| {title} | {single['seconds']:.2f} ({single['jobs']}) | {composite['seconds']:.2f} "
            f"({composite['jobs']}) | {composite['seconds'] / single['seconds']:.2f} | "
            f"{largest[0]} {largest[1]:.2f} s | {exact} |"
        )
    for name in ("tiny", "one_percent"):
        seconds = {v: ", ".join(f"{x:.2f}" for x in record[name][v].get("all_seconds", [])) for v in VIEWS}
        rounds.append(f"- {name}: one column {seconds['single']}; two columns {seconds['composite']}")
    return "\n".join([*lines, "", "Every round's seconds (the median is judged):", *rounds]) + "\n"


def targets(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's targets.json entries (pure: `python -m bench judge` re-derives them)."""
    size = f"{record['orders'] / 1e6:g} M orders"
    entries = []
    for name, title in (("tiny", "tiny batch, warm, median"), ("one_percent", "1 % batch, median")):
        single, composite = record[name]["single"]["seconds"], record[name]["composite"]["seconds"]
        entries.append(
            {
                "target": f"composite key: a view keyed by two columns against one, {title}, {size}: "
                "seconds over seconds",
                "measured": round(composite / single, 2),
                "limit": LIMIT,
                "met": composite / single <= LIMIT,
                "batch": f"composite_key {name}",
                "commit": record["commit"],
            }
        )
    return entries


if __name__ == "__main__":
    raise SystemExit(main())
