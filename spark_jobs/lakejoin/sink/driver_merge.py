"""A batch of few keys written from the driver: one delta-rs MERGE, no Spark job.

A Spark MERGE of three rows costs 5-7 s on this project's 2-core machine whatever the table's
size (1.5 M rows: finding the touched files 2.7-4 s, writing deletion vectors and rows 2.6-3.6 s;
file size and row-group size change nothing: it is Delta's fixed cost per MERGE). delta-rs
MERGEs the same three rows into the same table in 0.2-0.26 s, copying the few files the keys'
literals select (session 30, docs/decisions.md "The output write").

The rows arrive as Arrow (one small Spark job collects them); the commit carries what Spark's
would: the `txn` action (`txnAppId`/`txnVersion`) and, for a batch commit, the batch in
commitInfo's `userMetadata`; Delta's change feed is written as Spark's MERGE writes it (insert,
update pre- and post-images, delete; an unchanged row is not rewritten, so it yields none).

It applies only where delta-rs may write: a table whose writer features it supports (not a
clustered table: delta-rs does not write those), with no NOT NULL column (delta-rs 1.6's MERGE
fails that check on the rows it deletes), no decimal column of more than 15 digits (delta-rs
keeps its statistics as a double, `exact_statistics`), and columns of atomic types or of arrays
and structs of them (list_join's lists). Elsewhere the caller takes Spark's MERGE, as it does
when delta-rs fails inside the MERGE before its commit (`DriverMergeFailedError`).

>>> counts = merge_on_driver(spark, path, source, ["id", "v"], ["id"], txn=("app", 3))  # doctest: +SKIP
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lakejoin.delta.sql_text import literal, quoted, spark_columns

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession

# Writer features delta-rs 1.x writes (a table with any other, such as clustering, is Spark's).
WRITABLE = {
    "appendOnly",
    "invariants",
    "checkConstraints",
    "changeDataFeed",
    "deletionVectors",
    "columnMapping",
    "timestampNtz",
    "generatedColumns",
}
KEEP = "_lj_keep"


class DriverMergeFailedError(Exception):
    """delta-rs failed inside the MERGE (a panic) before it committed: the table is as it was,
    and the caller writes the batch with Spark's MERGE."""


# Set to "false" to write every batch with Spark's MERGE.
ENABLED = "spark.lakejoin.write.driverMerge"


# Up to how many keys a batch is written from the driver, and up to how many rows the table
# may hold then. delta-rs writes no deletion vectors: it rewrites every file a key falls in,
# which for random keys is the whole table. Measured at 1.5 M rows (session 31, change feed on;
# the retired bench.write_paths, docs/bench/studies.md): 1,481 keys 2.8 s against Spark's split
# write 13.9 s; 15,137 keys 3.3 s against 13.6 s (48 s while every key was listed in the
# condition: an OR of 15 k terms a row).
# Larger tables are not measured yet: they keep Spark's write, which rewrites no unchanged row.
MAX_KEYS = "spark.lakejoin.write.driverMergeMaxKeys"
MAX_KEYS_DEFAULT = 20_000
MAX_ROWS = "spark.lakejoin.write.driverMergeMaxRows"
MAX_ROWS_DEFAULT = 3_000_000
# The condition lists the keys (so delta-rs reads only their files) up to this many: beyond,
# the listed keys cover every file anyway and the long OR costs more than it saves.
LISTED_MAX = 100


def enabled(spark: SparkSession) -> bool:
    return (spark.conf.get(ENABLED, None) or "true").lower() != "false"


def max_keys(spark: SparkSession) -> int:
    return int(spark.conf.get(MAX_KEYS, None) or MAX_KEYS_DEFAULT)


def max_rows(spark: SparkSession) -> int:
    return int(spark.conf.get(MAX_ROWS, None) or MAX_ROWS_DEFAULT)


