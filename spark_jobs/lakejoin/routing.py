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
    """The left keys that reference any of the changed right keys (column named `LEFT_KEY`).
    With no changed right key the index is not read: a batch of left changes alone does not scan
    it."""
    from pyspark.sql import functions as F

    if changed_right_keys.isEmpty():
        return index.select(LEFT_KEY).limit(0)
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
    from pyspark.sql.types import StructField, StructType

    from lakejoin.sink import ensure_keyed_table

    schema = StructType([StructField(RIGHT_KEY, right_type, True), StructField(LEFT_KEY, left_type, False)])
    ensure_keyed_table(spark, path, schema, [RIGHT_KEY])


def update_index(spark: SparkSession, path: str, new_routes: DataFrame, *, full: bool) -> None:
    """Bring the routes of the given left keys up to date (all of them when `full`).

    `new_routes` has one row per affected left key; a null right key means "no route".
    """
    from pyspark.sql import functions as F

    from lakejoin.sink import KEEP, merge_by_key

    source = new_routes.withColumn(KEEP, F.col(RIGHT_KEY).isNotNull())
    merge_by_key(spark, path, source, [LEFT_KEY], [RIGHT_KEY, LEFT_KEY], full=full)


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
