"""The rows of a batch's few keys, read on the driver with delta-rs: no Spark job.

A Spark lookup of a few keys (a semi-join with them, a uniqueness check, a local checkpoint)
starts 5-20 Spark jobs whatever the table's size; at 1.5 M rows that held 4-10 s of a tiny
batch (docs/benchmarks.md, protocol version 2). delta-rs answers `key IN (...)` from the
pinned version in 0.04-0.8 s, at 15 M rows too: it skips the files whose statistics exclude the
keys (the literal range helps when the list is long) and reads the rest with deletion vectors
applied. The rows come back as Arrow, typed after the Spark schema, and enter Spark as a local
relation.

It applies to up to `max_keys` keys whose columns are integers, strings or dates, in a table
whose reader features delta-rs reads (deletion vectors included, column mapping not). Elsewhere
the caller takes its Spark lookup.

A key value here is a tuple of the key's column values, one column or several: `(3,)` for
`order_id` 3, `(7, "EU")` for `(tenant_id, region)`. A key of several columns is looked up as
a tuple IN-list, `(a, b) IN ((7, 'EU'), ...)`, never as a concatenation of its parts.

>>> rows = read_keys(path, 12, ("order_id",), [(3,), (5,), (8,)])     # doctest: +SKIP
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lakejoin.spec.model import Columns

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

# Set to "false" to look every key up with Spark.
ENABLED = "spark.lakejoin.lookups.onDriver"
# Up to how many keys a lookup is made on the driver. Measured at 15 M orders (session 32):
# 20 random keys 0.04-1.2 s, 1,000 keys 0.54 s, 5,000 keys 0.84 s, against Spark's 5-20 jobs.
MAX_KEYS = "spark.lakejoin.lookups.maxKeys"
MAX_KEYS_DEFAULT = 20_000
# Keys per query (see `read_keys`).
CHUNK = 5_000
# Reader features delta-rs 1.x applies when it reads (column mapping is left to Spark).
READABLE = {"deletionVectors", "timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"}


def max_keys(spark: SparkSession) -> int:
    """How many keys a driver lookup takes at most (0 when lookups on the driver are off)."""
    if (spark.conf.get(ENABLED, None) or "true").lower() == "false":
        return 0
    return int(spark.conf.get(MAX_KEYS, None) or MAX_KEYS_DEFAULT)


def takes(count: int | None, most: int) -> bool:
    """Whether a driver lookup takes a frame of `count` keys (None: not counted) when it takes
    at most `most` (`max_keys`; 0: lookups on the driver are off)."""
    return count is not None and 0 < most and count <= most


def readable(table: DeltaTable) -> bool:
    """Whether delta-rs reads `table` (a version of it) as Spark would."""
    protocol = table.protocol()
    if not set(protocol.reader_features or []) <= READABLE or protocol.min_reader_version > 3:
        return False
    return table.metadata().configuration.get("delta.columnMapping.mode", "none") == "none"


def literal_keys(values: Sequence[tuple[Any, ...]]) -> bool:
    """Whether every part of every key is one a SQL literal gives back exactly (integers,
    strings, dates)."""
    exact = (int, str, datetime.date)
    return all(
        isinstance(v, exact) and not isinstance(v, (bool, datetime.datetime)) for key in values for v in key
    )


def read_keys(
    path: str,
    version: int,
    key: Columns,
    values: Sequence[tuple[Any, ...]],
    columns: Sequence[str] | None = None,
    *,
    most_rows: int | None = None,
) -> pa.Table | None:
    """The rows of the table at `path`, as of `version`, whose `key` columns hold one of
    `values` (its `columns`, or all), as a pyarrow Table; None when delta-rs does not read the
    table as Spark would (`readable`). The caller checks `literal_keys`. With `most_rows`, the
    reading stops at one row more than that (a caller that cannot take more learns so without
    reading every match: DataFusion ends the scan at the limit)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    from lakejoin.delta.sql_text import key_in, literal, quoted

    table = DeltaTable(path, version=version)
    if not readable(table):
        return None
    chosen = ", ".join(quoted(c) for c in columns) if columns else "*"
    distinct = sorted(set(values))
    parts: list[pa.Table] = []
    # A chunk at a time: DataFusion plans `IN (...)` recursively, and a list of 25-30 k
    # literals overflowed the 8 MB stack and killed the process (session 32). Each sorted chunk
    # also has a narrower range, which skips more files.
    for start in range(0, len(distinct), CHUNK):
        chunk = distinct[start : start + CHUNK]
        # The ranges let delta-rs skip files by their statistics when the list is too long for
        # its pruning to read (more than 20 values); the list selects the rows.
        bounds = " AND ".join(
            f"{quoted(c)} BETWEEN {literal(min(k[i] for k in chunk))} AND {literal(max(k[i] for k in chunk))}"
            for i, c in enumerate(key)
        )
        sql = f"SELECT {chosen} FROM t WHERE {bounds} AND {key_in(key, chunk)}"
        if most_rows is not None:
            sql += f" LIMIT {most_rows + 1 - sum(p.num_rows for p in parts)}"
        parts.append(pa.table(QueryBuilder().register("t", table).execute(sql).read_all()))
        if most_rows is not None and sum(p.num_rows for p in parts) > most_rows:
            break
    if not parts:
        sql = f"SELECT {chosen} FROM t WHERE FALSE"
        parts.append(pa.table(QueryBuilder().register("t", table).execute(sql).read_all()))
    return pa.concat_tables([plain(part) for part in parts])


