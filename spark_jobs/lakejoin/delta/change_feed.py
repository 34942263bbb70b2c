"""Change Data Feed reads over pinned version ranges, collapsed to the net change of content per
key: a write that leaves a row as it was is no change (docs/decisions.md, "A change is a change
of content")."""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

from lakejoin.delta.sql_text import spark_column, spark_columns
from lakejoin.errors import ChangesUnreadableError
from lakejoin.spec.model import Columns

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

CHANGE = "_lj_change"
VERSION = "_commit_version"
CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")
_SIDE = "_lj_side"  # 1: a row as a commit left it (insert, post-image); 0: as it found it
_CHANGED = "_lj_changed"
# A net change's row of the key as the range found it (a struct of the data columns; null when
# the key had no row before the range's first commit that wrote it).
BEFORE = "_lj_before"


class ChangeKind(enum.Enum):
    UPSERT = "upsert"
    DELETE = "delete"


def read_change_feed(spark: SparkSession, path: str, first: int, last: int) -> DataFrame:
    """Every CDF row of the table with `first <= _commit_version <= last`."""
    return (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", first)
        .option("endingVersion", last)
        .load(path)
    )


# A source's change range of at most this many change rows, as its commits' operation metrics
# count them, is read on the driver with delta-rs and enters Spark as a local relation; a
# larger one, or one the metrics cannot count, is read by Spark. Spark's read of a few rows
# costs 0.3-0.9 s and 2-3 jobs (the log replayed in the JVM, the files listed and scanned),
# the driver's 0.01-0.05 s and none (session 58, docs/bench/micro_batch.md).
DRIVER_ROWS = "spark.lakejoin.changes.driverMaxRows"
DRIVER_ROWS_DEFAULT = 20_000
# Change rows a run keeps read on the driver, for the other views that read the same range.
KEPT_ROWS = 200_000


def driver_rows(spark: SparkSession) -> int:
    """Up to how many change rows a range is read on the driver (0: never)."""
    return int(spark.conf.get(DRIVER_ROWS, None) or DRIVER_ROWS_DEFAULT)


def logged_change_rows(commits: Sequence[Mapping[str, Any]], *, updated_once: bool = False) -> int | None:
    """How many Change Data Feed rows `commits` give, from their operation metrics alone (no
    data read): an append's rows, a MERGE's inserted and deleted rows and two for each updated
    one (its pre- and post-image), a DELETE's deleted rows, an UPDATE's two per row, none for
    a commit that changes no row; with `updated_once`, an updated row counts once (the rows the
    commits changed: at least as many as the keys they changed, `lakejoin plan`'s estimate).
    None when a commit's metrics cannot say: an overwrite (whose removed files' rows the metrics
    do not count), a TRUNCATE or RESTORE, a commit of another operation, or a count missing.
    Spark's and delta-rs's names both count."""
    from lakejoin.delta.identity import NO_ROW_OPERATIONS
    from lakejoin.delta.markers import operation_metrics

    total = 0
    for commit in commits:
        operation = str(commit.get("operation", ""))
        if operation in NO_ROW_OPERATIONS:
            continue
        metrics = operation_metrics(dict(commit))
        rows = _commit_rows(
            operation, dict(commit.get("operationParameters") or {}), metrics, 1 if updated_once else 2
        )
        if rows is None:
            return None
        total += rows
    return total


def _commit_rows(
    operation: str, parameters: dict[str, Any], metrics: dict[str, int], images: int
) -> int | None:
    def counted(*names: str, twice: str = "") -> int | None:
        if any(n not in metrics for n in names) or (twice and twice not in metrics):
            return None
        return sum(metrics[n] for n in names) + (images * metrics[twice] if twice else 0)

    if operation in ("WRITE", "STREAMING UPDATE"):
        mode = str(parameters.get("mode") or parameters.get("outputMode") or "")
        if mode.strip('"') not in ("Append", "ErrorIfExists"):
            return None  # an overwrite's deletes are its removed files' rows, which no metric counts
        return counted("numOutputRows") if "numOutputRows" in metrics else counted("numAddedRows")
    if operation == "CREATE TABLE AS SELECT":
        return counted("numOutputRows")
    if operation == "MERGE":
        return counted("numTargetRowsInserted", "numTargetRowsDeleted", twice="numTargetRowsUpdated")
    if operation == "DELETE":
        return counted("numDeletedRows")
    if operation == "UPDATE":
        return counted(twice="numUpdatedRows")
    return None


