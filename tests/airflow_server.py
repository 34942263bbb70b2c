"""A real Airflow for tests: api-server, scheduler and dag-processor on loopback, own home.

LocalExecutor on SQLite (Airflow 3 has no SequentialExecutor and allows LocalExecutor on
SQLite), the simple auth manager with one admin user whose password we choose, and the repo's
`dags/` and `plugins/`. Every process is started in a session of its own, so stopping it also
stops what it started: executor workers, task processes and their Spark JVMs.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
AIRFLOW = str(Path(sys.executable).parent / "airflow")
COMPONENTS = ("api-server", "scheduler", "dag-processor")
HEALTHY = ("metadatabase", "scheduler", "dag_processor")  # no triggerer: nothing defers
# The last line of a Python traceback, e.g. "sqlalchemy.exc.OperationalError: (...) database is locked".
EXCEPTION_LINE = re.compile(r"^[\w.]*(Error|Exception)\b.*:")
# Three processes write one SQLite file without WAL: a writer waits this long for another's lock
# (Python's sqlite3 gives up after 5 s, too short on a loaded 2-core machine).
SQLITE_BUSY_SECONDS = 60


class AirflowStartError(Exception):
    pass


@dataclass
class AirflowServer:
    url: str
    root: Path
    processes: dict[str, subprocess.Popen]

    def logs(self, lines: int = 40) -> str:
        """The tail of every component's log and of the task logs, for failure messages."""
        files = [self.root / "logs" / f"{name}.log" for name in self.processes]
        files += sorted((self.root / "home" / "logs").glob("dag_id=*/**/*.log"))
        parts = []
        for file in files:
            text = file.read_text(errors="replace").splitlines() if file.exists() else ["(no log)"]
            # A long traceback pushes its own last line out of a short tail: name it first.
            errors = [line for line in text if EXCEPTION_LINE.match(line)][-5:]
            header = f"--- {file.relative_to(self.root)} (last {lines} lines)"
            parts.append("\n".join([*(f"!!! {line}" for line in errors), header, *text[-lines:]]))
        return "\n".join(parts)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def airflow_env(
    root: Path, port: int, *, pipelines: Path, user: str, password: str, dags: Path = REPO / "dags"
) -> dict[str, str]:
    passwords = root / "passwords.json"
    passwords.write_text(json.dumps({user: password}))
    url = f"http://127.0.0.1:{port}"
    # Airflow reads its DB driver's connect arguments from an importable name.
    settings = root / "settings"
    settings.mkdir(exist_ok=True)
    (settings / "lakejoin_test_db.py").write_text(f"CONNECT_ARGS = {{'timeout': {SQLITE_BUSY_SECONDS}}}\n")
    python_path = os.pathsep.join(filter(None, [str(settings), os.environ.get("PYTHONPATH")]))
    return {
        **os.environ,
        "PYTHONPATH": python_path,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": "lakejoin_test_db.CONNECT_ARGS",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC": "lakejoin_test_db.CONNECT_ARGS",
        "AIRFLOW_HOME": str(root / "home"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{url}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{user}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(64),
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(32),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": url,
        "AIRFLOW__API__WORKERS": "1",
        # The scheduler serves task logs on this port (8793 by default, on every interface).
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "LAKEJOIN_PIPELINES_DIR": str(pipelines),
        "GX_ANALYTICS_ENABLED": "False",
    }


def start_airflow(
    root: Path,
    *,
    pipelines: Path,
    user: str,
    password: str,
    startup_seconds: float = 300,
    dags: Path = REPO / "dags",
) -> AirflowServer:
    """Migrate a fresh metadata DB, start the components, and wait until they report healthy."""
    port = free_port()
    env = airflow_env(root, port, pipelines=pipelines, user=user, password=password, dags=dags)
    migrate = subprocess.run([AIRFLOW, "db", "migrate"], env=env, capture_output=True, text=True)
    if migrate.returncode != 0:
        raise AirflowStartError(f"airflow db migrate failed:\n{migrate.stdout[-3000:]}{migrate.stderr}")
    (root / "logs").mkdir(exist_ok=True)
    server = AirflowServer(f"http://127.0.0.1:{port}", root, {})
    try:
        for name in COMPONENTS:
            with open(root / "logs" / f"{name}.log", "wb") as log:
                server.processes[name] = subprocess.Popen(
                    [AIRFLOW, name],
                    env=env,
                    cwd=root,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
        wait_healthy(server, startup_seconds)
    except BaseException:
        stop_airflow(server)
        raise
    return server


def wait_healthy(server: AirflowServer, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    last = "no answer"
    while time.monotonic() < deadline:
        for name, process in server.processes.items():
            if process.poll() is not None:
                raise AirflowStartError(f"airflow {name} exited with {process.returncode}\n{server.logs()}")
        try:
            with urllib.request.urlopen(f"{server.url}/api/v2/monitor/health", timeout=5) as answer:
                health = json.load(answer)
            last = json.dumps(health)
            if all(health[part]["status"] == "healthy" for part in HEALTHY):
                return
        except (OSError, urllib.error.URLError, KeyError) as error:
            last = repr(error)
        time.sleep(1)
    raise AirflowStartError(f"Airflow not healthy after {seconds} s: {last}\n{server.logs()}")


def stop_airflow(server: AirflowServer) -> dict[str, list[int]]:
    """SIGTERM each component's process group, then SIGKILL whatever is left in its session;
    return the processes that survived both, by component."""
    processes = server.processes
    for process in processes.values():
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    for process in processes.values():
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
    for process in processes.values():
        for pid in session_processes(process.pid):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait()
    time.sleep(1)
    return {name: pids for name, p in processes.items() if (pids := session_processes(p.pid))}


def session_processes(sid: int) -> list[int]:
    """The live processes of a session: a component and all it started. Not its process group:
    Airflow puts each task process (and so its Spark JVM) in a group of its own."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with suppress(OSError):
            state, _ppid, _pgrp, session = stat.read_text().rsplit(")", 1)[1].split()[:4]
            if int(session) == sid and state != "Z":
                members.append(int(stat.parent.name))
    return members
