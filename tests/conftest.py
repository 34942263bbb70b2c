"""One local SparkSession per test run, and a tiny lakehouse builder for tests."""

from __future__ import annotations

import logging
import os

import pytest

os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
# py4j logs while the interpreter shuts down, after pytest closed its streams.
logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def spark():
    from lakejoin.session import spark_session

    session = spark_session(
        app_name="lakejoin-tests",
        extra={
            "spark.master": "local[2]",
            # One session serves every test of an xdist worker (some 70, hundreds of batches):
            # Spark's default 1 GB heap ran out late in the suite (Java heap space, CI on 8b95b3f).
            "spark.driver.memory": "3g",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.databricks.delta.retentionDurationCheck.enabled": "false",
            "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "2",
        },
    )
    yield session
    session.stop()


@pytest.fixture
def lake(spark, tmp_path):
    from tests.lakehouse import Lakehouse

    return Lakehouse(spark, tmp_path)
