"""The facts a batch's write is chosen by (strategy.py), each gathered when a branch first asks
for it and kept for the rest of the write: the session's settings (`SessionSettings`: a Spark
conf read each, no job) and the table's log (`LoggedTable`: one delta-rs load, no JVM)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from lakejoin.delta import key_ranges
from lakejoin.sink import driver_merge, spark_merge

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession


class SessionSettings:
    """strategy.Settings from the session's Spark conf, each read when first asked."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark

    @cached_property
    def listed_max_keys(self) -> int:
        return spark_merge.one_merge_max_keys(self._spark)

    @cached_property
    def driver(self) -> bool:
        return driver_merge.enabled(self._spark)

    @cached_property
    def driver_max_keys(self) -> int:
        return driver_merge.max_keys(self._spark)

    @cached_property
    def driver_max_rows(self) -> int:
        return driver_merge.max_rows(self._spark)

    @cached_property
    def key_ranges(self) -> bool:
        return key_ranges.enabled(self._spark)


class LoggedTable:
    """strategy.TableLog of the table at `path` written with the columns of `source`: the log
    is loaded (delta-rs) when a fact first needs it, once."""

    def __init__(self, path: str, source: DataFrame) -> None:
        self._path = path
        self._source = source

    @cached_property
    def _log(self) -> DeltaTable:
        from deltalake import DeltaTable

        return DeltaTable(self._path)

    @cached_property
    def driver_writes(self) -> bool:
        # The columns first: a batch delta-rs cannot write loads no log.
        return driver_merge.atomic_columns(self._source) and driver_merge.writes_table(self._log)

    @cached_property
    def rows(self) -> int:
        return driver_merge.logged_rows(self._log)
