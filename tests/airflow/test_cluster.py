"""The cluster path: for a spec with `spark: {run: submit}`, the DAG's task spark-submits the
view's batch to a Spark standalone cluster through the `spark_default` connection, with the
lakejoin package shipped along. The cluster is real: a master and one worker on loopback,
started with the pyspark install's own launcher."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lakejoin.delta.jars import LOG4J, delta_package, jar_files
from lakejoin.delta.records import BatchMode
from lakejoin.engine.batch import batch_log
from lakejoin.spec.model import PipelineSpec
from tests.lakehouse import MERCHANTS, PRODUCTS, Lakehouse

pytestmark = [pytest.mark.airflow, pytest.mark.cluster]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
APP = "lakejoin_shop.display_products"  # the Spark app name of the view's batch


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Cluster:
    url: str  # spark://127.0.0.1:<port>
    webui: str
    work: Path  # the worker's folder: one subfolder per application, with the files it was sent

    def state(self) -> dict:
        with urllib.request.urlopen(f"{self.webui}/json/", timeout=5) as response:
            return json.load(response)

    def completed_apps(self, name: str) -> list[dict]:
        return [app for app in self.state()["completedapps"] if app["name"] == name]


def _spark_env(root: Path) -> dict[str, str]:
    import pyspark

    return {
        **os.environ,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOCAL_IP": "127.0.0.1",  # every process and web UI binds to loopback
        "SPARK_LOG_DIR": str(root / "logs"),
        "SPARK_WORKER_DIR": str(root / "work"),
        "SPARK_DAEMON_MEMORY": "512m",
    }


def _stop(process: subprocess.Popen) -> None:
    """Stop a daemon and what it started (the worker's executors share its process group)."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("spark-cluster")
    env = _spark_env(root)
    spark_class = str(Path(env["SPARK_HOME"]) / "bin" / "spark-class")
    port, webui, worker_webui = free_port(), free_port(), free_port()
    cluster = Cluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{webui}", root / "work")
    daemons = {
        "master": [
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(webui)),
        ],
        "worker": [
            "org.apache.spark.deploy.worker.Worker",
            cluster.url,
            *("--cores", "1", "--memory", "1g", "--host", "127.0.0.1", "--webui-port", str(worker_webui)),
        ],
    }
    processes: list[subprocess.Popen] = []
    try:
        for name, args in daemons.items():
            with open(root / f"{name}.log", "wb") as log:
                processes.append(
                    subprocess.Popen(
                        [spark_class, *args],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        deadline = time.monotonic() + 120
        while True:
            dead = [p.args[1] for p in processes if p.poll() is not None]
            assert not dead, f"{dead} exited: see {root}/*.log"
            try:
                if cluster.state()["aliveworkers"] == 1:
                    break
            except OSError:
                pass  # the master's web UI is not up yet
            assert time.monotonic() < deadline, f"no worker registered within 120 s: see {root}/*.log"
            time.sleep(1)
        yield cluster
    finally:
        for process in reversed(processes):
            _stop(process)


def _airflow_env(home: Path, pipelines: Path, cluster_url: str) -> dict[str, str]:
    env = {
        **_spark_env(home),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "LAKEJOIN_PIPELINES_DIR": str(pipelines),
        "AIRFLOW_CONN_SPARK_DEFAULT": cluster_url,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # spark-submit, as in a venv
        "GX_ANALYTICS_ENABLED": "False",
    }
    for name in ("LAKEJOIN_SPARK_MASTER", "LAKEJOIN_SPARK_REMOTE"):
        env.pop(name, None)
    return env


def _submit_spec(lake) -> PipelineSpec:  # noqa: ANN001
    return lake.spec("left", extra="spark: {run: submit, conn_id: spark_default}\n")


@pytest.mark.parametrize("resolved", [True, False], ids=["jars", "packages"])
def test_a_submit_spec_makes_spark_submit_tasks(tmp_path, resolved):
    """The task is a SparkSubmitOperator on the spec's connection, wired like the in-process
    task, that ships the jar files resolved at install (a quiet driver, no Ivy at its start), or
    Delta's packages where they were never resolved; parsing the DAG still imports no Spark."""
    lake = Lakehouse(None, tmp_path)  # only its spec: no tables, no Spark
    _submit_spec(lake)
    env = _airflow_env(tmp_path / "home", lake.root, "spark://127.0.0.1:7077")
    if resolved:
        assert jar_files(), (
            "Delta's jars were never resolved: run `make install` (python -m lakejoin.delta.jars)"
        )
    else:
        env["LAKEJOIN_JARS"] = str(tmp_path / "never-resolved")
    probe = (
        "import json, sys\n"
        "from airflow.dag_processing.dagbag import DagBag\n"
        f"bag = DagBag(dag_folder={str(REPO / 'dags')!r})\n"
        "assert not bag.import_errors, bag.import_errors\n"
        "task = bag.dags['lakejoin_shop'].get_task('display_products')\n"
        "print(json.dumps({'kind': type(task).__name__, 'conn_id': task._conn_id,\n"
        "    'trigger_rule': task.trigger_rule.value, 'jars': task.jars, 'packages': task.packages,\n"
        "    'application': task.application, 'args': task.application_args, 'conf': task.conf,\n"
        "    'imported': [m for m in ('pyspark', 'delta', 'great_expectations') if m in sys.modules]}))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    task = json.loads(result.stdout.strip().splitlines()[-1])
    assert (task["kind"], task["conn_id"], task["trigger_rule"]) == (
        "SparkSubmitOperator",
        "spark_default",
        "none_failed",
    )
    assert task["application"] == str(REPO / "spark_jobs" / "lakejoin" / "airflow" / "submit.py")
    assert task["args"] == [str(lake.root / "shop.yaml"), "display_products"]
    assert task["conf"]["spark.pyspark.python"] == sys.executable
    assert {"spark.sql.catalog.spark_catalog", "spark.sql.extensions"} <= set(task["conf"])
    if resolved:
        assert task["jars"].split(",") == jar_files() and task["packages"] is None
        assert task["conf"]["spark.driver.extraJavaOptions"] == f"-Dlog4j2.configurationFile=file:{LOG4J}"
    else:
        assert task["jars"] is None and task["packages"] == delta_package()
        assert "spark.driver.extraJavaOptions" not in task["conf"]
    assert task["imported"] == []


def _dags_test(env: dict[str, str], log: Path) -> str:
    """`airflow dags test lakejoin_shop`; its output (the task's log among it)."""
    airflow = str(BIN / "airflow")
    with open(log, "w") as out:
        result = subprocess.run(
            [airflow, "dags", "test", "lakejoin_shop"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    output = log.read_text()
    assert result.returncode == 0, output[-5000:]
    return output


def _batch_result(output: str) -> dict:
    lines = [line for line in output.splitlines() if "lakejoin-batch {" in line]
    assert len(lines) == 1, output[-5000:]
    # Airflow's log line goes on after the JSON (the logger's name): decode the JSON alone.
    return json.JSONDecoder().raw_decode(lines[0].split("lakejoin-batch ", 1)[1])[0]


def test_batches_run_on_the_cluster(cluster, lake, tmp_path):
    """DAG runs spark-submit batches to the cluster: a first full load, then an incremental
    batch after source changes, each output equal to the from-scratch join. (A failing batch
    failing its task is test_dags' test; through spark-submit it only adds the exit status, and
    a third cluster run cost this suite 3 minutes.)"""
    lake.create("merchants", MERCHANTS, [("m1", "Acme", "a.png"), ("m2", "Bolt", "b.png")])
    lake.create(
        "products", PRODUCTS, [("p1", "pen", 1.0, "m1"), ("p2", "cup", 2.0, "m2"), ("p3", "lid", 3.0, "m9")]
    )
    spec = _submit_spec(lake)
    env = _airflow_env(tmp_path / "home", lake.root, cluster.url)
    subprocess.run([str(BIN / "airflow"), "db", "migrate"], check=True, capture_output=True, env=env)

    first = _dags_test(env, tmp_path / "first.log")
    assert f"display_products: Spark 4.1.1 on {cluster.url}" in first
    command = next(line for line in first.splitlines() if "Spark-Submit cmd:" in line)
    assert " --jars " in command and " --packages " not in command, command
    # No Ivy resolution at the start, and the driver logs at WARN (lakejoin/delta/log4j2.properties).
    assert ":: resolving dependencies ::" not in first and " INFO SparkContext: " not in first
    assert "lakejoin from " in first and ".zip/lakejoin" in first.split("lakejoin from ", 1)[1].split()[0]
    assert _batch_result(first)["outcome"] == "committed"
    assert lake.output(spec) == lake.expected(spec)
    assert [app["state"] for app in cluster.completed_apps(APP)] == ["FINISHED"]

    lake.upsert("merchants", "merchant_id", [("m1", "Acme Inc", "a2.png")])
    lake.upsert("products", "product_id", [("p2", "cup", 2.5, "m1"), ("p4", "hat", 4.0, "m2")])
    lake.delete("products", "product_id", ["p3"])
    second = _dags_test(env, tmp_path / "second.log")
    result = _batch_result(second)
    assert (result["outcome"], result["batch_id"]) == ("committed", 2)
    record = batch_log(spec).last_committed("display_products")
    assert record.mode is BatchMode.INCREMENTAL
    assert lake.output(spec) == lake.expected(spec)
    assert [r["display_name"] for r in lake.output(spec)] == ["Acme Inc", "Acme Inc", "Bolt"]
    assert [app["state"] for app in cluster.completed_apps(APP)] == ["FINISHED", "FINISHED"]
    # The executors received the package zip (--py-files) and the jar files resolved at install
    # (--jars), from the driver: nothing was resolved, on either side.
    shipped = {p.name for p in cluster.work.glob("app-*/*/*") if p.suffix in (".zip", ".jar")}
    assert any(name.startswith("lakejoin-") for name in shipped), shipped
    assert {Path(f).name for f in jar_files()} <= shipped
