"""The Airflow wiring: DAG files parse without Spark, and a real DAG run maintains the views."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lakehouse import drift, fk_join_oracle

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
AIRFLOW = str(Path(sys.executable).parent / "airflow")


def marketplace_spec(root: Path) -> str:
    return f"""\
pipeline: market
schedule: "@hourly"
storage: {root / "lake"}
sources:
  products:  {{path: {root / "lake" / "products"},  key: product_id}}
  merchants: {{path: {root / "lake" / "merchants"}, key: merchant_id}}
views:
  display_products:
    fk_join: {{left: products, right: merchants, fk: merchant_id, how: left,
              right_columns: [display_name, photo_url]}}
  listed_products:
    fk_join: {{left: products, right: merchants, fk: merchant_id, how: inner,
              right_columns: [display_name], right_prefix: merchant_}}
"""


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory):
    root = tmp_path_factory.mktemp("airflow")
    pipelines = root / "pipelines"
    pipelines.mkdir()
    (pipelines / "market.yaml").write_text(marketplace_spec(root))
    env = {
        "AIRFLOW_HOME": str(root / "home"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "LAKEJOIN_PIPELINES_DIR": str(pipelines),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    subprocess.run([AIRFLOW, "db", "migrate"], check=True, capture_output=True, env=os.environ)
    if "airflow.settings" in sys.modules:
        # Airflow read its config when another test first imported it (the plugin's tests do):
        # point this process's metadata DB at the home just migrated.
        from airflow import settings
        from airflow.configuration import conf

        conf.set("database", "sql_alchemy_conn", f"sqlite:///{root / 'home' / 'airflow.db'}")
        settings.configure_vars()
        settings.configure_orm()
    yield root
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def own_pipeline(airflow_home, spark, request):
    """A pipeline of this test's own (spec, lake and DAG), so no other test's changes reach it."""
    from lakejoin.demo.marketplace import create_marketplace
    from lakejoin.spec.parse import load_spec

    name = request.node.name.removeprefix("test_")[:24].rstrip("_")
    root = airflow_home / name
    file = airflow_home / "pipelines" / f"{name}.yaml"
    file.write_text(marketplace_spec(root).replace("pipeline: market", f"pipeline: {name}"))
    create_marketplace(spark, str(root / "lake"))
    yield load_spec(file)
    file.unlink()


def dag_bag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(REPO / "dags"))


def test_dag_files_import_without_spark(airflow_home):
    """One DAG per spec, one task per view, no Spark/Delta/GE imported at parse time."""
    probe = (
        "import sys\n"
        "from airflow.dag_processing.dagbag import DagBag\n"
        f"bag = DagBag(dag_folder={str(REPO / 'dags')!r})\n"
        "assert not bag.import_errors, bag.import_errors\n"
        "dag = bag.dags['lakejoin_market']\n"
        "print(sorted(dag.task_ids), dag.max_active_runs, sorted(dag.params.keys()))\n"
        "print(dag.params.get_param('views').schema['type'], dag.params.validate()['views'])\n"
        "print([m for m in ('pyspark', 'delta', 'great_expectations') if m in sys.modules])\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=os.environ)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    # The trigger form's `views` is optional: a field is required unless its types allow null.
    assert lines[-2] == "['null', 'array'] None"
    assert lines[-3] == (
        "['batches', 'display_products', 'listed_products'] 1 "
        "['audit_full', 'full_refresh', 'parallel', 'repair_from', 'repair_to', 'views']"
    )
    assert lines[-1] == "[]"


def test_a_view_reading_a_view_runs_after_it(airflow_home):
    """Tasks are wired by the views' reads, after `batches`; a skipped upstream does not skip
    its readers."""
    chain = airflow_home / "pipelines" / "chain.yaml"
    chain.write_text(
        marketplace_spec(airflow_home).replace("pipeline: market", "pipeline: chain")
        + "  names:\n    rekey: {source: listed_products, key: name, columns: [merchant_display_name]}\n"
        + "  cheap_names:\n    rekey: {source: names, key: merchant_display_name, unique: false}\n"
    )
    probe = (
        "from airflow.dag_processing.dagbag import DagBag\n"
        f"bag = DagBag(dag_folder={str(REPO / 'dags')!r})\n"
        "assert not bag.import_errors, bag.import_errors\n"
        "dag = bag.dags['lakejoin_chain']\n"
        "for t in sorted(dag.task_ids):\n"
        "    print(t, sorted(dag.get_task(t).upstream_task_ids), dag.get_task(t).trigger_rule.value)\n"
    )
    try:
        result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=os.environ)
    finally:
        chain.unlink()
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-5:] == [
        "batches [] all_success",
        "cheap_names ['batches', 'names'] none_failed",
        "display_products ['batches'] none_failed",
        "listed_products ['batches'] none_failed",
        "names ['batches', 'listed_products'] none_failed",
    ]


def import_errors_of(airflow_home, name: str, text: str) -> str:
    """The DagBag's import errors while the spec `name`.yaml holds `text`; the DAG of the good
    spec beside it still loads."""
    broken = airflow_home / "pipelines" / f"{name}.yaml"
    broken.write_text(text)
    try:
        bag = dag_bag()
    finally:
        broken.unlink()
    assert "lakejoin_market" in bag.dags, "a broken spec must drop only its own DAG"
    assert f"lakejoin_{name}" not in bag.dags
    return "\n".join(bag.import_errors.values())


def test_a_broken_spec_is_an_import_error_naming_the_line(airflow_home):
    """The import error names the file, the line and the key; the other pipelines' DAGs load."""
    message = import_errors_of(
        airflow_home,
        "broken",
        marketplace_spec(airflow_home)
        .replace("pipeline: market", "pipeline: broken")
        .replace("how: inner", "how: outer"),
    )
    assert "broken.yaml:12" in message and "unknown join type 'outer'" in message


