"""`make demo`: a small marketplace in ./lakehouse, maintained by the Airflow DAG batch by batch.

1. create products, merchants, persons, addresses, purchases and favourites as Delta tables
   (CDF on);
2. run the pipeline's DAG (the first batch loads every key);
3. commit a few realistic change batches, running the DAG again after each;
4. show two of the views and where to look next.

One Spark for the whole demo: the DAG runs in this process (`dag.test()`, as `airflow dags
test` does), so its `batches` task uses the session that wrote the tables. Airflow's own log of
each run goes to a file; each step prints what the batches did, from the batch log.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
LAKEHOUSE = ROOT / "lakehouse"
SPEC = ROOT / "pipelines" / "marketplace.yaml"
DAG_ID = "lakejoin_marketplace"
BIN = Path(sys.executable).parent
SHOWN = ("display_products", "person_addresses", "order_line_products")  # the views shown at the end
console = Console(highlight=False)


def step(message: str) -> None:
    console.rule(f"[bold cyan]{message}")


@contextmanager
def output_to(log: Path):
    """Send this process's stdout and stderr (file descriptors: Airflow's and Spark's lines
    too) to `log` while the block runs."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "ab") as target:
        os.dup2(target.fileno(), 1)
        os.dup2(target.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def run_dag(dag, spec, number: int) -> None:  # noqa: ANN001 - an Airflow DAG, a PipelineSpec
    """One DAG run; then one line per view of what its batch did."""
    from lakejoin.delta.log import BatchLog

    log = BatchLog.of(spec)
    before = {v: (r.batch_id if (r := log.last(v)) else 0) for v in spec.view_order()}
    logfile = Path(os.environ["AIRFLOW_HOME"]) / "demo-logs" / f"run-{number}.log"
    started = time.monotonic()
    with output_to(logfile):
        run = dag.test()
    states = {ti.task_id: str(getattr(ti.state, "value", ti.state)) for ti in run.get_task_instances()}
    seconds = time.monotonic() - started
    state = str(getattr(run.state, "value", run.state))
    console.print(f"DAG run {state} in {seconds:.0f} s (Airflow's log: {logfile.relative_to(ROOT)})")
    histories = log.histories(spec.view_order())
    for view in spec.view_order():
        new = [r for r in histories.get(view, []) if r.batch_id > before[view]]
        if not new:
            console.print(f"  {view}: {states.get(view, '-')}, nothing new")
            continue
        record = new[-1]
        m = record.metrics
        changed = ", ".join(
            f"{k.split('.', 1)[1]} {n}" for k, n in m.items() if k.startswith("changed_keys.")
        )
        console.print(
            f"  {view}: batch {record.batch_id} {record.status.value} ({record.mode.value}"
            + (f", changed keys: {changed}" if changed else "")
            + f"): {m.get('affected_keys', 0)} keys recomputed, +{m.get('inserted', 0)} inserted, "
            f"~{m.get('updated', 0)} updated, -{m.get('deleted', 0)} deleted"
        )
        for topic, note in record.notes.items():
            console.print(f"    [yellow]{topic}[/]: {note}")
    if state != "success":
        failed = [t for t, s in states.items() if s == "failed"]
        raise SystemExit(f"the DAG run {state} (failed tasks: {failed}); see {logfile}")


def show_plan(spec) -> None:  # noqa: ANN001 - a PipelineSpec
    """What the next batch of each view will do, and why, before the run (`lakejoin plan`)."""
    from lakejoin.engine.next_batch import plan_views

    console.print("lakejoin plan, before the run (from the Delta logs alone):")
    for view, plan in plan_views(spec).items():
        fanout = f"; fan-out {plan.fanout.text()}" if plan.fanout is not None and plan.fanout.full else ""
        console.print(f"  {view}: [bold]{plan.action.value}[/], {plan.reason}{fanout}")


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
    table = Table(title=f"{view} ({len(rows)} rows)")
    for column in frame.columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*[cell(v) for v in row])
    console.print(table)


def main() -> None:
    os.environ.setdefault("AIRFLOW_HOME", str(ROOT / ".airflow"))
    os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(ROOT / "dags"))
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ["GX_ANALYTICS_ENABLED"] = "False"
    from lakejoin.delta.session import spark_session
    from lakejoin.demo.marketplace import CHANGE_BATCHES, create_marketplace
    from lakejoin.spec.parse import load_spec

    started = time.monotonic()
    step(f"1. a small marketplace in {LAKEHOUSE.relative_to(ROOT)}")
    shutil.rmtree(LAKEHOUSE, ignore_errors=True)
    spec = load_spec(SPEC)
    logs = Path(os.environ["AIRFLOW_HOME"]) / "demo-logs"
    with console.status("starting Spark"), output_to(logs / "spark.log"):
        spark = spark_session(spec.spark)  # the JVM keeps the log file as its stdout and stderr
    create_marketplace(spark, str(LAKEHOUSE))
    console.print(
        "6 Delta tables with their Change Data Feed on: 5 merchants, 20 products (one without a "
        "merchant), 5 persons with lists of addresses, 5 addresses, 10 purchases, 4 lists of "
        f"favourite products. The pipeline {SPEC.relative_to(ROOT)} declares "
        f"{len(spec.views)} views over them."
    )

    step(f"2. the DAG {DAG_ID}, first run: every view loads every key")
    migrate = subprocess.run([str(BIN / "airflow"), "db", "migrate"], capture_output=True, text=True)
    if migrate.returncode != 0:
        raise SystemExit(f"airflow db migrate failed:\n{migrate.stdout[-3000:]}{migrate.stderr[-3000:]}")
    with output_to(logs / "dagbag.log"):
        from airflow.dag_processing.dagbag import DagBag

        bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    logging.getLogger("py4j").setLevel(logging.WARNING)  # Airflow's logging let it say INFO
    if DAG_ID not in bag.dags:
        raise SystemExit(f"{DAG_ID} did not load: {bag.import_errors}")
    dag = bag.dags[DAG_ID]
    run_dag(dag, spec, 1)
    for number, batch in enumerate(CHANGE_BATCHES, start=3):
        step(f"{number}. {batch.title}; then the DAG again")
        batch.apply(spark, str(LAKEHOUSE))
        show_plan(spec)
        run_dag(dag, spec, number - 1)

    step("two of the views now")
    for view in SHOWN:
        show(spark, spec, view)
    from lakejoin.quality.reports import write_reports
    from lakejoin.spec.layout import batch_log_path

    index = Path(write_reports(spec, views=spec.view_order(), last=1))  # as of the last commit
    step(f"done in {time.monotonic() - started:.0f} s: where to look")
    rel = SPEC.relative_to(ROOT)
    console.print(
        f"- the views: Delta tables under {LAKEHOUSE.relative_to(ROOT)}/ "
        f"({', '.join(spec.view_order())})\n"
        f"- where each view stands: .venv/bin/lakejoin status {rel}\n"
        f"- what the next batch of each view would do, and why: .venv/bin/lakejoin plan {rel}\n"
        f"- the batch log: {Path(batch_log_path(spec)).relative_to(ROOT)} (a Delta table)\n"
        f"- the data-quality reports: {index.relative_to(ROOT)}\n"
        "- the same DAG in Airflow's UI, with its runs, tasks and reports: make airflow-ui"
    )


if __name__ == "__main__":
    main()
