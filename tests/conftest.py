"""One local SparkSession per test run, and a tiny lakehouse builder for tests."""

from __future__ import annotations

import json
import logging
import os

import pytest

os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
# py4j logs while the interpreter shuts down, after pytest closed its streams.
logging.getLogger("py4j").setLevel(logging.WARNING)


# The order tests start in (issue 24): the pure tests first, so a broken step fails in seconds,
# then the steps on in-memory frames (seconds each); then the slowest (a Spark cluster, a browser
# against a running Airflow), so that on two workers they overlap the rest instead of running
# alone at the end; then everything else.
ORDER = (("unit",), ("steps",), ("cluster", "browser"))


def pytest_collection_modifyitems(config, items):  # noqa: ANN001, ARG001 - pytest's hook
    def rank(item) -> int:  # noqa: ANN001
        for place, markers in enumerate(ORDER):
            if any(item.get_closest_marker(m) for m in markers):
                return place
        return len(ORDER)

    items.sort(key=rank)  # stable: a module's tests stay together, in their order


# Test tables hold a handful of rows, where a batch's time is Spark's fixed cost per query, not
# data: compiling generated code, planning adaptive stages, scheduling one task per partition.
# These settings change how Spark runs a query, never what it computes, and take a tiny-table
# batch from about 26 s to 16 s on 2 cores (measured session 11, fk_join, five batches).
TINY_DATA = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    "spark.databricks.delta.snapshotPartitions": "1",
    # Delta's VACUUM lists a table's directories in a Spark job of this many tasks (Spark's
    # default: 10,000): 64 s to vacuum a table of three files (session 28, cProfile).
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
}


@pytest.fixture(scope="session")
def spark():
    from lakejoin.delta.session import spark_session

    session = spark_session(
        app_name="lakejoin-tests",
        extra={
            "spark.master": "local[2]",
            # One session serves every test of an xdist worker (some 70, hundreds of batches):
            # Spark's default 1 GB heap ran out late in the suite (Java heap space, CI on 8b95b3f).
            "spark.driver.memory": "3g",
            "spark.databricks.delta.retentionDurationCheck.enabled": "false",
            **TINY_DATA,
        },
    )
    yield session
    session.stop()


@pytest.fixture
def lake(spark, tmp_path):
    from tests.lakehouse import Lakehouse

    return Lakehouse(spark, tmp_path)


@pytest.fixture
def lineage_events(httpserver, monkeypatch):
    """OpenLineage pointed at a real HTTP server through its standard variables; returns a
    function that takes the events received so far."""
    for name in list(os.environ):
        if name.startswith("OPENLINEAGE"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "http")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__URL", httpserver.url_for("/").rstrip("/"))
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__RETRY__TOTAL", "0")
    httpserver.expect_request("/api/v1/lineage", method="POST").respond_with_data("", status=201)
    seen = 0

    def taken() -> list[dict]:
        nonlocal seen
        events = [json.loads(request.get_data()) for request, _ in httpserver.log[seen:]]
        seen = len(httpserver.log)
        return events

    return taken
