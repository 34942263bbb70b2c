"""The reports plugin (plugins/lakejoin_reports.py) in a test: loaded from its file as Airflow
loads it, its FastAPI app mounted as the api-server mounts it, and a logged-in user who may read
every lakejoin DAG (Airflow's `get_user` and the DAG check replaced, as Airflow would answer
them for such a user). tests/delta/test_reports.py and tests/e2e/test_explain.py ask it."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from fastapi.testclient import TestClient

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "lakejoin_reports.py"


def load_plugin(monkeypatch: pytest.MonkeyPatch, pipelines: Path, airflow_home: Path) -> ModuleType:
    """A fresh copy of the plugin's module, serving the specs in `pipelines`."""
    monkeypatch.setenv("AIRFLOW_HOME", os.environ.get("AIRFLOW_HOME", str(airflow_home)))
    monkeypatch.setenv("LAKEJOIN_PIPELINES_DIR", str(pipelines))
    module_spec = importlib.util.spec_from_file_location("lakejoin_reports", PLUGIN)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def api_server(plugin: ModuleType) -> TestClient:
    """A client of the plugin's apps, mounted as Airflow's api-server mounts a plugin's app."""
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    server = FastAPI()
    for app in plugin.LakejoinReportsPlugin.fastapi_apps:
        server.mount(app["url_prefix"], app["app"])
    return TestClient(server)


@contextmanager
def logged_in(plugin: ModuleType, user: str = "someone") -> Iterator[None]:
    """Requests made inside come from `user`, logged in, who may read the lakejoin DAGs."""
    from airflow.api_fastapi.core_api.security import get_user

    plugin.app.dependency_overrides[get_user] = lambda: user
    plugin.can_read_dag = lambda dag_id, user: dag_id.startswith("lakejoin_")
    try:
        yield
    finally:
        plugin.app.dependency_overrides.clear()
