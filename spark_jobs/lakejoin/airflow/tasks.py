"""What the tasks of a lakejoin DAG do (dags/lakejoin_pipelines.py only wires them).

A DAG run pays one JVM start, not one per view (issue 24, docs/decisions.md):
- the `batches` task runs one batch of each selected view, in dependency order, on one Spark
  session (`lakejoin.engine.pipeline.run_pipeline`), and returns each view's result as its XCom.
  Before any Spark it asks the Delta logs whether any selected view has work; when none has,
  no JVM starts;
- each view's own task then shows that view's result: it succeeds with the batch's figures
  (and updates the view's Asset), is skipped when the view had nothing new or was not
  selected, or fails with the view's error. A view that fails does not stop the views that do
  not read it.
- A view task that runs again (cleared in the UI), or runs without the `batches` task (`airflow
  tasks test`, a DAG subset), runs a batch of its own view with a Spark of its own: per-view
  reruns keep working.

Spark, Delta and Great Expectations are imported inside the functions, never at DAG parse time.

>>> results = run_batches("pipelines/marketplace.yaml")      # doctest: +SKIP
>>> results["display_products"]["state"]                     # doctest: +SKIP
'committed'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakejoin.spec.model import PipelineSpec
from lakejoin.spec.parse import load_spec

if TYPE_CHECKING:
    from lakejoin.engine.repair import RepairRange

NOT_SELECTED = "not selected"
BATCHES = "batches"  # the task id of the task that runs every view's batch


def _asked(context: Any) -> tuple[bool, RepairRange | None]:
    """The run's full refresh flag and repair range (trigger form, or a backfill's interval)."""
    from lakejoin.engine.repair import requested_repair

    run_type = getattr(context["dag_run"], "run_type", None)
    repair = requested_repair(
        context["params"],
        backfill=getattr(run_type, "value", run_type) == "backfill",
        interval=(context.get("data_interval_start"), context.get("data_interval_end")),
    )
    return bool(context["params"].get("full_refresh")), repair


def _selected(context: Any, view: str) -> bool:
    chosen = context["params"].get("views")
    return not chosen or view in chosen


def batch_request(spec: PipelineSpec, view: str) -> dict:
    """What this run asks of `view` alone: a full refresh, a repair range, or the next batch.
    Skips the task when the view was not selected, or when nothing is asked and no source has a
    new version (checked without Spark). The spark-submit tasks and a view task's own rerun use it."""
    from airflow.sdk import get_current_context
    from airflow.sdk.exceptions import AirflowSkipException

    from lakejoin.engine.pending import pending_work

    context = get_current_context()
    if not _selected(context, view):
        raise AirflowSkipException(f"view '{view}' was not selected in this run")
    full_refresh, repair = _asked(context)
    if not full_refresh and repair is None:
        pending = pending_work(spec, view)
        if not pending.run:
            raise AirflowSkipException(f"{view}: {pending.reason} (checked without starting Spark)")
        print(f"{view}: {pending.reason}")
    repair_from, repair_to = repair.bounds() if repair else (None, None)
    return {"full_refresh": full_refresh, "repair_from": repair_from, "repair_to": repair_to}


def run_batches(spec_file: str) -> dict[str, dict]:
    """The `batches` task: one batch of each selected view on one Spark session; returns
    `{view: result}` (state, error, batch id, pinned versions, figures) for the view tasks."""
    from airflow.sdk import get_current_context

    from lakejoin.delta.session import spark_session
    from lakejoin.engine.pending import pending_work
    from lakejoin.engine.pipeline import ViewResult, run_pipeline

    context = get_current_context()
    spec = load_spec(spec_file)
    selected = [v for v in spec.view_order() if _selected(context, v)]
    results: dict[str, dict] = {v: {"state": NOT_SELECTED} for v in spec.view_order() if v not in selected}
    full_refresh, repair = _asked(context)
    audit_full = bool(context["params"].get("audit_full"))
    if not full_refresh and repair is None and not audit_full:
        # Only whether Spark must start: the first view with work answers it, and its batch
        # (like every view's) plans again in run_view, so the views after it are not read twice.
        pending = {}
        for view in selected:
            pending[view] = work = pending_work(spec, view)
            print(f"{view}: {work.reason}")
            if work.run:
                break
        else:
            reason = "{} (checked without starting Spark)"
            results.update(
                {v: {"state": "nothing new", "reason": reason.format(w.reason)} for v, w in pending.items()}
            )
            return results

    def show(result: ViewResult) -> None:
        results[result.view] = _xcom(result)
        detail = result.error or (result.summary.reason if result.summary else None)
        print(f"{result.view}: {result.state.value}" + (f": {detail}" if detail else ""), flush=True)

    spark = lineage_parent(spark_session(spec.spark), context)
    run_pipeline(
        spark,
        spec,
        selected,
        full_refresh=full_refresh,
        repair=repair,
        parallel=context["params"].get("parallel"),
        on_result=show,
    )
    if audit_full:
        audit_views(spark, spec, results)
    return results


