"""docker-compose.yaml is valid for Compose, and runs what the README says it runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent


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


def test_compose_file_validates_and_wires_airflow_postgres_and_spark():
    result = subprocess.run(
        [*compose_command(), "-f", str(REPO / "docker-compose.yaml"), "config"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(result.stdout)
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