# (path, the pinned commit's identity, first, last) -> the range's change rows read on the driver
_kept: OrderedDict[tuple[str, tuple[str, ...], int, int], pa.Table] = OrderedDict()
driver_reads = {"read": 0, "kept": 0}  # ranges read with delta-rs, and answered from `_kept`


def read_on_driver(path: str, first: int, last: int, identity: Sequence[str] = ()) -> pa.Table | None:
    """Every CDF row of versions `first`..`last` of the table at `path`, read with delta-rs on
    the driver: the data columns, `_change_type`, `_commit_version` and `_commit_timestamp`, as
    `read_change_feed` gives them. None when delta-rs does not read the range as Spark would: a
    reader feature or column mapping it does not apply (`lookups.readable`), or a schema that
    changed in the range (Spark reads across an added column, or refuses).

    A range once read is kept for the run, by the identity of the table at `last`
    (delta/identity.py): another view reading the same range of the same table reads no file."""
    import pyarrow as pa
    from deltalake import DeltaTable

    from lakejoin.delta import lookups

    kept_as = (path, tuple(identity), first, last)
    rows = _kept.get(kept_as) if identity else None
    if rows is not None:
        driver_reads["kept"] += 1
        _kept.move_to_end(kept_as)
        return rows
    table = DeltaTable(path, version=last)
    if not lookups.readable(table):
        return None
    before = DeltaTable(path, version=first - 1) if first > 0 else None
    if before is not None and (not lookups.readable(before) or before.schema() != table.schema()):
        return None
    rows = lookups.plain(pa.table(table.load_cdf(first, last).read_all()))
    driver_reads["read"] += 1
    if identity:
        _kept[kept_as] = rows
        while sum(t.num_rows for t in _kept.values()) > KEPT_ROWS and len(_kept) > 1:
            _kept.popitem(last=False)
    return rows


def net_rows(feed: pa.Table, key: Columns) -> list[dict[str, Any]]:
    """`net_changes`'s rule, row by row on the driver, over a change feed read there (a few
    thousand rows at most): each key's last change of content, as a dict of the data columns,
    `_lj_change`, `_commit_version` and `_lj_before` (a dict of the data columns, or None).
    The same rule in the same order of steps; tests/steps/test_net_changes.py holds both to one
    truth table, tests/delta/test_change_reads.py to Spark's on real tables, and the property
    histories read half their batches' changes this way.

    Values compare as Spark compares them there: nulls equal, NaN equal to NaN, a map by its
    entries in order (Spark compares its JSON text)."""
    data_columns = [c for c in feed.column_names if c not in CDF_COLUMNS]
    by_key: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in feed.select([*data_columns, "_change_type", VERSION]).to_pylist():
        row[_SIDE] = 1 if row["_change_type"] in ("insert", "update_postimage") else 0
        by_key.setdefault(tuple(row[c] for c in key), []).append(row)
    net = []
    for rows in by_key.values():
        rows.sort(key=lambda r: (r[VERSION], r[_SIDE]))
        first = rows[0]
        found = {c: first[c] for c in data_columns} if first[_SIDE] == 0 else None
        latest = None
        for i, row in enumerate(rows):
            if row[_SIDE] == 1:  # unchanged when this commit's row as it found it is equal
                was = rows[i - 1] if i else None
                changed = not (
                    was is not None
                    and (was[VERSION], was[_SIDE]) == (row[VERSION], 0)
                    and all(_equal(was[c], row[c]) for c in data_columns)
                )
            else:  # a delete or pre-image: the commit's new row of the key decides
                after = rows[i + 1] if i + 1 < len(rows) else None
                changed = not (after is not None and (after[VERSION], after[_SIDE]) == (row[VERSION], 1))
            if changed:
                latest = row
        if latest is not None:
            kind = ChangeKind.DELETE if latest[_SIDE] == 0 else ChangeKind.UPSERT
            net.append(
                {
                    **{c: latest[c] for c in data_columns},
                    CHANGE: kind.value,
                    VERSION: int(latest[VERSION]),
                    BEFORE: found,
                }
            )
    return net