def audit_views(spark: Any, spec: PipelineSpec, results: dict[str, dict]) -> None:
    """The trigger form's `audit_full`: every key of each view whose batch did not fail, against
    a recompute at its last batch's pins. A view that differs fails its task, naming the keys."""
    from lakejoin.engine.audit import audit_view, difference_error

    for view, result in results.items():
        if result["state"] not in ("committed", "nothing new"):
            continue
        found = audit_view(spark, spec, spec.views[view])
        if found is None:
            continue
        if found.differences:
            error = difference_error(spec, spec.views[view], found, "the full audit of this run")
            result.update(state="failed", error=str(error), error_type=type(error).__name__)
        print(f"{view}: audit of every key: {found.differences} key(s) differ from a recompute", flush=True)


def _xcom(result: Any) -> dict:  # a ViewResult
    out: dict[str, Any] = {"state": result.state.value}
    if result.error:
        out.update(error=result.error, error_type=result.error_type)
    summary = result.summary
    if summary is not None:
        out.update(summary.figures(), reason=summary.reason, notes=summary.notes, report=summary.report)
    return out


def view_result(spec_file: str, view: str) -> dict:
    """A view's task: its result from the `batches` task, or, when the task runs again (cleared)
    or `batches` did not run, a batch of its own. Returns the figures Airflow keeps as the
    task's XCom."""
    from airflow.sdk import get_current_context
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    context = get_current_context()
    ti = context["ti"]
    results = ti.xcom_pull(task_ids=BATCHES)
    if ti.try_number > 1 or not isinstance(results, dict):
        why = f"try {ti.try_number}" if ti.try_number > 1 else f"no result of '{BATCHES}' in this run"
        print(f"{view}: a batch of its own ({why})")
        return run_batch(spec_file, view)
    result = results.get(view) or {"state": NOT_SELECTED}
    state = result["state"]
    if state == NOT_SELECTED:
        raise AirflowSkipException(f"view '{view}' was not selected in this run")
    if state == "nothing new":
        raise AirflowSkipException(f"{view}: {result.get('reason')}")
    if state != "committed":  # failed, or skipped because a view it reads failed
        raise AirflowFailException(f"{view} {state}: {result.get('error_type') or ''} {result.get('error')}")
    print(f"{view}: committed, batch {result['batch_id']}, metrics {result['metrics']}")
    for topic, note in (result.get("notes") or {}).items():
        print(f"{view}: {topic}: {note}")
    if result.get("report"):
        print(f"{view}: data-quality report {result['report']}")
    return {k: result[k] for k in ("view", "outcome", "batch_id", "pinned_versions", "metrics")}


def run_batch(spec_file: str, view: str) -> dict:
    """One batch of `view` on a Spark of this task's own (a view task's rerun)."""
    from airflow.sdk.exceptions import AirflowSkipException

    from lakejoin.delta.session import spark_session
    from lakejoin.engine.batch import BatchOutcome, run_view
    from lakejoin.engine.repair import RepairRange

    spec = load_spec(spec_file)
    request = batch_request(spec, view)
    repair = None
    if request["repair_from"]:
        repair = RepairRange.parse(request["repair_from"], request["repair_to"])
    from airflow.sdk import get_current_context

    spark = lineage_parent(spark_session(spec.spark), get_current_context())
    summary = run_view(spark, spec, view, full_refresh=request["full_refresh"], repair=repair)
    if summary.outcome is BatchOutcome.SKIPPED:
        reason = summary.reason or f"no new source versions ({summary.pinned_versions})"
        raise AirflowSkipException(f"{view}: {reason}")
    print(f"{view}: {summary.outcome.value}, batch {summary.batch_id}, metrics {summary.metrics()}")
    for topic, note in summary.notes.items():
        print(f"{view}: {topic}: {note}")
    if summary.report:
        print(f"{view}: data-quality report {summary.report}")
    return summary.figures()


def lineage_parent(spark: Any, context: Any) -> Any:
    """`spark`, told this task's OpenLineage run, the parent of the batches it runs
    (engine/lineage.py reads it): the Spark conf keys OpenLineage's Airflow provider injects
    into a spark-submit, from the provider's own function, set on this task's session. Nothing
    when no OpenLineage transport is configured, or the provider is not installed."""
    from lakejoin.engine.lineage import lineage_client

    if lineage_client() is None:
        return spark
    try:
        from airflow.providers.openlineage.utils.spark import (
            inject_parent_job_information_into_spark_properties,
        )
    except ImportError:
        return spark
    for key, value in inject_parent_job_information_into_spark_properties({}, context).items():
        spark.conf.set(key, value)
    return spark
