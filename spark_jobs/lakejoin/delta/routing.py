"""Routes: right key -> left keys, the subscriptions of KIP-213.

A route is a left row's key and the foreign key it follows. Every view kind reads them from
the pinned left table itself: fk_join and enrich from its key and fk columns, list_join from
its key and list column (each element a route). A right change reaches the left rows whose
route holds its key at the pin (a key of several columns: in every column); a left row whose
fk moved, or whose list changed, is a left change, rewritten anyway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lakejoin.spec.model import Columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


RIGHT_KEY = "right_key"
LEFT_KEY = "left_key"


def key_columns(base: str, width: int) -> list[str]:
    """The names a route frame gives a key's columns: `base` for a key of one column,
    `base_0`, `base_1`, ... for a key of several."""
    return [base] if width == 1 else [f"{base}_{i}" for i in range(width)]


def routes(left_rows: DataFrame, left_key: Columns, fks: Mapping[str, Columns]) -> DataFrame:
    """The routes of some left rows: the left key (as `key_columns(LEFT_KEY, ...)`), then each
    route (`fks` maps a route's name to the left rows' foreign-key columns, in the order of the
    key they point at; a route of several columns is `key_columns(route, ...)`)."""
    from pyspark.sql import functions as F

    return left_rows.select(
        *[F.col(c).alias(n) for c, n in zip(left_key, key_columns(LEFT_KEY, len(left_key)), strict=True)],
        *[
            F.col(c).alias(n)
            for route, fk in fks.items()
            for c, n in zip(fk, key_columns(route, len(fk)), strict=True)
        ],
    )


def routed_left_keys(
    index: DataFrame,
    changed_right_keys: DataFrame,
    right_key: Columns,
    route: str = RIGHT_KEY,
    *,
    left_key: Columns,
    changed: int | None = None,
) -> DataFrame:
    """The left keys (named as `left_key`) whose `route` holds any of the changed right keys
    (a route with a null in any column holds none). With no changed right key the index is not
    read: a batch of left changes alone does not scan it. `changed`, when the caller knows it,
    is how many right keys changed (it saves a job asking)."""
    from pyspark.sql import functions as F

    named = [F.col(n).alias(c) for n, c in zip(key_columns(LEFT_KEY, len(left_key)), left_key, strict=True)]
    if changed == 0 or (changed is None and changed_right_keys.isEmpty()):
        return index.select(*named).limit(0)
    on = key_columns(route, len(right_key))
    wanted = changed_right_keys.select(*[F.col(c).alias(n) for c, n in zip(right_key, on, strict=True)])
    return index.join(F.broadcast(wanted), on=on, how="left_semi").select(*named).distinct()


def routed_on_driver(
    path: str,
    version: int,
    changed_right_keys: Sequence[tuple[Any, ...]],
    route: Columns,
    *,
    most: int,
    left_key: Columns,
) -> list[tuple[Any, ...]] | None:
    """`routed_left_keys` for right keys listed on the driver, read there (`lookups`): the
    `left_key` of the rows whose `route` columns hold any of them, as of `version`, in the left
    table itself (its fk columns as the route). None when delta-rs cannot read the table, or
    when they are more than `most` (a popular right key: take `routed_left_keys`, which keeps
    them on the executors)."""
    from lakejoin.delta import lookups

    if not changed_right_keys:
        return []
    # Rows past `most` are not read: the reach is then Spark's to find, whatever it holds.
    columns = list(dict.fromkeys(left_key))
    rows = lookups.read_keys(path, version, route, changed_right_keys, columns, most_rows=most)
    if rows is None or rows.num_rows > most:
        return None
    reached = list(dict.fromkeys(lookups.key_tuples(rows, left_key)))
    return reached if len(reached) <= most else None


def holding_on_driver(
    path: str,
    version: int,
    changed_right_keys: Sequence[tuple[Any, ...]],
    list_column: str,
    *,
    most: int,
    left_key: Columns,
    element_fields: Columns = (),
) -> list[tuple[Any, ...]] | None:
    """`routed_on_driver` for a list of foreign keys (list_join): the `left_key` of the rows of
    the table at `path`, as of `version`, whose `list_column` holds any of the changed right
    keys (each element the right key's value, or with `element_fields`, the fields of a
    composite right key, a struct). One DataFusion query unnests the columns, streamed a record
    batch at a time. File statistics cannot skip on list elements, so the columns are read
    whole, once: 0.03-0.14 s at 2 M lists (docs/bench/state_choice.md). None as
    `routed_on_driver`."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable, QueryBuilder

    from lakejoin.delta import lookups
    from lakejoin.delta.sql_text import literal, quoted, tuple_literal

    if not changed_right_keys:
        return []
    table = DeltaTable(path, version=version)
    if not lookups.readable(table):
        return None
    keys = ", ".join(f"{quoted(c)} AS k{i}" for i, c in enumerate(left_key))
    names = [f"k{i}" for i in range(len(left_key))]
    unnested = f"SELECT {keys}, unnest({quoted(list_column)}) AS e FROM t"
    reached: set[tuple[Any, ...]] = set()
    if element_fields:
        # A struct element: its fields as columns, matched by a tuple IN-list in DataFusion (a
        # tuple of struct fields is not taken there, so the fields are named first), a chunk of
        # keys at a time as `lookups.read_keys` does.
        fields = ", ".join(f"e[{literal(f)}] AS e{i}" for i, f in enumerate(element_fields))
        parts = ", ".join(f"e{i}" for i in range(len(element_fields)))
        distinct = sorted(set(changed_right_keys))
        for start in range(0, len(distinct), lookups.CHUNK):
            tuples = ", ".join(
                "(" + ", ".join(tuple_literal(v) for v in k) + ")"
                for k in distinct[start : start + lookups.CHUNK]
            )
            sql = (
                f"SELECT DISTINCT {', '.join(names)} FROM (SELECT {', '.join(names)}, {fields} FROM "
                f"({unnested})) WHERE ({parts}) IN ({tuples})"
            )
            found = pa.table(QueryBuilder().register("t", table).execute(sql).read_all())
            reached.update(lookups.key_tuples(found, names))
            if len(reached) > most:
                return None
        return sorted(reached)
    wanted: pa.Array | None = None
    # delta-rs answers with arro3 objects: read them as pyarrow's through the Arrow stream.
    for batch in pa.RecordBatchReader.from_stream(QueryBuilder().register("t", table).execute(unnested)):
        elements = _plain(batch.column("e"))
        if wanted is None:  # the changed keys, typed as the elements
            wanted = pa.array(sorted({k[0] for k in changed_right_keys}), type=elements.type)
        hit = pc.is_in(elements, value_set=wanted)
        columns = [pc.filter(_plain(batch.column(n)), hit).to_pylist() for n in names]
        reached.update(zip(*columns, strict=True))
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