def test_a_bad_schedule_is_an_import_error_naming_the_line(airflow_home):
    message = import_errors_of(
        airflow_home,
        "late",
        marketplace_spec(airflow_home)
        .replace("pipeline: market", "pipeline: late")
        .replace('schedule: "@hourly"', 'schedule: "every ten minutes"'),
    )
    assert "late.yaml:2" in message and "'every ten minutes' is not a schedule Airflow understands" in message
    assert "use a cron expression" in message


def _rows(spark, path, version=None):
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return [r.asDict() for r in reader.load(path).collect()]


def _expected(spark, spec, view):
    from lakejoin.engine.batch import batch_log

    record = batch_log(spec).last_committed(view)
    join = spec.views[view].fk_join
    left, right = spec.sources[join.left], spec.sources[join.right]
    return fk_join_oracle(
        _rows(spark, left.path, record.pinned_versions[left.name]),
        _rows(spark, right.path, record.pinned_versions[right.name]),
        join=join,
        left_key=left.key,
        right_key=right.key,
    )


def _output(spark, spec, view):
    return sorted(_rows(spark, spec.views[view].path), key=lambda r: r["product_id"])


def test_dag_runs_maintain_the_views(airflow_home, spark, lineage_events, monkeypatch):
    """A real DAG run loads every key, its views' batches in one task; after a change batch a run
    with params updates one view; a view's task run without `batches` runs a batch of its own.
    Each batch's OpenLineage events have the task that ran it as their parent run (issue 39)."""
    from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter
    from airflow.providers.openlineage.plugins.macros import lineage_job_namespace
    from airflow.utils.state import DagRunState, TaskInstanceState

    from lakejoin.demo.marketplace import CHANGE_BATCHES, create_marketplace
    from lakejoin.engine.batch import batch_log
    from lakejoin.spec.parse import load_spec

    spec = load_spec(airflow_home / "pipelines" / "market.yaml")
    create_marketplace(spark, str(airflow_home / "lake"))
    dag = dag_bag().dags["lakejoin_market"]

    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD", "True")  # the provider's own events
    first = dag.test()
    assert first.state == DagRunState.SUCCESS
    # lakejoin's events (namespace: the pipeline), each batch's parent the `batches` task's run.
    batches = first.get_task_instance("batches")
    task_run = OpenLineageAdapter.build_task_instance_run_id(
        dag_id=batches.dag_id,
        task_id=batches.task_id,
        try_number=batches.try_number,
        logical_date=first.logical_date or first.run_after,
        map_index=batches.map_index,
    )
    events = [e for e in lineage_events() if e["job"]["namespace"] == "market"]
    assert sorted((e["job"]["name"], e["eventType"]) for e in events) == sorted(
        (f"market.{view}", state) for view in spec.views for state in ("START", "COMPLETE")
    )
    for event in events:
        parent = event["run"]["facets"]["parent"]
        assert parent["run"]["runId"] == task_run
        assert (parent["job"]["namespace"], parent["job"]["name"]) == (
            lineage_job_namespace(),
            "lakejoin_market.batches",
        )
    assert {ti.task_id: ti.state for ti in first.get_task_instances()} == {
        "batches": TaskInstanceState.SUCCESS,
        "display_products": TaskInstanceState.SUCCESS,
        "listed_products": TaskInstanceState.SUCCESS,
    }
    for view in spec.views:
        assert _output(spark, spec, view) == _expected(spark, spec, view)
    assert len(_output(spark, spec, "display_products")) == 20
    assert len(_output(spark, spec, "listed_products")) == 19

    CHANGE_BATCHES[1].apply(spark, str(airflow_home / "lake"))
    second = dag.test(run_conf={"views": ["display_products"]})
    assert second.state == DagRunState.SUCCESS
    states = {ti.task_id: ti.state for ti in second.get_task_instances()}
    assert states == {
        "batches": TaskInstanceState.SUCCESS,
        "display_products": TaskInstanceState.SUCCESS,
        "listed_products": TaskInstanceState.SKIPPED,
    }
    assert _output(spark, spec, "display_products") == _expected(spark, spec, "display_products")
    moved = {r["product_id"]: r for r in _output(spark, spec, "display_products")}
    assert moved["p03"]["merchant_id"] == "m2" and moved["p03"]["display_name"] == "Bolt & Nut Co."

    # listed_products' task alone (as `airflow tasks test` runs it, or a rerun): its own batch.
    before = batch_log(spec).last_committed("listed_products").batch_id
    alone = dag.partial_subset(["listed_products"], include_upstream=False).test(run_conf={"views": []})
    assert alone.state == DagRunState.SUCCESS
    assert {ti.task_id: ti.state for ti in alone.get_task_instances()} == {
        "listed_products": TaskInstanceState.SUCCESS
    }
    assert batch_log(spec).last_committed("listed_products").batch_id == before + 1
    assert _output(spark, spec, "listed_products") == _expected(spark, spec, "listed_products")