def whole_rows(path: str, version: int, most: int) -> pa.Table | None:
    """Every row of the table at `path`, as of `version`, when its files hold at most `most`
    rows (their statistics: nothing read to tell) and delta-rs reads it as Spark would; None
    otherwise."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(path, version=version)
    counts = table.get_add_actions(flatten=True).column("num_records").to_pylist()
    if any(n is None for n in counts) or sum(counts) > most or not readable(table):
        return None
    return plain(pa.table(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all()))


def plain(rows: pa.Table) -> pa.Table:
    """`rows` with string and binary views as plain strings and binaries (see `_plain`)."""
    import pyarrow as pa

    return rows.cast(pa.schema([f.with_type(_plain(f.type)) for f in rows.schema]))


# Within one commit a key's row as the commit found it comes before its row as the commit left it.
_CHANGE_ORDER = {"update_preimage": 0, "delete": 1, "insert": 2, "update_postimage": 3}


def read_key_changes(
    path: str, first: int, last: int, key: Columns, values: Sequence[tuple[Any, ...]]
) -> list[dict[str, Any]]:
    """The change-feed rows of versions `first`..`last` (both included) of the table at `path`
    whose `key` is one of `values`, in commit order: the data columns, `_change_type` and
    `_commit_version`. delta-rs's own error when that range of the feed cannot be read."""
    import pyarrow as pa
    from deltalake import DeltaTable

    from lakejoin.delta.sql_text import key_in

    if first > last or not values:
        return []
    feed = DeltaTable(path).load_cdf(first, last, predicate=key_in(key, sorted(set(values))))
    rows = [
        {
            **{c: v for c, v in row.items() if c != "_commit_timestamp"},
            "_commit_version": int(row["_commit_version"]),
        }
        for row in pa.table(feed.read_all()).to_pylist()
    ]
    return sorted(rows, key=lambda r: (r["_commit_version"], _CHANGE_ORDER.get(r["_change_type"], 9)))


