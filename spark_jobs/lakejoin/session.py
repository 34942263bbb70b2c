"""A SparkSession with Delta Lake configured.

Local Spark (`local[*]`) is the default. A Spark master URL or a Spark Connect address comes
from the environment (`LAKEJOIN_SPARK_MASTER`, `LAKEJOIN_SPARK_REMOTE`) or the spec's `spark:`
block, in that order. Every table lakejoin creates has its Change Data Feed on, through Delta's
session default for new tables.

>>> spark = spark_session()                                  # doctest: +SKIP
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakejoin.spec import SparkSettings

DELTA_CONFIG = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "true",
}
LOCAL_CONFIG = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.adaptive.enabled": "true",
}


def spark_session(
    settings: SparkSettings | None = None,
    *,
    app_name: str = "lakejoin",
    extra: dict[str, str] | None = None,
) -> SparkSession:
    """Get or create the SparkSession lakejoin runs on."""
    from pyspark.sql import SparkSession

    remote = os.environ.get("LAKEJOIN_SPARK_REMOTE") or (settings.remote if settings else None)
    master = os.environ.get("LAKEJOIN_SPARK_MASTER") or (settings.master if settings else None)
    if remote:
        # Spark Connect: the server owns the Delta jars and extensions; only session confs apply.
        session = SparkSession.builder.remote(remote).appName(app_name).getOrCreate()
        session.conf.set("spark.databricks.delta.properties.defaults.enableChangeDataFeed", "true")
        return session
    # Python workers must run the same interpreter as the driver, not whatever `python3` is.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app_name).master(master or "local[*]")
    for key, value in {**DELTA_CONFIG, **LOCAL_CONFIG, **(extra or {})}.items():
        builder = builder.config(key, value)
    if not os.environ.get("LAKEJOIN_SPARK_SUBMITTED"):
        from delta import configure_spark_with_delta_pip

        builder = configure_spark_with_delta_pip(builder)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


if __name__ == "__main__":
    # `python -m lakejoin.session` fetches Delta's jars once (Ivy cache) and proves Delta works.
    spark = spark_session()
    print(f"Spark {spark.version} with Delta is ready (master {spark.sparkContext.master})")
    spark.stop()
