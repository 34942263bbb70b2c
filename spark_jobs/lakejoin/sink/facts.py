"""The facts a batch's write is chosen by (strategy.py), each gathered when a branch first asks
for it and kept for the rest of the write: the session's settings (`SessionSettings`: a Spark
conf read each, no job) and the table's log (`LoggedTable`: one delta-rs load, no JVM), together
a write's `WriteFacts`."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from lakejoin.delta import key_ranges
from lakejoin.sink import driver_merge, key_upsert, spark_merge

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession


class SessionSettings:
    """strategy.OutputSettings from the session's Spark conf, each read when first asked, once
    a batch: its derivation asks `upsert` (strategy.may_upsert), its write the rest."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark

    @cached_property
    def upsert(self) -> bool:
        return key_upsert.enabled(self._spark)

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
    is loaded (delta-rs) when a fact first needs it, once, and its add actions read once. One
    write asks it from the choice of the upsert to the choice of the MERGE: nothing commits in
    between (the upsert declined, or was not chosen)."""

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
    def _files(self) -> pa.Table:
        import pyarrow as pa

        return pa.table(self._log.get_add_actions(flatten=True))

    @cached_property
    def rows(self) -> int:
        return driver_merge.logged_rows(self._files)

    @cached_property
    def files(self) -> int:
        """How many data files the table holds. DESCRIBE DETAIL's `numFiles` (Spark, a JVM
        snapshot load) said the same: both count the add actions of the log's newest snapshot,
        so a table created by Spark and never written has none either way, and a file whose
        rows a deletion vector removed counts in both."""
        return int(self._files.num_rows)


@dataclass(frozen=True)
class WriteFacts:
    """The facts of one write into the table at `path`, gathered once however many of its
    steps ask them (the choice of the upsert, the first build, the choice of the MERGE).

    >>> facts = WriteFacts.of(spark, path, recomputed)  # doctest: +SKIP
    >>> facts.table.files                                # doctest: +SKIP
    0
    """

    settings: SessionSettings
    table: LoggedTable

    @classmethod
    def of(
        cls, spark: SparkSession, path: str, source: DataFrame, settings: SessionSettings | None = None
    ) -> WriteFacts:
        """The facts of a write of `source`'s columns into the table at `path`; none read yet
        (`settings`: the batch's, some of them read already)."""
        return cls(settings or SessionSettings(spark), LoggedTable(path, source))
