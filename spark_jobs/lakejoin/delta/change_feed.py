"""Change Data Feed reads over pinned version ranges, collapsed to the net change per key."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from lakejoin.errors import ChangesUnreadableError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CHANGE = "_lj_change"
VERSION = "_commit_version"
CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


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


def net_changes(change_feed: DataFrame, key: str) -> DataFrame:
    """The last change of every key: its row, `_lj_change` (upsert or delete) and the
    `_commit_version` of that change. A delete carries the deleted row's last values.

    Pre-images are dropped. Within one commit an insert outranks a delete, because an
    overwrite writes both for a key that it keeps.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    data_columns = [c for c in change_feed.columns if c not in CDF_COLUMNS]
    rank = F.when(F.col("_change_type") == "delete", 0).otherwise(1)
    latest_first = Window.partitionBy(key).orderBy(F.col("_commit_version").desc(), rank.desc())
    return (
        change_feed.where(F.col("_change_type") != "update_preimage")
        .withColumn("_lj_rank", F.row_number().over(latest_first))
        .where(F.col("_lj_rank") == 1)
        .select(
            *data_columns,
            F.when(F.col("_change_type") == "delete", F.lit(ChangeKind.DELETE.value))
            .otherwise(F.lit(ChangeKind.UPSERT.value))
            .alias(CHANGE),
            F.col(VERSION),
        )
    )


def upserts(net: DataFrame) -> DataFrame:
    """The rows of a net change (see `net_changes`) that exist at the pin, with the source's
    columns only: what an upserted key holds now; a deleted key has no row."""
    from pyspark.sql import functions as F

    data_columns = [c for c in net.columns if c not in (CHANGE, VERSION)]
    return net.where(F.col(CHANGE) == ChangeKind.UPSERT.value).select(*data_columns)


def no_changes(table: DataFrame) -> DataFrame:
    """An empty set of net changes with the columns net_changes gives for `table`."""
    from pyspark.sql import functions as F

    return table.limit(0).select(
        *table.columns, F.lit(None).cast("string").alias(CHANGE), F.lit(None).cast("bigint").alias(VERSION)
    )


def translate_read_error(exc: Exception, *, role: str, path: str, first: int, last: int) -> Exception:
    """Turn Delta's errors about unreadable CDF ranges into an error that says what to do."""
    text = str(exc)
    markers = (
        "DELTA_CHANGE_DATA_FILE_NOT_FOUND",
        "FileNotFoundException",
        "FILE_NOT_EXIST",
        "DELTA_CANNOT_TIME_TRAVEL",
        "VersionNotFoundException",
        "DELTA_MISSING_CHANGE_DATA",
        "DELTA_CHANGE_TABLE_FEED_DISABLED",
        "DELTA_TRUNCATED_TRANSACTION_LOG",
    )
    if not any(marker in text for marker in markers):
        return exc
    return ChangesUnreadableError(
        f"the changes of {path} between versions {first} and {last} can no longer be read "
        "(vacuumed files, a cleaned-up log, or the Change Data Feed was off for part of the range)",
        where=role,
        fix="rebuild this view from the current snapshot with `lakejoin run SPEC --view VIEW --full-refresh`",
    )