def test_a_failing_batch_fails_its_task(airflow_home, spark):
    """Duplicate merchant keys stop the batch: the task fails, the run fails, nothing commits."""
    from airflow.utils.state import DagRunState, TaskInstanceState

    from lakejoin.engine.batch import batch_log
    from lakejoin.spec.parse import load_spec

    spec = load_spec(airflow_home / "pipelines" / "market.yaml")
    before = batch_log(spec).last_committed("listed_products")
    duplicate = [("m1", "Acme again", "x.png", "DE")]
    merchants = spark.read.format("delta").load(spec.sources["merchants"].path)
    spark.createDataFrame(duplicate, merchants.schema).write.format("delta").mode("append").save(
        spec.sources["merchants"].path
    )
    run = dag_bag().dags["lakejoin_market"].test(run_conf={"views": ["listed_products"]})
    assert run.state == DagRunState.FAILED
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {
        "batches": TaskInstanceState.SUCCESS,  # it ran the batch; the view's task fails with it
        "display_products": TaskInstanceState.SKIPPED,
        "listed_products": TaskInstanceState.FAILED,
    }
    after = batch_log(spec).last_committed("listed_products")
    assert after.batch_id == before.batch_id


def test_nothing_new_skips_without_spark_and_a_repair_runs_from_the_form(own_pipeline, spark, capfd):
    """A run with no new source versions skips every task after reading only the Delta logs;
    the form's full audit finds a row that went wrong where the log cannot show it (a plain edit
    shows, and recomputes the view); a repair from the form
    re-derives at the checkpoint, mends it and leaves the checkpoint where it was."""
    from airflow.utils.state import DagRunState, TaskInstanceState

    from lakejoin.delta.records import BatchMode
    from lakejoin.engine.batch import batch_log

    spec = own_pipeline
    dag = dag_bag().dags[f"lakejoin_{spec.name}"]
    assert dag.test().state == DagRunState.SUCCESS
    checkpoint = batch_log(spec).last_committed("display_products")

    # Its own process, so no JVM of this test's is around: a skip must not start one.
    idle = subprocess.run(
        [AIRFLOW, "dags", "test", f"lakejoin_{spec.name}"], capture_output=True, text=True, env=os.environ
    )
    log = idle.stdout + idle.stderr
    assert idle.returncode == 0, log[-3000:]
    for view in spec.views:
        assert f"{view}: no new versions since batch" in log and "checked without starting Spark" in log
    assert "SparkContext" not in log and "ivy" not in log.lower()
    assert "skipped" in log

    drift(spec.views["display_products"].path, "product_id = 'p01'", {"display_name": "'STALE'"})
    # The nightly check from the form: no new versions, but every key is compared, and the row
    # that went wrong where the log cannot show it fails its view's task by name.
    audited = dag.test(run_conf={"views": ["display_products"], "audit_full": True})
    assert audited.state == DagRunState.FAILED
    assert {ti.task_id: ti.state for ti in audited.get_task_instances()}["display_products"] == (
        TaskInstanceState.FAILED
    )
    log = capfd.readouterr()
    assert "AuditDifferenceError" in log.out + log.err and "'p01'" in log.out + log.err

    run = dag.test(run_conf={"views": ["display_products"], "repair_from": "0"})
    assert run.state == DagRunState.SUCCESS
    assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {
        "batches": TaskInstanceState.SUCCESS,
        "display_products": TaskInstanceState.SUCCESS,
        "listed_products": TaskInstanceState.SKIPPED,
    }
    assert _output(spark, spec, "display_products") == _expected(spark, spec, "display_products")
    repair = batch_log(spec).last("display_products")
    assert repair.mode is BatchMode.REPAIR
    sources = ("products", "merchants")
    assert {s: repair.pinned_versions[s] for s in sources} == {
        s: checkpoint.pinned_versions[s] for s in sources
    }


