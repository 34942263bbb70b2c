"""Key ranges: how a batch that touches few key ranges reads few files.

Delta skips a file when a query's literal predicate excludes the file's min/max statistics, but
not for a join: a MERGE, or a semi-join with a batch's keys, reads every file's key column (and
every column of a file one key falls in). So lakejoin does two things:
- it lays a table out by key when it first fills it: rows range-partitioned and sorted by the
  key's first column, at most `ROWS_PER_FILE` rows to a file, so files hold disjoint key ranges
  (new keys that grow, like CDC's, land in new files of their own);
- it adds the batch's key range, `key BETWEEN lo AND hi` with literal bounds, to every MERGE
  condition and lookup of a batch's keys.

Keys spread over the whole table gain nothing (the range is the whole table) and lose one small
aggregate; keys that cluster, like the recent rows CDC mostly updates, read only their files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# Set to "false" to turn both off (the benchmark's `inc_noranges` variant measures the gain).
ENABLED = "spark.lakejoin.keyRanges.enabled"

# Rows per file when lakejoin lays a table out: small enough that a narrow range reads a small
# share of a 15 M-row table, large enough that file counts stay in the tens.
ROWS_PER_FILE = 250_000


def enabled(spark: SparkSession) -> bool:
    return (spark.conf.get(ENABLED, None) or "true").lower() != "false"


@dataclass(frozen=True)
class KeyRange:
    """The least and greatest value of one key column in a batch (None, None: no keys).

    >>> bounds = KeyRange.of(changes, "order_id")                      # doctest: +SKIP
    >>> table.where(bounds.covers(F.col("order_id")))                  # doctest: +SKIP
    """

    column: str
    lo: Any = None
    hi: Any = None

    @classmethod
    def of(cls, frame: DataFrame, column: str) -> KeyRange:
        row = frame.agg(*cls.aggregates(column)).first()
        return cls.from_row(frame, column, row)

    @classmethod
    def from_row(cls, frame: DataFrame, column: str, row: Any) -> KeyRange:
        """From an aggregate of `frame` that holds `aggregates(column)` (saves a job). A type
        whose values may not come back from Python as the same literal (timestamps and floats)
        gives no range."""
        from pyspark.sql.types import DateType, DecimalType, IntegralType, StringType

        exact = (IntegralType, StringType, DateType, DecimalType)
        if row is None or not isinstance(frame.schema[column].dataType, exact):
            return cls(column)
        return cls(column, row["lo"], row["hi"])

    @staticmethod
    def aggregates(column: str) -> list[Column]:
        from pyspark.sql import functions as F

        return [F.min(column).alias("lo"), F.max(column).alias("hi")]

    def covers(self, column: Column) -> Column:
        """A predicate true on every row whose key is in the range (always true with no keys:
        callers have nothing to look up then, and a predicate on no values would drop nulls)."""
        from pyspark.sql import functions as F

        if self.lo is None or self.hi is None:
            return F.lit(True)
        return column.between(F.lit(self.lo), F.lit(self.hi))


def write_laid_out(rows: DataFrame, path: str, key: str) -> None:
    """Append `rows` to the Delta table at `path`, files holding disjoint ranges of `key`."""
    (
        rows.repartitionByRange(key)
        .sortWithinPartitions(key)
        .write.format("delta")
        .mode("append")
        .option("maxRecordsPerFile", ROWS_PER_FILE)
        .save(path)
    )


# What `materialised` gives: the materialised frame, its row count, the range of its key.
Keys = tuple["DataFrame", int, KeyRange]


def materialised(frame: DataFrame, column: str | None = None) -> Keys:
    """Materialise `frame` once (a local checkpoint) and count its rows, and the range of
    `column` when given, in that same Spark job (an observation), not in jobs of their own.

    >>> keys, n, bounds = materialised(affected, "order_id")            # doctest: +SKIP
    """
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observed = Observation()
    measures = [F.count(F.lit(1)).alias("n"), *(KeyRange.aggregates(column) if column else [])]
    done = frame.observe(observed, *measures).localCheckpoint()
    row = observed.get
    if column is None or not enabled(frame.sparkSession):
        return done, int(row["n"]), KeyRange(column or "")
    return done, int(row["n"]), KeyRange.from_row(frame, column, row)