def atomic_columns(source: DataFrame) -> bool:
    """Whether delta-rs may MERGE `source`'s columns: of atomic types, or arrays and structs of
    them."""
    from pyspark.sql import types as T

    atomic = (
        T.BooleanType,
        T.DateType,
        T.DecimalType,
        T.DoubleType,
        T.FloatType,
        T.IntegralType,
        T.StringType,
        T.TimestampType,
    )

    # Arrays and structs of atomic types (list_join's lists of structs): `merge_rows` rebuilds
    # their Arrow arrays first (see there). No maps: never measured.
    def leaves_atomic(kind: Any) -> bool:
        if isinstance(kind, T.ArrayType):
            return leaves_atomic(kind.elementType)
        if isinstance(kind, T.StructType):
            return all(leaves_atomic(f.dataType) for f in kind.fields)
        return isinstance(kind, atomic)

    return all(leaves_atomic(f.dataType) for f in source.schema.fields)


def atomic_arrow(schema: Any) -> bool:
    """`atomic_columns` of the table's own Arrow schema (delta-rs): what `lakejoin plan` asks of
    an output before a batch has its rows. The same types: Spark's timestamp is Arrow's with a
    time zone; one without (timestamp_ntz), binary and maps are not atomic."""
    import pyarrow as pa

    def leaves_atomic(kind: Any) -> bool:
        if pa.types.is_list(kind) or pa.types.is_large_list(kind):
            return leaves_atomic(kind.value_type)
        if pa.types.is_struct(kind):
            return all(leaves_atomic(kind.field(i).type) for i in range(kind.num_fields))
        if pa.types.is_timestamp(kind):
            return kind.tz is not None
        return bool(
            pa.types.is_boolean(kind)
            or pa.types.is_date(kind)
            or pa.types.is_decimal(kind)
            or pa.types.is_floating(kind)
            or pa.types.is_integer(kind)
            or pa.types.is_string(kind)
            or pa.types.is_large_string(kind)
            or pa.types.is_string_view(kind)
        )

    return all(leaves_atomic(field.type) for field in pa.schema(schema))


def writes_table(table: DeltaTable) -> bool:
    """Whether delta-rs may MERGE into `table` (its loaded log): its protocol and schema."""
    protocol = table.protocol()
    if not set(protocol.writer_features or []) <= WRITABLE or protocol.min_writer_version > 7:
        return False
    # delta-rs 1.6's MERGE fails its NOT NULL check on the rows it deletes ("Invalid data found"):
    # tables lakejoin creates are nullable throughout (keyed_tables.ensure_keyed_table); older ones are not.
    if not all_nullable(table.schema().to_arrow()):
        return False
    return exact_statistics(table.schema().to_arrow())


def logged_rows(files: pa.Table) -> int:
    """How many rows a table's data files hold, summed from its log's add actions (`files`,
    delta-rs's `get_add_actions(flatten=True)`)."""
    import pyarrow.compute as pc

    return int(pc.sum(files.column("num_records")).as_py() or 0)


def all_nullable(schema: Any) -> bool:
    """Whether every field of an Arrow schema, nested ones included, is nullable."""
    import pyarrow as pa

    def open_(kind: Any) -> bool:
        if pa.types.is_struct(kind):
            return all(kind.field(i).nullable and open_(kind.field(i).type) for i in range(kind.num_fields))
        if pa.types.is_list(kind) or pa.types.is_large_list(kind):
            return kind.value_field.nullable and open_(kind.value_type)
        return True

    return all(field.nullable and open_(field.type) for field in pa.schema(schema))


# delta-rs writes a decimal's min and max statistics as a double: 99999999999.0000000001 as
# 99999999999.0, and Spark (delta-rs too) then skips the file for that value, a wrong answer for
# the table's readers and a key the next MERGE does not find (issue 51). Every decimal of up to
# 15 digits is kept exactly (checked on 300 files of random 15-digit values, scales 0 to 15).
DOUBLE_DIGITS = 15