def _equal(a: Any, b: Any) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)


def net_frame(spark: SparkSession, net: Sequence[Mapping[str, Any]], schema: StructType) -> DataFrame:
    """Net changes found on the driver (`net_rows`) of a source of `schema` (its columns at the
    pin), as a Spark local relation with the columns `net_changes` gives."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from lakejoin.delta import lookups

    columns = StructType(
        [
            *schema.fields,
            StructField(CHANGE, StringType()),
            StructField(VERSION, LongType()),
            StructField(BEFORE, StructType(list(schema.fields))),
        ]
    )
    rows = pa.Table.from_pylist(list(net), schema=to_arrow_schema(columns))
    return lookups.as_spark(spark, rows, columns)


def net_changes(change_feed: DataFrame, key: Columns) -> DataFrame:
    """The last change of content of every key: its row, `_lj_change` (upsert or delete), the
    `_commit_version` of that change, and `_lj_before`, the key's row before the range (null:
    it had none). A delete carries the deleted row's last values.

    A commit changes a key when the key's row after it differs from its row before it (every
    column compared, nulls equal). So an update whose post-image equals its pre-image (a MERGE
    or UPDATE that wrote the row back as it was) and a delete and an insert of an equal row in
    one commit (an overwrite that kept it) are no change; an insert, and a delete not replaced
    in its commit, always are. A key none of whose commits in the range changed it has no net
    change. Within one commit an insert outranks a delete, because an overwrite writes both for
    a key that it keeps.

    A commit is compared with itself only, never with the range's earlier commits: a row
    deleted and inserted again in two commits changed twice (it was gone in between), so the
    answer does not depend on where one batch's range ends and the next one's begins.

    One window over the rows by key, in commit order: the shuffle the last-change pick needed
    anyway (pre-images now go through it too), no job of its own.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    data_columns = [c for c in change_feed.columns if c not in CDF_COLUMNS]
    kind = F.col("_change_type")
    side = F.when(kind.isin("insert", "update_postimage"), 1).otherwise(0)
    rows = change_feed.select(
        *spark_columns(data_columns), kind.alias("_change_type"), F.col(VERSION), side.alias(_SIDE)
    )
    in_order = Window.partitionBy(*spark_columns(key)).orderBy(F.col(VERSION), F.col(_SIDE))

    def next_to(offset: int, want_side: int) -> Column:
        """The row `offset` away in commit order is of this commit and on `want_side`."""
        near = F.lag if offset < 0 else F.lead
        same = (near(VERSION).over(in_order) == F.col(VERSION)) & (near(_SIDE).over(in_order) == want_side)
        return F.coalesce(same, F.lit(False))

    before = [F.lag(spark_column(c)).over(in_order) for c in data_columns]
    unchanged = F.lit(True)
    for c, was in zip(data_columns, before, strict=True):
        unchanged = unchanged & _comparable(rows, c, was).eqNullSafe(_comparable(rows, c, spark_column(c)))
    changed = (
        F.when(F.col(_SIDE) == 1, ~(next_to(-1, 0) & unchanged))
        # A delete, or a pre-image: the commit's new row of the key decides, and without one
        # the key went (a delete, or an UPDATE that changed the key itself: its post-image is
        # another key's).
        .otherwise(~next_to(1, 1))
    )
    latest_first = Window.partitionBy(*spark_columns(key)).orderBy(F.col(VERSION).desc(), F.col(_SIDE).desc())
    # The first row in commit order is the row the range's first write of the key found (its
    # pre-image or delete, which sort before the commit's new rows), unless that write inserted
    # the key: then it had no row before.
    first_side = F.first(F.col(_SIDE)).over(in_order)
    found = F.when(first_side == 0, F.first(F.struct(*spark_columns(data_columns))).over(in_order))
    return (
        rows.withColumn(BEFORE, found)
        .withColumn(_CHANGED, changed)
        .where(F.col(_CHANGED))
        .withColumn("_lj_rank", F.row_number().over(latest_first))
        .where(F.col("_lj_rank") == 1)
        .select(
            *spark_columns(data_columns),
            F.when(F.col(_SIDE) == 0, F.lit(ChangeKind.DELETE.value))
            .otherwise(F.lit(ChangeKind.UPSERT.value))
            .alias(CHANGE),
            F.col(VERSION),
            F.col(BEFORE),
        )
    )


