"""Routes: right key -> left keys, the subscriptions of KIP-213.

A route is a left row's key and the foreign key it follows. Every view kind reads them from
the pinned left table itself: fk_join and enrich from its key and fk columns, list_join from
its key and list column (each element a route). A right change reaches the left rows whose
route holds its key at the pin; a left row whose fk moved, or whose list changed, is a left
change, rewritten anyway.
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

    from lakejoin.delta import lookups

    if not changed_right_keys:
        return []
    rows = lookups.read_keys(path, version, route, changed_right_keys, [left_key])
    if rows is None:
        return None
    reached = pc.unique(rows[left_key])
    return reached.to_pylist() if len(reached) <= most else None


def holding_on_driver(
    path: str, version: int, changed_right_keys: Sequence[Any], list_column: str, *, most: int, left_key: str
) -> list[Any] | None:
    """`routed_on_driver` for a list of foreign keys (list_join): the `left_key` of the rows of
    the table at `path`, as of `version`, whose `list_column` holds any of the changed right
    keys. One DataFusion query unnests the two columns, streamed a record batch at a time, and
    each batch is filtered against every changed key at once (Arrow's `is_in`). File statistics
    cannot skip on list elements, so the two columns are read whole, once: 0.03-0.14 s at 2 M
    lists (docs/bench/state_choice.md). None as `routed_on_driver`."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable, QueryBuilder

    from lakejoin.delta import lookups
    from lakejoin.delta.sql_text import quoted

    if not changed_right_keys:
        return []
    table = DeltaTable(path, version=version)
    if not lookups.readable(table):
        return None
    reached: set[Any] = set()
    wanted: pa.Array | None = None
    sql = f"SELECT {quoted(left_key)} AS k, unnest({quoted(list_column)}) AS e FROM t"
    # delta-rs answers with arro3 objects: read them as pyarrow's through the Arrow stream.
    for batch in pa.RecordBatchReader.from_stream(QueryBuilder().register("t", table).execute(sql)):
        elements, keys = _plain(batch.column("e")), _plain(batch.column("k"))
        if wanted is None:  # the changed keys, typed as the elements
            wanted = pa.array(sorted(set(changed_right_keys)), type=elements.type)
        hit = pc.is_in(elements, value_set=wanted)
        reached.update(pc.filter(keys, hit).to_pylist())
        if len(reached) > most:
            return None
    return sorted(reached)


def _plain(column: Any) -> Any:
    """DataFusion's string and binary views as Arrow's large types: pyarrow's `is_in` and
    `filter` have no kernels for the view types."""
    import pyarrow as pa

    if pa.types.is_string_view(column.type):
        return column.cast(pa.large_string())
    if pa.types.is_binary_view(column.type):
        return column.cast(pa.large_binary())
    return column
