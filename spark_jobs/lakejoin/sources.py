"""Reading source tables at pinned versions, through Delta's own APIs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakejoin.errors import ChangeFeedMissingError, SourceError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def delta_table(spark: SparkSession, path: str, *, role: str):  # noqa: ANN201 - DeltaTable
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        raise SourceError(
            f"no Delta table at {path}",
            where=role,
            fix="check the path in the spec, or create the table with Delta before running",
        )
    return DeltaTable.forPath(spark, path)


def latest_version(spark: SparkSession, path: str, *, role: str) -> int:
    """The newest committed version of the Delta table at `path`."""
    history = delta_table(spark, path, role=role).history(1).select("version").first()
    assert history is not None
    return int(history["version"])


def require_change_feed(spark: SparkSession, path: str, *, role: str) -> None:
    """Fail with a fix when the table does not record a Change Data Feed."""
    detail = delta_table(spark, path, role=role).detail().select("properties").first()
    properties = (detail["properties"] if detail else None) or {}
    if str(properties.get("delta.enableChangeDataFeed", "false")).lower() != "true":
        raise ChangeFeedMissingError(
            f"table {path} has no Change Data Feed, so its changes cannot be read incrementally",
            where=role,
            fix=(
                f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES "
                "(delta.enableChangeDataFeed = true), then run this view with --full-refresh once"
            ),
        )


def snapshot(spark: SparkSession, path: str, version: int) -> DataFrame:
    """The table as it was at `version`."""
    return spark.read.format("delta").option("versionAsOf", version).load(path)


def column_types(spark: SparkSession, path: str, version: int, *, role: str) -> dict[str, str]:
    """Column name -> Spark type of the table at `version`."""
    delta_table(spark, path, role=role)
    schema = snapshot(spark, path, version).schema
    return {f.name: f.dataType.simpleString() for f in schema.fields}