def exact_statistics(schema: Any) -> bool:
    """Whether delta-rs keeps exact statistics of every column of an Arrow schema (nested fields
    included): no decimal of more than `DOUBLE_DIGITS` digits."""
    import pyarrow as pa

    def exact(kind: Any) -> bool:
        if pa.types.is_decimal(kind):
            return bool(kind.precision <= DOUBLE_DIGITS)
        if pa.types.is_struct(kind):
            return all(exact(kind.field(i).type) for i in range(kind.num_fields))
        return True

    return all(exact(field.type) for field in pa.schema(schema))


def merge_on_driver(
    path: str,
    source: DataFrame,
    columns: Sequence[str],
    key: Sequence[str],
    *,
    txn: tuple[str, int] | None,
    user_metadata: str | None = None,
    listed: bool = True,
    empty: bool = False,
    rows: pa.Table | None = None,
) -> tuple[int, int, int, bool]:
    """Make the table's rows under the keys of `source` what `source` says (see
    `choice.merge_keyed`: `KEEP` false deletes, an unchanged row is left alone), in one delta-rs
    commit stamped with `txn` and `user_metadata`. With `listed` (key ranges on) the MERGE
    condition lists the keys' first column, so delta-rs reads only the files that hold them.
    Returns (inserted, updated, deleted, applied); not applied when the table already holds
    `txn` (an earlier attempt wrote it). `empty`: the caller counted no row in `source`, which
    is then not collected (the batch's commit alone, no Spark job). `rows`: `source` already on
    the driver (`keyed_rows`), not collected again."""
    from deltalake import DeltaTable
    from pyspark.sql.pandas.types import to_arrow_schema

    if txn is not None and (DeltaTable(path).transaction_version(txn[0]) or -1) >= txn[1]:
        return 0, 0, 0, False  # before the rows are collected: no Spark job
    if rows is None:
        chosen = source.select(*spark_columns([*columns, KEEP]))
        rows = to_arrow_schema(chosen.schema).empty_table() if empty else chosen.toArrow()
    else:
        rows = rows.select([*columns, KEEP])
    return merge_rows(path, rows, columns, key, txn=txn, user_metadata=user_metadata, listed=listed)


def keyed_rows(rows: pa.Table, keys: Sequence[tuple[Any, ...]], key: Sequence[str]) -> pa.Table:
    """`merge_on_driver`'s source for the rows of a batch of `keys` on the driver: each row of
    `rows` whose key is one of `keys`, `KEEP` true, and each of `keys` without a row, `KEEP`
    false (its other columns null): the affected keys left-joined to their rows, as Spark
    builds it for a batch whose rows are not on the driver (sink/entry.py)."""
    import pyarrow as pa

    from lakejoin.delta.lookups import key_tuples, within

    rows = within(rows, list(key), keys)
    present = set(key_tuples(rows, list(key)))
    kept = rows.append_column(KEEP, pa.array([True] * rows.num_rows, type=pa.bool_()))
    gone = [k for k in dict.fromkeys(keys) if k not in present]
    if not gone:
        return kept
    where = {c: i for i, c in enumerate(key)}
    columns = [
        pa.array([k[where[f.name]] for k in gone], type=f.type)
        if f.name in where
        else pa.nulls(len(gone), type=f.type)
        for f in rows.schema
    ]
    deleted = pa.Table.from_arrays(
        [*columns, pa.array([False] * len(gone), type=pa.bool_())], schema=kept.schema
    )
    return pa.concat_tables([kept, deleted])


