"""docker-compose.yaml is valid for Compose, runs what docs/containers.md says it runs, and is safe as
shipped: no secret in the file (each is a required variable, from the `.env` that
scripts/compose-env.sh writes), every published port on 127.0.0.1, the Spark master's 7077 not
published and its RPC authenticated.

Marked `tools` on top of `unit`: it needs no JVM but docker-compose, which `make test` installs
and `make test-fast` (`-m "unit and not tools"`) does not, so that a fresh clone's fast run passes
with Python alone."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.unit, pytest.mark.tools]

REPO = Path(__file__).resolve().parents[2]
SECRETS = (
    "AIRFLOW_JWT_SECRET",
    "AIRFLOW_API_SECRET_KEY",
    "AIRFLOW_FERNET_KEY",
    "POSTGRES_PASSWORD",
    "SPARK_AUTH_SECRET",
)
AIRFLOW = ("airflow-init", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor")
REQUIRED = re.compile(r"\$\{\w+:\?[^}]+\}")  # `${NAME:?message}`: Compose refuses to start without it
VALUE = r"(\$\{[^}]*\}|[^@\s]+)"  # a variable (its message has spaces), or a literal
# A password in a URL (`://user:PASSWORD@`), a `-D...secret=VALUE` system property.
EMBEDDED = re.compile(rf"://[^:/@\s]+:{VALUE}@|-D\S*(?:secret|password)\S*={VALUE}", re.I)


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


def run_config(env_file: Path) -> subprocess.CompletedProcess[str]:
    """`config` with the variables of `env_file` alone (not ./.env, nor this shell's)."""
    env = {k: v for k, v in os.environ.items() if k not in SECRETS}
    return subprocess.run(
        [*compose_command(), "--env-file", str(env_file), "-f", str(REPO / "docker-compose.yaml"), "config"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
    )


def compose_config(env_file: Path) -> str:
    """docker-compose.yaml as Compose resolves it (YAML), after checking that it is valid."""
    result = run_config(env_file)
    assert result.returncode == 0, result.stderr
    return result.stdout


def generate(env_file: Path) -> dict[str, str]:
    """scripts/compose-env.sh's secrets in `env_file`, as it leaves the file."""
    subprocess.run([str(REPO / "scripts" / "compose-env.sh"), str(env_file)], check=True, capture_output=True)
    lines = env_file.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


@pytest.fixture(scope="module")
def env_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway `.env` of fresh secrets."""
    file = tmp_path_factory.mktemp("compose") / ".env"
    generate(file)
    return file


def test_compose_file_validates_and_wires_airflow_postgres_and_spark(env_file):
    config = yaml.safe_load(compose_config(env_file))
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


def test_every_spark_container_runs_the_image_that_resolved_deltas_jars_at_build(env_file):
    """Delta's jars are resolved once, when the image is built, after lakejoin is installed
    (`python -m lakejoin.delta.jars`); Airflow and the Spark master and worker all run that image, and
    nothing asks for packages (an Ivy resolution, a registry) when a container runs."""
    text = compose_config(env_file)
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


def test_the_file_holds_no_secret_only_required_variables():
    """Every secret of the file is `${NAME:?...}`: an environment variable named like a secret,
    a password in a URL, a `-D...secret=` system property."""
    raw = yaml.safe_load((REPO / "docker-compose.yaml").read_text())
    checked = []
    for name, service in raw["services"].items():
        for key, value in (service.get("environment") or {}).items():
            where = f"{name}: {key}"
            if re.search(r"SECRET|PASSWORD|FERNET|TOKEN|_KEY$", key):
                assert REQUIRED.fullmatch(str(value)), where
                checked.append(where)
            for found in EMBEDDED.finditer(str(value)):
                assert REQUIRED.fullmatch(found[1] or found[2]), where
                checked.append(where)
    # each Airflow container's three secrets, database password and Spark secret; Postgres'
    # password; the Spark master's and worker's secret
    assert len(checked) == 5 * len(AIRFLOW) + 1 + 2, checked


def test_without_the_env_file_compose_refuses_and_says_how_to_make_it(tmp_path):
    empty = tmp_path / "empty.env"
    empty.write_text("")
    result = run_config(empty)
    assert result.returncode != 0 and "scripts/compose-env.sh" in result.stderr, result.stderr


def test_the_generated_secrets_reach_every_container_that_needs_them(env_file):
    """One value per secret, shared by the components that must agree (Airflow's JWT secret by
    the api-server and the scheduler; the Spark secret by the master, the worker and the drivers)."""
    from cryptography.fernet import Fernet

    secrets = dict(generate(env_file))
    assert set(SECRETS) <= set(secrets) and len({secrets[s] for s in SECRETS}) == len(SECRETS)
    assert all(len(secrets[s]) >= 43 for s in SECRETS)  # 32 random bytes, in hex or base64
    Fernet(secrets["AIRFLOW_FERNET_KEY"])  # Airflow's key: URL-safe base64 of 32 bytes
    services = yaml.safe_load(compose_config(env_file))["services"]
    spark = secrets["SPARK_AUTH_SECRET"]
    for name in AIRFLOW:
        env = services[name]["environment"]
        assert env["AIRFLOW__API_AUTH__JWT_SECRET"] == secrets["AIRFLOW_JWT_SECRET"], name
        assert env["AIRFLOW__API__SECRET_KEY"] == secrets["AIRFLOW_API_SECRET_KEY"], name
        assert env["AIRFLOW__CORE__FERNET_KEY"] == secrets["AIRFLOW_FERNET_KEY"], name
        database = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        assert f"airflow:{secrets['POSTGRES_PASSWORD']}@postgres/" in database, name
        options = env["SPARK_SUBMIT_OPTS"].split()
        assert {"-Dspark.authenticate=true", f"-Dspark.authenticate.secret={spark}"} <= set(options), name
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"] == secrets["POSTGRES_PASSWORD"]
    for name in ("spark-master", "spark-worker"):
        env = services[name]["environment"]
        assert env["_SPARK_AUTH_SECRET"] == spark, name  # Spark's own variable for a daemon's secret
        assert "-Dspark.authenticate=true" in env["SPARK_DAEMON_JAVA_OPTS"].split(), name


def published(service: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(host address, host port, container port) of each published port, in Compose v2's long
    form or v1's `[HOST:][PUBLISHED:]TARGET[/PROTOCOL]` (no host address: every interface)."""
    ports = []
    for port in service.get("ports", []):
        if isinstance(port, dict):
            ports.append((port.get("host_ip", ""), str(port.get("published", "")), int(port["target"])))
            continue
        parts = str(port).split("/")[0].split(":")
        host, host_port, target = ["", "", *parts][-3:]
        ports.append((host, host_port, int(target)))
    return ports


def test_published_ports_are_bound_to_loopback_and_the_spark_master_is_not_published(env_file):
    services = yaml.safe_load(compose_config(env_file))["services"]
    ports = {name: published(service) for name, service in services.items()}
    assert ("127.0.0.1", "8080", 8080) in ports["airflow-apiserver"]
    for name, bound in ports.items():
        for host, _, target in bound:
            assert host == "127.0.0.1", (name, target)
            assert target != 7077, name


def test_the_worker_writes_the_lakehouse_and_the_master_does_not_see_it(env_file):
    """The executors a driver starts on the worker write the Delta tables' data files (the driver
    commits the log), so the worker's mount is writable; Spark's authentication keeps anyone
    without the secret from starting them."""
    services = yaml.safe_load(compose_config(env_file))["services"]

    def lakehouse(name: str) -> list[Any]:
        return [v for v in services[name].get("volumes", []) if "/opt/lakejoin/lakehouse" in str(v)]

    (mount,) = lakehouse("spark-worker")
    read_only = mount.get("read_only", False) if isinstance(mount, dict) else mount.endswith(":ro")
    assert not read_only
    assert not lakehouse("spark-master")


def test_compose_env_keeps_what_the_file_has_and_adds_what_it_lacks(tmp_path):
    file = tmp_path / ".env"
    file.write_text("OPENLINEAGE_URL=http://marquez:5000\nPOSTGRES_PASSWORD=kept")  # no last newline
    first = generate(file)
    assert first["OPENLINEAGE_URL"] == "http://marquez:5000" and first["POSTGRES_PASSWORD"] == "kept"
    assert set(SECRETS) <= set(first)
    text = file.read_text()
    assert generate(file) == first and file.read_text() == text
    assert file.stat().st_mode & 0o077 == 0  # the owner's alone
