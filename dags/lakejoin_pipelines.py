"""lakejoin pipelines: one DAG per spec in `pipelines/` (or `$LAKEJOIN_PIPELINES_DIR`).

Each view is one task that runs one batch of that view with Spark, after the tasks of the views
it reads: it reads the changes of the
view's sources since its last committed batch, recomputes the affected keys, MERGEs them into
the view's Delta table, checks the batch with Great Expectations and commits it. A run with no
new source versions is a cheap no-op.

Trigger form:
- `views`: run only these views (empty: all);
- `full_refresh`: recompute every key and MERGE only the difference.

This file only wires: Spark, Delta and Great Expectations are imported inside the tasks.
"""

from __future__ import annotations

import os
from pathlib import Path

import pendulum
from airflow.sdk import Param, dag, get_current_context, task

from lakejoin.spec import PipelineSpec, find_specs, load_spec

PIPELINES = Path(
    os.environ.get("LAKEJOIN_PIPELINES_DIR", Path(__file__).resolve().parent.parent / "pipelines")
)


def run_batch(spec_file: str, view: str) -> dict:
    """Run one batch of `view`; return the figures Airflow keeps as the task's XCom."""
    from airflow.sdk.exceptions import AirflowSkipException

    params = get_current_context()["params"]
    if params.get("views") and view not in params["views"]:
        raise AirflowSkipException(f"view '{view}' was not selected in this run")
    from lakejoin.runner import run_view
    from lakejoin.session import spark_session

    spec = load_spec(spec_file)
    summary = run_view(spark_session(spec.spark), spec, view, full_refresh=bool(params.get("full_refresh")))
    print(f"{view}: {summary.outcome.value}, batch {summary.batch_id}, metrics {summary.metrics()}")
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
        },
    )
    def pipeline() -> None:
        # A view that reads other views runs after them, as `lakejoin run` does. It still runs
        # when they were skipped (not selected in the trigger form), never after one failed.
        tasks = {}
        for view in spec.view_order():
            tasks[view] = task(task_id=view, retries=0, trigger_rule="none_failed")(run_batch)(
                str(spec_file), view
            )
            for upstream in spec.upstream_views(view):
                tasks[upstream] >> tasks[view]

    return pipeline()


for _spec_file in find_specs(PIPELINES):
    _spec = load_spec(_spec_file)
    globals()[f"lakejoin_{_spec.name}"] = pipeline_dag(_spec_file, _spec)
