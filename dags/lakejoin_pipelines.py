"""lakejoin pipelines: one DAG per spec in `pipelines/` (or `$LAKEJOIN_PIPELINES_DIR`).

A run pays one Spark start: the `batches` task runs one batch of each selected view, in
dependency order, on one Spark session. For each view it reads the changes of the view's
sources since its last committed batch, recomputes the affected keys, MERGEs them into the
view's Delta table, checks the batch with Great Expectations and commits it. Each view then has
a task of its own, after `batches` and the tasks of the views it reads, that shows the view's
result: success with its figures, skipped (nothing new, or not selected), or failed with the
view's error. A view that fails does not stop the views that do not read it. Clearing a view's
task runs a batch of that view again, on its own. A run with no new source versions is a cheap
no-op.

Trigger form:
- `views`: run only these views (empty: all);
- `full_refresh`: recompute every key and MERGE only the difference;
- `repair_from` / `repair_to`: a version or a timestamp each; re-derive only the output keys
  that source changes in that range touched, at the versions of each view's last committed
  batch, without moving its checkpoint (after a fix to a view's logic, or to mend drift).

A backfill over past dates repairs each run's data interval (`repair_from` = its start,
`repair_to` = its end): the changes committed in that interval are re-derived, never replayed.

A scheduled run first asks the Delta logs (without Spark) whether any source of a selected view
has a new version; if none has, no Spark starts and every view task is skipped. Each view's
output table is an Airflow Asset (`lakejoin://<pipeline>/<view>`), updated when a batch
commits, so other DAGs can be scheduled on it.

This file only wires (the task logic is lakejoin/airflow/tasks.py): Spark, Delta and Great
Expectations are imported inside the tasks.
"""

from __future__ import annotations

import os
from pathlib import Path

import pendulum
from airflow.sdk import DAG, Asset, Param, dag, task
from airflow.sdk.exceptions import AirflowTimetableInvalid

from lakejoin.errors import LakejoinError
from lakejoin.spec.model import PipelineSpec, find_specs
from lakejoin.spec.parse import load_spec

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


def pipeline_dag(spec_file: Path, spec: PipelineSpec):  # noqa: ANN201 - an Airflow DAG
    @dag(
        dag_id=f"lakejoin_{spec.name}",
        schedule=spec.schedule,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        # Only the DAGs this file names get bagged: a spec whose DAG failed (a bad schedule) must
        # not be picked up from the decorator's registry, where its own error would hide the
        # stand-in's (Airflow keeps one import error per file).
        auto_register=False,
        tags=["lakejoin"],
        doc_md=__doc__,
        params={
            # "null" among its types makes the trigger form's field optional (empty: all views).
            "views": Param(
                None,
                type=["null", "array"],
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
            "audit_full": Param(
                False,
                type="boolean",
                description="After the batches, compare every key of each selected view with a "
                "recompute at its last batch's pins (lakejoin audit --full; a nightly check).",
            ),
            "parallel": Param(
                None,
                type=["null", "integer"],
                minimum=1,
                description="Views that do not read each other run at once, up to this many "
                "(empty: lakejoin's default).",
            ),
        },
    )
    def pipeline() -> None:
        from lakejoin.airflow.submit_operator import submit_batch
        from lakejoin.airflow.tasks import BATCHES, batch_request, run_batches, view_result
        from lakejoin.spec.model import SparkRun

        # A view that reads other views runs after them, as `lakejoin run` does. It still runs
        # when they were skipped (not selected in the trigger form), never after one failed.
        submitted = spec.spark.run is SparkRun.SUBMIT
        batches = None if submitted else task(task_id=BATCHES, retries=0)(run_batches)(str(spec_file))
        tasks = {}
        for view in spec.view_order():
            task_args = {"retries": 0, "trigger_rule": "none_failed", "outlets": [view_asset(spec, view)]}
            # `spark: {run: submit}`: one spark-submit per view to the cluster of the spec's Spark
            # connection (lakejoin/airflow/submit_operator.py); otherwise the `batches` task ran them all.
            if submitted:
                tasks[view] = submit_batch(str(spec_file), spec, view, batch_request, **task_args)
            else:
                tasks[view] = task(task_id=view, **task_args)(view_result)(str(spec_file), view)
                batches >> tasks[view]
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


class BrokenSpecsError(Exception):
    """The specs of this folder that could not become a DAG, each with lakejoin's message."""


class _BrokenSpecs(DAG):
    """Stands in for the specs that failed. Airflow validates each DAG of a file before it adds
    it, and records a failed validation as an import error of the file after adding the file's
    other DAGs: a broken spec drops only its own DAG, and the import error names it."""

    def validate(self) -> None:
        raise BrokenSpecsError("\n".join(_BROKEN))


_BROKEN: list[str] = []
for _spec_file in find_specs(PIPELINES):
    try:
        _spec = load_spec(_spec_file)
        globals()[f"lakejoin_{_spec.name}"] = pipeline_dag(_spec_file, _spec)
    except LakejoinError as error:
        _BROKEN.append(str(error))
    except Exception as error:  # noqa: BLE001 - any other failure is still this spec's alone
        _BROKEN.append(f"{_spec_file}: {type(error).__name__}: {error}")
if _BROKEN:
    lakejoin_broken_specs = _BrokenSpecs(dag_id="lakejoin_broken_specs", schedule=None)
