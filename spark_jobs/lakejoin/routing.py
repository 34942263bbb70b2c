"""Routing indexes: right key -> left keys, the subscription store of KIP-213.

A routing index holds one row per left key: the left key, and one route column per foreign key
the view follows (fk_join: one, `RIGHT_KEY`; enrich: one per dimension, in one table). A row
exists while any of its routes is not null. A batch reads the index at the version its plan
pinned, and updates it afterwards with one MERGE, however many foreign keys it routes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from lakejoin.key_ranges import Keys

RIGHT_KEY = "right_key"
LEFT_KEY = "left_key"


def routes(left_rows: DataFrame, left_key: str, fks: Mapping[str, str]) -> DataFrame:
    """The routes of some left rows: `LEFT_KEY`, then each route column (`fks` maps a route
    column to the left rows' foreign-key column; null where the fk is null)."""
    from pyspark.sql import functions as F

    return left_rows.select(
        F.col(left_key).alias(LEFT_KEY), *[F.col(fk).alias(route) for route, fk in fks.items()]
    )


def routed_left_keys(
    index: DataFrame,
    changed_right_keys: DataFrame,
    right_key: str,
    route: str = RIGHT_KEY,
    *,
    changed: int | None = None,
) -> DataFrame:
    """The left keys whose `route` column holds any of the changed right keys (column named
    `LEFT_KEY`). With no changed right key the index is not read: a batch of left changes alone
    does not scan it. `changed`, when the caller knows it, is how many right keys changed (it
    saves a job asking)."""
    from pyspark.sql import functions as F

    if changed == 0 or (changed is None and changed_right_keys.isEmpty()):
        return index.select(LEFT_KEY).limit(0)
    return (
        index.join(
            F.broadcast(changed_right_keys.select(F.col(right_key).alias(route))),
            on=route,
            how="left_semi",
        )
        .select(LEFT_KEY)
        .distinct()
    )


def routed_on_driver(
    path: str, version: int, changed_right_keys: Sequence[Any], route: str = RIGHT_KEY, *, most: int
) -> list[Any] | None:
    """`routed_left_keys` for right keys listed on the driver, read there (`lookups`): the left
    keys whose `route` holds any of them, as of `version`. None when delta-rs cannot read the
    index, or when they are more than `most` (a popular right key: take `routed_left_keys`,
    which keeps them on the executors)."""
    import pyarrow.compute as pc

    from lakejoin import lookups

    if not changed_right_keys:
        return []
    rows = lookups.read_keys(path, version, route, changed_right_keys, [LEFT_KEY])
    if rows is None:
        return None
    reached = pc.unique(rows[LEFT_KEY])
    return reached.to_pylist() if len(reached) <= most else None


def ensure_index(
    spark: SparkSession, path: str, left_rows: DataFrame, left_key: str, fks: Mapping[str, str]
) -> None:
    """Create the index if it does not exist, typed after the left rows' key and fk columns."""
    from pyspark.sql.types import StructField, StructType

    from lakejoin.sink import ensure_keyed_table

    types = left_rows.schema
    schema = StructType(
        [StructField(route, types[fk].dataType, True) for route, fk in fks.items()]
        # Nullable in the schema (never null in fact): delta-rs, which writes a batch of few
        # keys, cannot delete rows of a table with a NOT NULL column (driver_merge.py).
        + [StructField(LEFT_KEY, types[left_key].dataType, True)]
    )
    ensure_keyed_table(spark, path, schema)


def _any_route(fks: Mapping[str, str]) -> Column:
    from pyspark.sql import functions as F

    present = F.lit(False)
    for route in fks:
        present = present | F.col(route).isNotNull()
    return present


def refresh_routes(
    spark: SparkSession,
    path: str,
    left_rows: DataFrame,
    affected: DataFrame | None,
    left_key: str,
    fks: Mapping[str, str],
    *,
    known: Keys | None = None,
) -> None:
    """Bring the index at `path` in step with `left_rows`, the current rows of the affected left
    keys (of every left key when `affected` is None): one MERGE by left key. An affected key
    without a row, or whose every fk is null, loses its row. No affected key: nothing is
    read or written. `known`: the affected keys as `key_ranges.materialised` gave them (frame,
    count, range), when the caller has them (it saves asking again)."""
    from dataclasses import replace

    from pyspark.sql import functions as F

    from lakejoin.sink import KEEP, merge_by_key, replace_output

    if affected is not None and (known[1] == 0 if known is not None else affected.isEmpty()):
        return
    columns = [*fks, LEFT_KEY]
    new_routes = routes(left_rows, left_key, fks)
    if affected is not None:
        new_routes = affected.withColumnRenamed(left_key, LEFT_KEY).join(new_routes, on=LEFT_KEY, how="left")
    source = new_routes.withColumn(KEEP, _any_route(fks))
    if affected is None and index_columns(spark, path) not in (None, columns):
        # A full refresh after the routes changed (an enrich dimension added or dropped).
        replace_output(path, source.where(F.col(KEEP)).select(*columns))
        return
    ensure_index(spark, path, left_rows, left_key, fks)
    if affected is None or known is None:
        merge_by_key(spark, path, source, [LEFT_KEY], columns, full=affected is None)
        return
    keys, count, bounds = known
    known = (keys.select(F.col(left_key).alias(LEFT_KEY)), count, replace(bounds, column=LEFT_KEY))
    merge_by_key(spark, path, source, [LEFT_KEY], columns, full=False, known=known)


def index_columns(spark: SparkSession, path: str) -> list[str] | None:
    """The columns of the index at `path` (None: there is no index yet)."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return None
    return DeltaTable.forPath(spark, path).toDF().columns
