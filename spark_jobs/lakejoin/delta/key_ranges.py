"""Key ranges: how a batch that touches few key ranges reads few files.

Delta skips a file when a query's literal predicate excludes the file's min/max statistics, but
not for a join: a MERGE, or a semi-join with a batch's keys, reads every file's key column (and
every column of a file one key falls in). So lakejoin does two things:
- it lays a table out by key when it first fills it: rows range-partitioned and sorted by the
  key's columns, at most `ROWS_PER_FILE` rows to a file, so files hold disjoint key ranges
  (new keys that grow, like CDC's, land in new files of their own);
- it adds the batch's key range, `key BETWEEN lo AND hi` with literal bounds (one for each
  column of a key of several), to every MERGE condition and lookup of a batch's keys.

Keys spread over the whole table gain nothing (the range is the whole table) and lose one small
aggregate; keys that cluster, like the recent rows CDC mostly updates, read only their files.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakejoin.delta.sql_text import spark_column, spark_columns
from lakejoin.spec.model import Columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# Set to "false" to turn both off (the benchmark's `inc_noranges` variant measures the gain).
ENABLED = "spark.lakejoin.keyRanges.enabled"

# Rows per file when lakejoin lays a table out: small enough that a narrow range reads a small
# share of a 15 M-row table, large enough that file counts stay in the tens.
ROWS_PER_FILE = 250_000
# A write of at least this many rows a core is split over the cores (issue 52, item 8): one task
# wrote a 1 % batch's 150,000 rows at 15 M orders while the other core idled. Fewer rows stay one
# file, as a micro-batch's few rows should.
ROWS_PER_TASK = 10_000


def write_partitions(rows: int, cores: int) -> int:
    """How many files (tasks) a write of `rows` new rows laid out by key makes: one a
    `ROWS_PER_FILE` rows, and at least one a core while each gets `ROWS_PER_TASK` rows.

    >>> write_partitions(150_000, cores=2), write_partitions(56, cores=2)
    (2, 1)
    """
    by_size = -(-rows // ROWS_PER_FILE)
    by_cores = min(cores, rows // ROWS_PER_TASK)
    return max(1, by_size, by_cores)


def enabled(spark: SparkSession) -> bool:
    return (spark.conf.get(ENABLED, None) or "true").lower() != "false"


@dataclass(frozen=True)
class KeyRange:
    """The least and greatest value of each key column in a batch (no bounds: no keys, or no
    column of a type that gives a range). A key of several columns has a range per column: a
    row of the batch has every column within its range, so the AND of the ranges is exact (a
    superset of the batch's keys) and Delta skips a file by any column's statistics.

    >>> bounds = KeyRange.of(changes, ("order_id",))                   # doctest: +SKIP
    >>> table.where(bounds.covers())                                   # doctest: +SKIP
    """

    columns: tuple[str, ...]
    bounds: tuple[tuple[Any, Any] | None, ...] = ()  # per column: (lo, hi), or None (no range)

    @classmethod
    def of(cls, frame: DataFrame, columns: Columns) -> KeyRange:
        row = frame.agg(*cls.aggregates(columns)).first()
        return cls.from_row(frame, columns, row)

    @classmethod
    def from_row(cls, frame: DataFrame, columns: Columns, row: Any) -> KeyRange:
        """From an aggregate of `frame` that holds `aggregates(columns)` (saves a job). A column
        whose values may not come back from Python as the same literal (timestamps and floats)
        gives no range."""
        from pyspark.sql.types import DateType, DecimalType, IntegralType, StringType

        exact = (IntegralType, StringType, DateType, DecimalType)
        columns = tuple(columns)
        if row is None:
            return cls(columns)
        bounds = []
        for i, column in enumerate(columns):
            lo, hi = row[f"_lj_lo{i}"], row[f"_lj_hi{i}"]
            fits = isinstance(frame.schema[column].dataType, exact) and lo is not None and hi is not None
            bounds.append((lo, hi) if fits else None)
        return cls(columns, tuple(bounds) if any(bounds) else ())

    @staticmethod
    def aggregates(columns: Columns) -> list[Column]:
        from pyspark.sql import functions as F

        return [
            m
            for i, c in enumerate(columns)
            for m in (F.min(spark_column(c)).alias(f"_lj_lo{i}"), F.max(spark_column(c)).alias(f"_lj_hi{i}"))
        ]

    def renamed(self, columns: Columns) -> KeyRange:
        """The same range on columns of other names (a frame that renamed the key's columns)."""
        return KeyRange(tuple(columns), self.bounds)

    def covers(self, column: Callable[[str], Column] | None = None) -> Column:
        """A predicate true on every row whose key is in the range: each bounded column between
        its least and greatest value (always true with no bounds: callers have nothing to look
        up then, and a predicate on no values would drop nulls). `column` makes a key column's
        reference from its name (default `spark_column`; `lambda c: spark_column(c, "t")` for a
        MERGE's target)."""
        from pyspark.sql import functions as F

        refer = column or spark_column
        predicate = F.lit(True)
        for name, bound in zip(self.columns, self.bounds, strict=False):
            if bound is not None:
                predicate = predicate & refer(name).between(F.lit(bound[0]), F.lit(bound[1]))
        return predicate


def write_laid_out(rows: DataFrame, path: str, key: Columns) -> None:
    """Append `rows` to the Delta table at `path`, files holding disjoint ranges of `key`."""
    (
        rows.repartitionByRange(*spark_columns(key))
        .sortWithinPartitions(*spark_columns(key))
        .write.format("delta")
        .mode("append")
        .option("maxRecordsPerFile", ROWS_PER_FILE)
        .save(path)
    )


# What `materialised` gives: the materialised frame, its row count, the range of its key.
Keys = tuple["DataFrame", int, KeyRange]


class NullKeyFoundError(Exception):
    """`materialised(..., refuse_null_keys=True)` found rows with a null in a key column."""

    def __init__(self, rows: int) -> None:
        super().__init__(f"{rows} row(s) with a null key")
        self.rows = rows


def materialised(
    frame: DataFrame,
    columns: Columns = (),
    *,
    refuse_null_keys: bool = False,
    also: Sequence[Column] = (),
    seen: dict[str, Any] | None = None,
) -> Keys:
    """Materialise `frame` once (a local checkpoint) and count its rows, and the range of each
    of `columns` when given, in that same Spark job (an observation), not in jobs of their own.
    With `refuse_null_keys` the same observation counts the rows with a null in any of
    `columns`, and any raises `NullKeyFoundError`. `also`: more aggregates the same observation
    computes, whose values go into `seen` (join health's counts, engine/health.py).

    (An observation, not a `raise_error` filter: Spark keeps a checkpointed frame's filters as
    constraints, and a semi-join on the key copies them onto the other side, where the
    `raise_error` then fails on that side's own null keys.)

    >>> keys, n, bounds = materialised(affected, ("order_id",))         # doctest: +SKIP
    """
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from lakejoin.delta.change_feed import null_key

    observed = Observation()
    measures = [F.count(F.lit(1)).alias("n"), *(KeyRange.aggregates(columns) if columns else []), *also]
    if refuse_null_keys and columns:
        measures.append(F.count(F.when(null_key(columns), F.lit(1))).alias("_lj_null_keys"))
    done = frame.observe(observed, *measures).localCheckpoint()
    row = observed.get
    if seen is not None:
        seen.update(row)
    if refuse_null_keys and columns and row["_lj_null_keys"]:
        raise NullKeyFoundError(int(row["_lj_null_keys"]))
    if not columns or not enabled(frame.sparkSession):
        return done, int(row["n"]), KeyRange(tuple(columns))
    return done, int(row["n"]), KeyRange.from_row(frame, columns, row)


def collected(frame: DataFrame, *, also: Sequence[Column] = (), seen: dict[str, Any] | None = None) -> Any:
    """`frame`'s rows on the driver (a pyarrow Table), collected in one Spark job that also
    computes the `also` aggregates, whose values go into `seen` (as `materialised`'s do), and
    counts the rows (`seen["n"]`). For a batch of few rows: what it then checks and writes is
    this one copy, not the frame read again (issue 52)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observed = Observation()
    rows = frame.observe(observed, F.count(F.lit(1)).alias("n"), *also).toArrow()
    if seen is not None:
        seen.update(observed.get)
    return rows
