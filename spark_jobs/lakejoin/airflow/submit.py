"""The spark-submit application: one batch of one view, on the Spark that spark-submit started.

    spark-submit --jars .venv/spark-jars/ivy/jars/io.delta_delta-spark_4.1_2.13-4.4.0.jar,... \\
        --py-files lakejoin.zip \\
        spark_jobs/lakejoin/airflow/submit.py pipelines/marketplace.yaml display_products \\
        [--full-refresh | --repair-from=V|TIMESTAMP [--repair-to=V|TIMESTAMP]]

`--jars` lists Delta's jar files as `python -m lakejoin.delta.jars` resolved them once at install
(`lakejoin.delta.jars.jar_files()`): nothing is resolved when the batch starts, and no registry is
needed. Where they were never resolved, `--packages` with Delta's coordinate does the same, with
an Ivy resolution at every start.

Airflow's SparkSubmitOperator runs it for a spec with `spark: {run: submit}`
(`lakejoin.airflow.submit_operator`). It prints the batch summary, then one line `lakejoin-batch {...}`
with the figures the in-process task keeps as its XCom (JSON). A batch that fails (a failed
data-quality check, a source without CDF...) exits with status 2 and the error as the last
line, so the Airflow task fails with the reason in its log.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakejoin.delta.session import SUBMITTED, spark_session
from lakejoin.errors import LakejoinError
from lakejoin.spec.parse import load_spec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakejoin.spec.model import PipelineSpec

RESULT_PREFIX = "lakejoin-batch "


def parser() -> argparse.ArgumentParser:
    """The application's arguments: the spec, the view, and the batch's options, written the way
    `lakejoin.airflow.submit_operator.batch_arguments` writes a batch request."""
    parser = argparse.ArgumentParser(prog="lakejoin.airflow.submit", description=__doc__.splitlines()[0])
    parser.add_argument("spec", help="path to the pipeline spec (YAML), as the driver sees it")
    parser.add_argument("view", help="the view to run one batch of")
    parser.add_argument(
        "--full-refresh", action="store_true", help="recompute every key and MERGE the difference"
    )
    parser.add_argument(
        "--repair-from", metavar="V|TIMESTAMP", help="repair: re-derive the keys changes from here touched"
    )
    parser.add_argument("--repair-to", metavar="V|TIMESTAMP", help="end of the repair range (default: now)")
    return parser


def batch_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of `lakejoin.engine.batch.run_view` the arguments ask for."""
    from lakejoin.engine.repair import RepairRange

    repair = None
    if args.repair_from or args.repair_to:
        repair = RepairRange.parse(args.repair_from, args.repair_to)
    return {"full_refresh": args.full_refresh, "repair": repair}


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    os.environ[SUBMITTED] = "1"
    args = parser().parse_args(argv)

    spark = None
    failure: LakejoinError | None = None
    try:
        spec = load_spec(args.spec)
        if args.view not in spec.views:
            raise spec.error("views", f"unknown view '{args.view}'", f"use one of: {', '.join(spec.views)}")
        options = batch_options(args)
        spark = spark_session(spec.spark)
        _run(spark, spec, args.view, options)
    except LakejoinError as exc:
        failure = exc
    finally:
        if spark is not None:
            spark.stop()
    if failure is None:
        return 0
    # After Spark stopped, so that the reason is the last thing the task's log shows.
    print(f"error {type(failure).__name__}: {failure}", file=sys.stderr, flush=True)
    return 2


def _run(spark: SparkSession, spec: PipelineSpec, view: str, options: dict[str, Any]) -> None:
    from rich.console import Console

    from lakejoin.cli.main import summary_table
    from lakejoin.engine import batch

    context = spark.sparkContext
    print(
        f"{view}: Spark {spark.version} on {context.master}, application {context.applicationId}, "
        f"lakejoin from {Path(batch.__file__).parents[1]}",
        flush=True,
    )
    summary = batch.run_view(spark, spec, view, **options)
    console = Console(width=200, highlight=False)
    console.print(summary_table([summary]))
    for topic, note in summary.notes.items():
        console.print(f"{view}: {topic} {note}")
    if summary.report:
        console.print(f"{view}: data-quality report {summary.report}")
    print(RESULT_PREFIX + json.dumps(summary.figures(), sort_keys=True), flush=True)


if __name__ == "__main__":
    # spark-submit runs this file as a script, which puts the package's own folder first on
    # sys.path; its modules (`errors`, `session`...) must not shadow top-level ones.
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]
    sys.exit(main())