def _comparable(frame: DataFrame, column: str, value: Column) -> Column:
    """`value` (of `frame`'s `column`) in a form Spark compares for equality: itself, or its JSON
    text where it holds a map (Spark does not compare maps; two equal maps whose entries are in
    another order then count as a change, the safe side)."""
    from pyspark.sql import functions as F

    return F.to_json(value) if _holds_map(frame.schema[column].dataType) else value


def _holds_map(data_type: Any) -> bool:
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(data_type, MapType):
        return True
    if isinstance(data_type, ArrayType):
        return _holds_map(data_type.elementType)
    if isinstance(data_type, StructType):
        return any(_holds_map(f.dataType) for f in data_type.fields)
    return False


def upserts(net: DataFrame) -> DataFrame:
    """The rows of a net change (see `net_changes`) that exist at the pin, with the source's
    columns only: what an upserted key holds now; a deleted key has no row."""
    from pyspark.sql import functions as F

    data_columns = [c for c in net.columns if c not in (CHANGE, VERSION, BEFORE)]
    return net.where(F.col(CHANGE) == ChangeKind.UPSERT.value).select(*spark_columns(data_columns))


def before_rows(net: DataFrame) -> DataFrame:
    """The rows the keys of a net change (see `net_changes`) held before its range, with the
    source's columns only: a key that had none has no row."""
    from pyspark.sql import functions as F

    return net.where(F.col(BEFORE).isNotNull()).select(f"{BEFORE}.*")


def no_changes(table: DataFrame) -> DataFrame:
    """An empty set of net changes with the columns net_changes gives for `table`."""
    from pyspark.sql import functions as F

    return table.limit(0).select(
        *spark_columns(table.columns),
        F.lit(None).cast("string").alias(CHANGE),
        F.lit(None).cast("bigint").alias(VERSION),
        F.when(F.lit(False), F.struct(*spark_columns(table.columns))).alias(BEFORE),
    )


_SCHEMA_CHANGES = (
    "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE",  # two changes in the range, or CM turned on in it
    "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA",  # one rename, drop or type change
)


def translate_read_error(exc: Exception, *, role: str, path: str, first: int, last: int) -> Exception:
    """Turn Delta's errors about unreadable CDF ranges into an error that says what to do."""
    text = str(exc)
    # Delta reads no change feed across a column renamed or dropped (column mapping) or of a
    # changed type, in the range or between its start and end schema: a column the view does
    # not read too, so the view's definition did not change and no full refresh was planned.
    if any(marker in text for marker in _SCHEMA_CHANGES):
        return ChangesUnreadableError(
            f"a column of {path} was renamed, dropped or changed its type between versions {first} and "
            f"{last}, and Delta reads no Change Data Feed across such a change (even of a column this "
            "view does not read)",
            where=role,
            fix="rebuild this view from the current snapshot with `lakejoin run SPEC --view VIEW "
            "--full-refresh`; its next batches read the changes after the schema change",
        )
    markers = (
        "DELTA_CHANGE_DATA_FILE_NOT_FOUND",
        "FileNotFoundException",
        "FILE_NOT_EXIST",
        "DELTA_CANNOT_TIME_TRAVEL",
        "VersionNotFoundException",
        "DELTA_MISSING_CHANGE_DATA",
        "DELTA_CHANGE_TABLE_FEED_DISABLED",
        "DELTA_TRUNCATED_TRANSACTION_LOG",
        # delta-rs's, for a range read on the driver (read_on_driver)
        "No such file or directory",
        "Invalid table version",
    )
    if not any(marker in text for marker in markers):
        return exc
    return ChangesUnreadableError(
        f"the changes of {path} between versions {first} and {last} can no longer be read "
        "(vacuumed files, a cleaned-up log, or the Change Data Feed was off for part of the range)",
        where=role,
        fix="rebuild this view from the current snapshot with `lakejoin run SPEC --view VIEW --full-refresh`",
    )


def null_key(key: Columns, column: Callable[[str], Column] | None = None) -> Column:
    """True on a row whose key is null: a null in any of the key's columns."""
    from pyspark.sql import functions as F

    refer = column or F.col
    return reduce(lambda a, b: a | b, (refer(c).isNull() for c in key))
