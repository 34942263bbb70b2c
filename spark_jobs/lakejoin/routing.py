"""Routing indexes: right key -> left keys, the subscription store of KIP-213.

A routing index holds one row per left key whose foreign key is not null. It is a Delta table
clustered by the right key, so the left keys a right change reaches are found without scanning
the left table. A batch reads it at the version its plan pinned, and updates it afterwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

RIGHT_KEY = "right_key"
LEFT_KEY = "left_key"


def routes(left_rows: DataFrame, left_key: str, fk: str) -> DataFrame:
    """The routes of some left rows: (left_key, right_key), right_key null when fk is null."""
    from pyspark.sql import functions as F

    return left_rows.select(F.col(left_key).alias(LEFT_KEY), F.col(fk).alias(RIGHT_KEY))


def routed_left_keys(index: DataFrame, changed_right_keys: DataFrame, right_key: str) -> DataFrame:
    """The left keys that reference any of the changed right keys (column named `LEFT_KEY`)."""
    from pyspark.sql import functions as F

    return (
        index.join(
            F.broadcast(changed_right_keys.select(F.col(right_key).alias(RIGHT_KEY))),
            on=RIGHT_KEY,
            how="left_semi",
        )
        .select(LEFT_KEY)
        .distinct()
    )


def ensure_index(spark: SparkSession, path: str, left_type: DataType, right_type: DataType) -> None:
    from delta.tables import DeltaTable
    from pyspark.sql.types import StructField, StructType

    schema = StructType([StructField(RIGHT_KEY, right_type, True), StructField(LEFT_KEY, left_type, False)])
    (DeltaTable.createIfNotExists(spark).location(path).addColumns(schema).clusterBy(RIGHT_KEY).execute())


def update_index(spark: SparkSession, path: str, new_routes: DataFrame, *, full: bool) -> None:
    """Bring the routes of the given left keys up to date (all of them when `full`).

    `new_routes` has one row per affected left key; a null right key means "no route".
    """
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    index = DeltaTable.forPath(spark, path)
    target, source = F.col(f"t.{RIGHT_KEY}"), F.col(f"s.{RIGHT_KEY}")
    merge = (
        index.alias("t")
        .merge(new_routes.alias("s"), F.col(f"t.{LEFT_KEY}") == F.col(f"s.{LEFT_KEY}"))
        .whenMatchedDelete(condition=source.isNull())
        .whenMatchedUpdate(condition=~target.eqNullSafe(source), set={RIGHT_KEY: source})
        .whenNotMatchedInsert(
            condition=source.isNotNull(),
            values={RIGHT_KEY: source, LEFT_KEY: F.col(f"s.{LEFT_KEY}")},
        )
    )
    if full:
        merge = merge.whenNotMatchedBySourceDelete()
    merge.execute()


def refresh_routes(
    spark: SparkSession, path: str, left_rows: DataFrame, affected: DataFrame | None, left_key: str, fk: str
) -> None:
    """Bring the index at `path` in step with `left_rows`, the current rows of the affected left
    keys (of every left key when `affected` is None); an affected key without a row loses its
    route."""
    types = left_rows.schema
    ensure_index(spark, path, types[left_key].dataType, types[fk].dataType)
    new_routes = routes(left_rows, left_key, fk)
    if affected is not None:
        new_routes = affected.withColumnRenamed(left_key, LEFT_KEY).join(new_routes, on=LEFT_KEY, how="left")
    update_index(spark, path, new_routes, full=affected is None)
