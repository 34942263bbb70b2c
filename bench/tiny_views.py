"""`python -m bench.tiny_views`: 60 tiny views with a few changed rows each, in one `lakejoin run`.

Issue 37: the views run one at a time and several at once.

Four small source tables (merchants, products, persons, addresses) and 60 views that read them
and not each other: 20 fk_joins, 20 list_joins, 20 rekeys. After a first run that builds every
view, each round updates two rows of every source table and runs the whole pipeline once at a
width (`--widths`, views at once, engine/pipeline.py), timed end to end on a warm JVM. After each
round every output is compared with a from-scratch recompute (count and whole-table hash).

Figures go to `<out>/bench/tiny_views.json` and into `<out>/bench/targets.json` (the entries of
other scripts kept); the judged figure is the run at lakejoin's default width.

    python -m bench.tiny_views --out docs
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from bench.harness import Run
    from lakejoin.spec.model import PipelineSpec

VIEWS_PER_KIND = 20  # three kinds: 60 views
LIMIT_SECONDS = 30.0  # issue 52 (issue 37 asked for 60)
TARGET = "a run of 60 tiny views (each a few changed rows), one `lakejoin run`, s"
BATCH = "tiny_views"
CHANGED_ROWS = 2
SIZES = {"merchants": 50, "products": 500, "persons": 200, "addresses": 300}
KEYS = {
    "merchants": "merchant_id",
    "products": "product_id",
    "persons": "person_id",
    "addresses": "address_id",
}


def write_tables(spark: SparkSession, root: Path) -> dict[str, str]:
    """The four source tables (Delta, change feed on), small and fixed by their ids."""
    from pyspark.sql import functions as F

    m, a = SIZES["merchants"], SIZES["addresses"]
    ids = {name: spark.range(n) for name, n in SIZES.items()}
    frames = {
        "merchants": ids["merchants"].select(
            F.concat(F.lit("m"), F.col("id")).alias("merchant_id"),
            F.concat(F.lit("Merchant "), F.col("id")).alias("display_name"),
            F.element_at(
                F.array(*[F.lit(c) for c in ("NO", "SE", "DK", "FI")]), (F.col("id") % 4 + 1).cast("int")
            ).alias("country"),
        ),
        "products": ids["products"].select(
            F.concat(F.lit("p"), F.col("id")).alias("product_id"),
            F.concat(F.lit("product "), F.col("id")).alias("name"),
            (F.col("id") % 97).cast("double").alias("price"),
            F.concat(F.lit("m"), F.col("id") % m).alias("merchant_id"),
        ),
        "persons": ids["persons"].select(
            F.concat(F.lit("P"), F.col("id")).alias("person_id"),
            F.concat(F.lit("person "), F.col("id")).alias("name"),
            F.array(*[F.concat(F.lit("a"), (F.col("id") * 3 + i) % a) for i in range(3)]).alias(
                "address_ids"
            ),
        ),
        "addresses": ids["addresses"].select(
            F.concat(F.lit("a"), F.col("id")).alias("address_id"),
            F.concat(F.col("id"), F.lit(" Main St")).alias("street"),
            F.lit("Oslo").alias("city"),
        ),
    }
    paths = {}
    for name, frame in frames.items():
        paths[name] = str(root / name)
        frame.coalesce(1).write.format("delta").mode("overwrite").save(paths[name])
    return paths


def spec_text(root: Path, paths: dict[str, str]) -> str:
    """The pipeline: VIEWS_PER_KIND views of each kind, none reading another."""
    lines = ["pipeline: tiny_views", f"storage: {root / 'lakejoin'}", "sources:"]
    lines += [f"  {name}: {{path: {path}, key: {KEYS[name]}}}" for name, path in paths.items()]
    lines.append("views:")
    for i in range(VIEWS_PER_KIND):
        right = "[display_name]" if i % 2 else "[display_name, country]"
        lines.append(f"  fk_{i:02d}:")
        lines.append(
            f"    fk_join: {{left: products, right: merchants, fk: merchant_id, right_columns: {right}}}"
        )
        lines.append(f"  list_{i:02d}:")
        lines.append(
            "    list_join: {left: persons, list: address_ids, right: addresses, into: addresses, "
            "fanout_threshold: 1.0}"
        )
        lines.append(f"  rekey_{i:02d}:")
        lines.append(
            "    rekey: {source: merchants, key: display_name, columns: [country], on_conflict: latest}"
        )
    return "\n".join(lines) + "\n"


def tiny_change(spark: SparkSession, paths: dict[str, str], round_: int) -> None:
    """Update CHANGED_ROWS rows of every source table (a Delta UPDATE each)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    changed = {"merchants": "display_name", "products": "name", "persons": "name", "addresses": "street"}
    for name, column in changed.items():
        key = KEYS[name]
        prefix = {"merchants": "m", "products": "p", "persons": "P", "addresses": "a"}[name]
        picked = [f"{prefix}{(round_ * 7 + i) % SIZES[name]}" for i in range(CHANGED_ROWS)]
        DeltaTable.forPath(spark, paths[name]).update(
            F.col(key).isin(picked), {column: F.concat(F.col(column), F.lit(f" r{round_}"))}
        )