def test_a_failing_expectation_fails_its_task_and_names_it(own_pipeline, airflow_home, capfd):
    """A user suite's failed expectation fails the task; the task log and the report name it."""
    import json

    from airflow.utils.state import DagRunState, TaskInstanceState

    from lakejoin.spec.layout import reports_folder

    spec = own_pipeline
    suite = airflow_home / "expectations" / spec.name / "listed_products.json"
    suite.parent.mkdir(parents=True, exist_ok=True)
    suite.write_text(
        json.dumps(
            {
                "name": "listed_products",
                "expectations": [
                    {
                        "type": "expect_column_values_to_be_between",
                        "kwargs": {"column": "price", "max_value": 1},
                    }
                ],
            }
        )
    )
    try:
        run = (
            dag_bag()
            .dags[f"lakejoin_{spec.name}"]
            .test(run_conf={"views": ["listed_products"], "full_refresh": True})
        )
    finally:
        suite.unlink()
    assert run.state == DagRunState.FAILED
    assert {ti.task_id: ti.state for ti in run.get_task_instances()}[
        "listed_products"
    ] == TaskInstanceState.FAILED
    log = capfd.readouterr()
    log = log.out + log.err
    assert "QualityCheckError" in log and "expect_column_values_to_be_between" in log
    reports = sorted(reports_folder(spec, "listed_products").glob("batch-*.json"))
    failed = json.loads(reports[-1].read_text())
    assert failed["success"] is False
    assert any(
        c["expectation"] == "expect_column_values_to_be_between" and not c["success"]
        for c in failed["checks"]
    )
