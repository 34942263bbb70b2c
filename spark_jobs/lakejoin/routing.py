"""Routes: right key -> left keys, the subscriptions of KIP-213.

A route is a left row's key and the foreign key it follows. fk_join and enrich read them from
the pinned left table itself (its key and fk columns), list_join from its composite rows. A
right change reaches the left rows whose route holds its key at the pin; a left row whose fk
moved is a left change, rewritten anyway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


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
    path: str,
    version: int,
    changed_right_keys: Sequence[Any],
    route: str = RIGHT_KEY,
    *,
    most: int,
    left_key: str = LEFT_KEY,
) -> list[Any] | None:
    """`routed_left_keys` for right keys listed on the driver, read there (`lookups`): the
    `left_key` of the rows whose `route` holds any of them, as of `version`, in an index or in
    the left table itself (its fk column as the route). None when delta-rs cannot read the
    table, or when they are more than `most` (a popular right key: take `routed_left_keys`,
    which keeps them on the executors)."""
    import pyarrow.compute as pc

    from lakejoin import lookups

    if not changed_right_keys:
        return []
    rows = lookups.read_keys(path, version, route, changed_right_keys, [left_key])
    if rows is None:
        return None
    reached = pc.unique(rows[left_key])
    return reached.to_pylist() if len(reached) <= most else None
