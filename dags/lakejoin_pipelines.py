"""lakejoin pipelines: one DAG per spec in `pipelines/` (or `$LAKEJOIN_PIPELINES_DIR`).

Each view is one task that runs one batch of that view with Spark, after the tasks of the views
it reads: it reads the changes of the
view's sources since its last committed batch, recomputes the affected keys, MERGEs them into
the view's Delta table, checks the batch with Great Expectations and commits it. A run with no
new source versions is a cheap no-op.

Trigger form:
- `views`: run only these views (empty: all);
- `full_refresh`: recompute every key and MERGE only the difference;
- `repair_from` / `repair_to`: a version or a timestamp each; re-derive only the output keys
  that source changes in that range touched, at the versions of each view's last committed
  batch, without moving its checkpoint (after a fix to a view's logic, or to mend drift).

A backfill over past dates repairs each run's data interval (`repair_from` = its start,
`repair_to` = its end): the changes committed in that interval are re-derived, never replayed.

A scheduled run first asks the Delta logs (without Spark) whether any source of the view has
a new version; if none has, the task is skipped. Each view's output table is an Airflow Asset
(`lakejoin://<pipeline>/<view>`), updated when a batch commits, so other DAGs can be
scheduled on it.

This file only wires: Spark, Delta and Great Expectations are imported inside the tasks.
"""

from __future__ import annotations

import os
from pathlib import Path

import pendulum
from airflow.sdk import Asset, Param, dag, get_current_context, task
from airflow.sdk.exceptions import AirflowTimetableInvalid

from lakejoin.spec import PipelineSpec, find_specs, load_spec

PIPELINES = Path(
    os.environ.get("LAKEJOIN_PIPELINES_DIR", Path(__file__).resolve().parent.parent / "pipelines")
)


def view_asset(spec: PipelineSpec, view: str) -> Asset:
    """The Airflow Asset of a view's output table."""
    return Asset(
        name=f"lakejoin.{spec.name}.{view}",
        uri=f"lakejoin://{spec.name}/{view}",
        extra={"path": spec.views[view].path},
    )


def batch_request(spec: PipelineSpec, view: str) -> dict:
    """What this run asks of `view`: a full refresh, a repair range (from the trigger form or a
    backfill's data interval), or the next batch. Skips the task when the view was not selected,
    or when nothing is asked and no source has a new version (checked without Spark)."""
    from airflow.sdk.exceptions import AirflowSkipException

    from lakejoin.pending import pending_work
    from lakejoin.repair import requested_repair

    context = get_current_context()
    params = context["params"]
    if params.get("views") and view not in params["views"]:
        raise AirflowSkipException(f"view '{view}' was not selected in this run")
    run_type = getattr(context["dag_run"], "run_type", None)
    repair = requested_repair(
        params,
        backfill=getattr(run_type, "value", run_type) == "backfill",
        interval=(context.get("data_interval_start"), context.get("data_interval_end")),
    )
    full_refresh = bool(params.get("full_refresh"))
    if not full_refresh and repair is None:
        pending = pending_work(spec, view)
        if not pending.run:
            raise AirflowSkipException(f"{view}: {pending.reason} (checked without starting Spark)")
        print(f"{view}: {pending.reason}")
    repair_from, repair_to = repair.bounds() if repair else (None, None)
    return {"full_refresh": full_refresh, "repair_from": repair_from, "repair_to": repair_to}


def run_batch(spec_file: str, view: str) -> dict:
    """Run one batch of `view`; return the figures Airflow keeps as the task's XCom."""
    from airflow.sdk.exceptions import AirflowSkipException

    spec = load_spec(spec_file)
    request = batch_request(spec, view)
    from lakejoin.engine.batch import BatchOutcome, run_view
    from lakejoin.repair import RepairRange
    from lakejoin.session import spark_session

    repair = None
    if request["repair_from"]:
        repair = RepairRange.parse(request["repair_from"], request["repair_to"])
    summary = run_view(
        spark_session(spec.spark), spec, view, full_refresh=request["full_refresh"], repair=repair
    )
    if summary.outcome is BatchOutcome.SKIPPED:
        raise AirflowSkipException(f"{view}: no new source versions ({summary.pinned_versions})")
    print(f"{view}: {summary.outcome.value}, batch {summary.batch_id}, metrics {summary.metrics()}")
    for topic, note in summary.notes.items():
        print(f"{view}: {topic}: {note}")
    if summary.report:
        print(f"{view}: data-quality report {summary.report}")
    return {
        "view": view,
        "outcome": summary.outcome.value,
        "batch_id": summary.batch_id,
        "pinned_versions": summary.pinned_versions,
        "metrics": summary.metrics(),
    }


def pipeline_dag(spec_file: Path, spec: PipelineSpec):  # noqa: ANN201 - an Airflow DAG
    @dag(
        dag_id=f"lakejoin_{spec.name}",
        schedule=spec.schedule,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        tags=["lakejoin"],
        doc_md=__doc__,
        params={
            "views": Param(
                [],
                type="array",
                items={"type": "string", "enum": list(spec.views)},
                description="Views to run; empty runs all of them.",
            ),
            "full_refresh": Param(
                False, type="boolean", description="Recompute every key and MERGE only the difference."
            ),
            "repair_from": Param(
                None,
                type=["null", "string"],
                description="Repair: re-derive the keys that source changes from here touched "
                "(a Delta version, or a timestamp such as 2026-11-01T00:00:00Z).",
            ),
            "repair_to": Param(
                None,
                type=["null", "string"],
                description="End of the repair range (a version, or a timestamp; empty: now).",
            ),
        },
    )
    def pipeline() -> None:
        from lakejoin.airflow_submit import submit_batch
        from lakejoin.spec import SparkRun

        # A view that reads other views runs after them, as `lakejoin run` does. It still runs
        # when they were skipped (not selected in the trigger form), never after one failed.
        tasks = {}
        for view in spec.view_order():
            task_args = {"retries": 0, "trigger_rule": "none_failed", "outlets": [view_asset(spec, view)]}
            # `spark: {run: submit}`: spark-submit to the cluster of the spec's Spark connection
            # (lakejoin/airflow_submit.py); otherwise Spark runs inside the task's own process.
            if spec.spark.run is SparkRun.SUBMIT:
                tasks[view] = submit_batch(str(spec_file), spec, view, batch_request, **task_args)
            else:
                tasks[view] = task(task_id=view, **task_args)(run_batch)(str(spec_file), view)
            for upstream in spec.upstream_views(view):
                tasks[upstream] >> tasks[view]

    built = pipeline()
    try:
        built.timetable.validate()
    except AirflowTimetableInvalid as exc:
        raise spec.error(
            "schedule",
            f"'{spec.schedule}' is not a schedule Airflow understands: {exc}",
            "use a cron expression ('*/10 * * * *') or a preset ('@hourly'); leave it out for manual runs",
        ) from None
    return built


for _spec_file in find_specs(PIPELINES):
    _spec = load_spec(_spec_file)
    globals()[f"lakejoin_{_spec.name}"] = pipeline_dag(_spec_file, _spec)
