"""docker-compose.yaml is valid for Compose, and runs what the README says it runs.

Marked `tools`, not `unit`: it needs docker-compose, which `make test` installs and `make
test-fast` does not, so that a fresh clone's fast run passes with Python alone."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.tools

REPO = Path(__file__).resolve().parents[2]


def compose_command() -> list[str]:
    """`docker compose` (the v2 plugin) where the client has it, else Debian's `docker-compose`."""
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.fail(
        "neither `docker compose` nor `docker-compose` is installed, so docker-compose.yaml cannot be "
        "validated; install Debian's docker-compose (`make test` does, through scripts/install-test-tools.sh)"
    )


def compose_config() -> str:
    """docker-compose.yaml as Compose resolves it (YAML), after checking that it is valid."""
    result = subprocess.run(
        [*compose_command(), "-f", str(REPO / "docker-compose.yaml"), "config"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_compose_file_validates_and_wires_airflow_postgres_and_spark():
    config = yaml.safe_load(compose_config())
    services = config["services"]
    assert {
        "postgres",
        "airflow-init",
        "airflow-apiserver",
        "airflow-scheduler",
        "airflow-dag-processor",
        "spark-master",
        "spark-worker",
    } <= set(services)
    for name in ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor"):
        env = services[name]["environment"]
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql")
        assert env["AIRFLOW_CONN_SPARK_DEFAULT"] == "spark://spark-master:7077"
        mounts = {
            str(v["target"] if isinstance(v, dict) else v.split(":")[1]) for v in services[name]["volumes"]
        }
        assert {"/opt/lakejoin/dags", "/opt/lakejoin/pipelines", "/opt/lakejoin/lakehouse"} <= mounts
    worker_mounts = services["spark-worker"]["volumes"]
    assert any("/opt/lakejoin/lakehouse" in str(v) for v in worker_mounts)


def test_every_spark_container_runs_the_image_that_resolved_deltas_jars_at_build():
    """Delta's jars are resolved once, when the image is built, after lakejoin is installed
    (`python -m lakejoin.delta.jars`); Airflow and the Spark master and worker all run that image, and
    nothing asks for packages (an Ivy resolution, a registry) when a container runs."""
    text = compose_config()
    services = yaml.safe_load(text)["services"]
    lakejoin = {name: service for name, service in services.items() if name != "postgres"}
    assert {"airflow-scheduler", "spark-master", "spark-worker"} <= set(lakejoin)
    for name, service in lakejoin.items():
        assert service["image"] == "lakejoin-airflow:local", name
        assert service["build"]["dockerfile"] == "docker/airflow.Dockerfile", name
    dockerfile = (REPO / "docker" / "airflow.Dockerfile").read_text()
    steps = [line for line in dockerfile.splitlines() if line.startswith("RUN ")]
    installs = [i for i, step in enumerate(steps) if "pip install" in step and "/opt/lakejoin" in step]
    resolves = [i for i, step in enumerate(steps) if step.startswith("RUN python -m lakejoin.delta.jars")]
    assert installs and resolves and installs[-1] < resolves[0], steps
    for packages in ("--packages", "spark.jars.packages", "configure_spark_with_delta_pip"):
        assert packages not in text and packages not in dockerfile, packages
