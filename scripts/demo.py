"""`make demo`: a small marketplace in ./lakehouse, maintained by the Airflow DAG batch by batch.

1. create products, merchants, persons, addresses, purchases and favourites as Delta tables
   (CDF on);
2. run the pipeline's DAG with `airflow dags test` (the first batch loads every key);
3. commit a few realistic change batches, running the DAG again after each;
4. print the output tables and where the batch log and reports are.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
LAKEHOUSE = ROOT / "lakehouse"
SPEC = ROOT / "pipelines" / "marketplace.yaml"
DAG_ID = "lakejoin_marketplace"
BIN = Path(sys.executable).parent
console = Console()


def step(message: str) -> None:
    console.rule(f"[bold cyan]{message}")


def airflow(*args: str) -> None:
    started = time.monotonic()
    result = subprocess.run([str(BIN / "airflow"), *args], cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        console.print(result.stdout[-4000:], result.stderr[-4000:], markup=False)
        raise SystemExit(f"airflow {' '.join(args)} failed (exit {result.returncode}); its log is above")
    console.print(f"[green]ok[/] airflow {' '.join(args)} ({time.monotonic() - started:.0f} s)")


def cell(value: object) -> str:
    """A table cell: lists of joined rows as `a1 Keizersgracht 1 Amsterdam; ...`."""
    if value is None:
        return "∅"
    if isinstance(value, list):
        return "; ".join(cell(item) for item in value) or "[]"
    if hasattr(value, "asDict"):
        return " ".join(cell(v) for v in value.asDict().values())
    return str(value)


def show(spark, spec, view: str) -> None:  # noqa: ANN001
    frame = spark.read.format("delta").load(spec.views[view].path)
    rows = frame.orderBy(frame.columns[0]).collect()
    table = Table(title=f"{view} ({len(rows)} rows) at {spec.views[view].path}")
    for column in frame.columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*[cell(v) for v in row])
    console.print(table)


def decisions(spark, spec) -> None:  # noqa: ANN001
    """What the batches noted: fan-out choices, conflicts, shuffled dimensions."""
    from lakejoin.engine.log import BatchLog
    from lakejoin.engine.records import BatchStatus

    log = BatchLog.of(spec)
    for view in spec.view_order():
        for record in log.history(view):
            if record.status is not BatchStatus.COMMITTED:
                continue
            for topic, note in record.notes.items():
                console.print(f"[yellow]{view} batch {record.batch_id}[/]: {topic}: {note}", highlight=False)


def main() -> None:
    os.environ.setdefault("AIRFLOW_HOME", str(ROOT / ".airflow"))
    os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(ROOT / "dags"))
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ["GX_ANALYTICS_ENABLED"] = "False"
    from lakejoin.cli import main as lakejoin_cli
    from lakejoin.demo import CHANGE_BATCHES, create_marketplace
    from lakejoin.session import spark_session
    from lakejoin.spec import load_spec

    started = time.monotonic()
    step(f"1. creating a small marketplace in {LAKEHOUSE}")
    shutil.rmtree(LAKEHOUSE, ignore_errors=True)
    spec = load_spec(SPEC)
    spark = spark_session(spec.spark)
    create_marketplace(spark, str(LAKEHOUSE))
    console.print(
        "5 merchants, 20 products (one without a merchant), 5 persons with lists of addresses, "
        "5 addresses, 10 purchases, 4 lists of favourite products"
    )

    step("2. preparing Airflow's metadata DB and running the DAG (first batch: every key)")
    airflow("db", "migrate")
    airflow("dags", "test", DAG_ID)
    for number, batch in enumerate(CHANGE_BATCHES, start=3):
        step(f"{number}. change batch: {batch.title}; then the DAG again")
        batch.apply(spark, str(LAKEHOUSE))
        airflow("dags", "test", DAG_ID)

    step("the views now")
    for view in spec.view_order():
        show(spark, spec, view)
    step("what the batches decided (from the batch log)")
    decisions(spark, spec)
    lakejoin_cli(["status", str(SPEC)])
    console.print(f"batch log: {spec.state_path}/batch_log (a Delta table; delta-rs or Spark read it)")
    lakejoin_cli(["report", str(SPEC)])  # the pages as of the last commit; the Airflow plugin serves them
    console.print(f"[bold green]demo finished in {time.monotonic() - started:.0f} s[/]")


if __name__ == "__main__":
    main()