def _plain(kind: pa.DataType) -> pa.DataType:
    """`kind` with string and binary views as plain strings and binaries (pyarrow's compute
    functions, and Spark, take those), nested types included."""
    import pyarrow as pa

    if pa.types.is_string_view(kind):
        return pa.string()
    if pa.types.is_binary_view(kind):
        return pa.binary()
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_list_view(kind):
        return pa.list_(kind.value_field.with_type(_plain(kind.value_type)))
    if pa.types.is_struct(kind):
        return pa.struct(
            [kind.field(i).with_type(_plain(kind.field(i).type)) for i in range(kind.num_fields)]
        )
    if pa.types.is_map(kind):
        return pa.map_(
            kind.key_field.with_type(_plain(kind.key_type)), kind.item_field.with_type(_plain(kind.item_type))
        )
    return kind


def as_spark(spark: SparkSession, rows: pa.Table, schema: StructType) -> DataFrame:
    """`rows` as a Spark DataFrame (a local relation) with exactly `schema`: delta-rs reads
    strings as string views and may name nested fields its own way, so the rows are cast to the
    Arrow form of the Spark schema first."""
    from pyspark.sql.pandas.types import to_arrow_schema

    target = to_arrow_schema(schema)
    # One chunk per column, an empty one when there are no rows: pyspark 4.1 cannot build a
    # column of nested timestamps (or any list) from a result with no chunks at all.
    typed = (
        rows.select(schema.fieldNames()).cast(target).combine_chunks()
        if rows.num_rows
        else target.empty_table()
    )
    return spark.createDataFrame(typed, schema=schema)


def key_tuples(rows: pa.Table, key: Columns) -> list[tuple[Any, ...]]:
    """The key of each row of `rows`, in order, as tuples."""
    return list(zip(*(rows[c].to_pylist() for c in key), strict=True)) if rows.num_rows else []


def without(rows: pa.Table, key: Columns, values: Sequence[tuple[Any, ...]]) -> pa.Table:
    """`rows` but those whose `key` is one of `values`."""
    import pyarrow.compute as pc

    if not values or rows.num_rows == 0:
        return rows
    return rows.filter(pc.invert(_holds(rows, key, values)))


def within(rows: pa.Table, key: Columns, values: Sequence[tuple[Any, ...]]) -> pa.Table:
    """The rows of `rows` whose `key` is one of `values`."""
    if rows.num_rows == 0:
        return rows
    return rows.filter(_holds(rows, key, values))


def _holds(rows: pa.Table, key: Columns, values: Sequence[tuple[Any, ...]]) -> pa.ChunkedArray | pa.Array:
    """Per row of `rows`, whether its `key` is one of `values`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(key) == 1:
        listed = pa.array([v[0] for v in values]).cast(rows.schema.field(key[0]).type)
        return pc.is_in(rows[key[0]], value_set=listed)
    held = set(values)
    return pa.array([k in held for k in key_tuples(rows, key)], type=pa.bool_())


def duplicates(rows: pa.Table, key: Columns, *, shown: int = 5) -> list[tuple[tuple[Any, ...], int]]:
    """Up to `shown` keys held by more than one row, with their counts, in order."""
    counts: dict[tuple[Any, ...], int] = {}
    for k in key_tuples(rows, key):
        counts[k] = counts.get(k, 0) + 1
    held = sorted((k, n) for k, n in counts.items() if n > 1)
    return held[:shown]


def row_count(path: str, version: int) -> int | None:
    """The rows of a Delta table at `version`, from its files' statistics on the driver (no
    scan, no job), less the rows its deletion vectors remove (which the statistics still
    count); None when a file has no row count."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    table = DeltaTable(path, version=version)
    records = pa.table(table.get_add_actions(flatten=True))["num_records"]
    if records.null_count:
        return None
    rows = int(pc.sum(records).as_py() or 0)
    if "deletionVectors" in (table.protocol().reader_features or []):
        kept = pc.list_flatten(pa.table(table.deletion_vectors().read_all())["selection_vector"])
        rows -= int(pc.sum(pc.invert(kept).cast(pa.int64())).as_py() or 0)
    return rows
