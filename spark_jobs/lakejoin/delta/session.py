"""A SparkSession with Delta Lake configured.

Local Spark (`local[*]`) is the default. A Spark master URL or a Spark Connect address comes
from the environment (`LAKEJOIN_SPARK_MASTER`, `LAKEJOIN_SPARK_REMOTE`) or the spec's `spark:`
block, in that order. In an application spark-submit started (`lakejoin.airflow.submit`), spark-submit's
master, app name and `--conf` settings stand. Every table lakejoin creates has its Change Data
Feed on, through Delta's session default for new tables.

>>> spark = spark_session()                                  # doctest: +SKIP
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakejoin.spec.model import SparkSettings

# Set by `lakejoin.airflow.submit`: the session is spark-submit's, with its master, name and jars.
SUBMITTED = "LAKEJOIN_SPARK_SUBMITTED"
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
    # Views run at once each get a pool (engine/pipeline.py); FAIR shares the cores between them.
    "spark.scheduler.mode": "FAIR",
}


def spark_session(
    settings: SparkSettings | None = None,
    *,
    app_name: str = "lakejoin",
    extra: dict[str, str] | None = None,
    verbose: bool = False,
) -> SparkSession:
    """Get or create the SparkSession lakejoin runs on. Spark's own log is quiet (WARN while it
    starts, ERROR after) unless `verbose`, which leaves Spark's default (INFO) on."""
    from pyspark.sql import SparkSession

    if os.environ.get(SUBMITTED):
        return _submitted_session(extra)
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
    from lakejoin.delta.jars import LOG4J, jar_files

    files = jar_files()
    if files:  # resolved once at install (lakejoin/delta/jars.py): no Ivy, no registry, a quiet start
        builder = builder.config("spark.jars", ",".join(files))
        if not verbose:
            options = f"-Dlog4j2.configurationFile=file:{LOG4J}"
            builder = builder.config("spark.driver.extraJavaOptions", options)
        session = builder.getOrCreate()
    else:
        from delta import configure_spark_with_delta_pip

        session = configure_spark_with_delta_pip(builder).getOrCreate()
    session.sparkContext.setLogLevel("INFO" if verbose else "ERROR")
    return session


def _submitted_session(extra: dict[str, str] | None) -> SparkSession:
    """The session of an application spark-submit started (`lakejoin.airflow.submit`).

    spark-submit already chose the master and the app name and put Delta's jars on the classpath
    (`--jars`, the files resolved at install; `--packages` where they never were); a builder
    setting would override its `--conf`, so lakejoin's settings only fill in what it left unset.
    """
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    given = SparkConf()
    builder = SparkSession.builder
    for key, value in {**DELTA_CONFIG, **LOCAL_CONFIG, **(extra or {})}.items():
        if not given.contains(key):
            builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


if __name__ == "__main__":
    # `python -m lakejoin.delta.session` fetches Delta's jars once (Ivy cache) and proves Delta works.
    spark = spark_session()
    print(f"Spark {spark.version} with Delta is ready (master {spark.sparkContext.master})")
    spark.stop()