def run_once(spark: SparkSession, spec: PipelineSpec, width: int) -> dict[str, Any]:
    """One run of every view at `width`: wall seconds, and how each view ended."""
    from lakejoin.engine.pipeline import run_pipeline

    started = time.perf_counter()
    results = run_pipeline(spark, spec, spec.view_order(), parallel=width, checks=True)
    seconds = time.perf_counter() - started
    states: dict[str, int] = {}
    for result in results:
        states[result.state.value] = states.get(result.state.value, 0) + 1
    failed = {r.view: r.error for r in results if r.state.value == "failed"}
    # Where the views' time went: each phase summed over the views (with several at once, the
    # sum exceeds the wall time).
    phases: dict[str, float] = {}
    for result in results:
        for phase, spent in (result.summary.phase_seconds if result.summary else {}).items():
            phases[phase] = round(phases.get(phase, 0.0) + spent, 2)
    return {
        "width": width,
        "seconds": round(seconds, 2),
        "states": states,
        "failed": failed,
        "phases": phases,
    }


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.tiny_views [--widths 1,2,3] [--out docs] ...`; exit 1 when a view failed or
    a gate did."""
    from bench.harness import Session, run

    return run(
        argv,
        program="python -m bench.tiny_views",
        doc=__doc__ or "",
        session=Session("lakejoin-tiny-views", extra={"spark.driver.memory": "4g"}),
        work="build/tiny-views-lake",
        measure=measure,
        options=lambda parser: parser.add_argument(
            "--widths", default="1,2,3", help="views at once, one round each"
        ),
        seed=False,
    )


def measure(run: Run) -> int:
    """A first run of the 60 views, a warm-up round, then a round per width, each gated; the
    record and its targets.json entry."""
    from bench.measure import lakejoin_commit
    from lakejoin.engine.pipeline import DEFAULT_PARALLEL
    from lakejoin.spec.parse import parse_spec

    work = run.work.resolve()
    work.mkdir(parents=True)
    spark = run.spark
    paths = write_tables(spark, work)
    spec_file = work / "tiny_views.yaml"
    spec_file.write_text(spec_text(work, paths), encoding="utf-8")
    spec = parse_spec(spec_file.read_text(encoding="utf-8"), str(spec_file))

    record: dict[str, Any] = {
        "commit": lakejoin_commit(),
        "views": len(spec.views),
        "default": DEFAULT_PARALLEL,
    }
    record["first"] = run_once(spark, spec, DEFAULT_PARALLEL)
    print(f"first run (full builds): {record['first']}", flush=True)
    rounds = []
    widths = [int(w) for w in run.args.widths.split(",")]
    # A warm-up round first, not judged: the JVM's first incremental batches compile code paths.
    for number, width in enumerate([widths[0], *widths], start=1):
        tiny_change(spark, paths, number)
        figures = run_once(spark, spec, width) | {"warm_up": number == 1, "gate": run.gate(spec)}
        print(f"round {number}: {figures}", flush=True)
        rounds.append(figures)
    run.stop_spark()
    record["rounds"] = rounds

    (run.out / "tiny_views.json").write_text(json.dumps(record, indent=2) + "\n")
    found = targets(record)
    if found:
        run.replace_targets(BATCH, found)
    wrong = any(r["gate"] or r["failed"] for r in rounds)
    return 1 if wrong else 0


def targets(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's targets.json entry: the last judged round (the default width, not the warm-up);
    none without one. Pure: `python -m bench judge` re-derives it."""
    judged = [r for r in record["rounds"] if not r["warm_up"] and r["width"] == record["default"]]
    if not judged:
        return []
    seconds = judged[-1]["seconds"]
    return [
        {
            "target": TARGET,
            "measured": seconds,
            "limit": LIMIT_SECONDS,
            "met": seconds <= LIMIT_SECONDS,
            "batch": BATCH,
            "commit": record["commit"],
        }
    ]


if __name__ == "__main__":
    sys.exit(main())