def merge_rows(
    path: str,
    rows: pa.Table,
    columns: Sequence[str],
    key: Sequence[str],
    *,
    txn: tuple[str, int] | None,
    user_metadata: str | None = None,
    listed: bool = True,
) -> tuple[int, int, int, bool]:
    """`merge_on_driver` of `rows` already on the driver (Arrow: `columns` and `KEEP`)."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
    from deltalake.exceptions import DeltaError

    table = DeltaTable(path)
    if txn is not None and (table.transaction_version(txn[0]) or -1) >= txn[1]:
        return 0, 0, 0, False
    if rows.num_rows == 0 and txn is None:
        return 0, 0, 0, False
    if any(pa.types.is_nested(f.type) for f in rows.schema):
        # delta-rs 1.6.6's MERGE of Spark's Arrow of list<struct<..., string>> (list_join's
        # output) panicked inside arrow-data (variable_size.rs, "range start index
        # 18446744073520397944 out of range": an offset below the buffer's start) in one of 25
        # list_join property examples; the same rows rebuilt from their Python values passed
        # 40 examples (session 57). At most `max_keys` rows: 20,000 rows of three-element
        # lists of structs take 0.08 s.
        rows = pa.Table.from_pylist(rows.to_pylist(), schema=rows.schema)
    values = [c for c in columns if c not in key]
    t, s = quoted("t"), quoted("s")
    same_key = " AND ".join(f"({t}.{quoted(c)} = {s}.{quoted(c)})" for c in key)
    # Literals of types that come back from Python exactly (as `key_ranges.KeyRange` takes).
    exact = (int, str, decimal.Decimal, datetime.date)
    firsts = sorted({v for v in rows.column(key[0]).to_pylist() if isinstance(v, exact)})
    inexact = any(isinstance(v, (bool, datetime.datetime)) for v in firsts)
    if not listed or len(firsts) > LISTED_MAX or inexact:
        firsts = []
    literals = " OR ".join(f"({t}.{quoted(key[0])} = {literal(v)})" for v in firsts)
    on = f"({literals}) AND {same_key}" if literals else same_key
    # Each comparison in parentheses: delta-rs's parser binds IS DISTINCT FROM looser than OR.
    differs = " OR ".join(f"({t}.{quoted(c)} IS DISTINCT FROM {s}.{quoted(c)})" for c in values) or "FALSE"
    keep = f"{s}.{quoted(KEEP)}"
    properties = CommitProperties(
        custom_metadata={"userMetadata": user_metadata} if user_metadata else None,
        app_transactions=[Transaction(app_id=txn[0], version=txn[1])] if txn else None,
    )
    before = table.version()
    try:
        # No row (a batch whose keys hold nothing to write): no MERGE, the commit alone below.
        result: dict[str, Any] = {}
        if rows.num_rows:
            result = (
                table.merge(rows, on, source_alias="s", target_alias="t", commit_properties=properties)
                .when_matched_delete(predicate=f"NOT {keep}")
                .when_matched_update(
                    {quoted(c): f"{s}.{quoted(c)}" for c in values}, predicate=f"{keep} AND ({differs})"
                )
                .when_not_matched_insert({quoted(c): f"{s}.{quoted(c)}" for c in columns}, predicate=keep)
                .execute()
            )
        if txn is not None and DeltaTable(path).version() == before:
            # A MERGE that changes nothing makes no commit in delta-rs; the batch (its txn and
            # pins) still needs one: an append of no rows.
            empty = pa.schema(table.schema().to_arrow()).empty_table()
            write_deltalake(path, empty, mode="append", commit_properties=properties)
    except BaseException as exc:
        # A refused commit (CommitFailedError) is raised as it is: the batch says a conflict
        # (sink/conflicts.py), naming the view and the batch. A panic inside delta-rs (a
        # DeltaError saying so, or pyo3's PanicException): before the commit, nothing of the
        # batch is in the table, and Spark's MERGE can write it.
        panicked = type(exc).__name__ == "PanicException" or (
            isinstance(exc, DeltaError) and "panicked" in str(exc)
        )
        if not panicked or DeltaTable(path).version() != before:
            raise
        raise DriverMergeFailedError(str(exc).strip().splitlines()[-1][:300]) from exc
    return (
        int(result.get("num_target_rows_inserted", 0)),
        int(result.get("num_target_rows_updated", 0)),
        int(result.get("num_target_rows_deleted", 0)),
        True,
    )
