"""The writers of a batch's keyed rows: a batch changes only the rows whose content changed (no
spurious change rows): new rows inserted, changed ones updated, gone ones deleted, in one commit.

The table rewritten (`replace_output`, `fill`), the change rows the one-commit upsert takes
(`change_rows`, key_upsert.py), a MERGE of the keyed rows (`merge_keyed`: the driver's,
driver_merge.py, no Spark job, or Delta's public MERGE, spark_merge.py). sink/entry.py chooses
among them for a view's output (strategy.choose_output) and for a state table a view keeps
(strategy.choose: `write_state`). The tables it writes are created by
keyed_tables.py, and an output write's counts come from output_counts.py."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from lakejoin.delta.history import numbered_history
from lakejoin.delta.key_ranges import Keys, materialised, write_laid_out
from lakejoin.delta.markers import operation_metrics
from lakejoin.delta.sql_text import spark_column, spark_columns
from lakejoin.sink import driver_merge
from lakejoin.sink.merge_terms import KEEP, MergeCounts, same_key, values_differ
from lakejoin.sink.output_counts import final_counts
from lakejoin.sink.spark_merge import merge_on_spark
from lakejoin.sink.stamp import Stamp
from lakejoin.sink.strategy import SinkFacts, Strategy, lists_keys

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakejoin.delta.key_ranges import KeyRange

log = logging.getLogger(__name__)


def replace_output(path: str, rows: DataFrame, stamp: Stamp | None) -> MergeCounts:
    """Rewrite the whole table with a new schema, stamped with `stamp` (the declared policy for
    a schema change under a full refresh: downstream readers see every row deleted and inserted
    once). An output's counts come from its batch commit (output_counts.py)."""
    spark = rows.sparkSession
    writer = rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
    if stamp is None:
        writer.save(path)
        return MergeCounts()
    with stamp.spark(spark):
        writer.save(path)
    return final_counts(path, stamp.commit, MergeCounts()) if stamp.commit is not None else MergeCounts()


@dataclass(frozen=True)
class HeldRows:
    """A small batch's recomputed rows on the driver (`rows`, a pyarrow Table of the output's
    columns) and its affected keys (`keys`, tuples of the output key's columns)."""

    rows: Any
    keys: Sequence[tuple[Any, ...]]


def change_rows(new: DataFrame, old: DataFrame, key: Sequence[str]) -> DataFrame:
    """The change rows (`_change_type`: insert, update_preimage and update_postimage, delete)
    that take the rows `old` to the rows `new` (one row per key each, same columns): a key whose
    row is the same in both has none. One join of the two on the key."""
    from pyspark.sql import functions as F

    from lakejoin.sink.key_upsert_rules import CHANGE_TYPE, ChangeType

    columns, changes = list(new.columns), "_lj_changes"
    values = [c for c in columns if c not in key]
    n, o = "_lj_new", "_lj_old"
    joined = (
        new.withColumn(n, F.lit(True))
        .alias("n")
        .join(old.withColumn(o, F.lit(True)).alias("o"), same_key("n", "o", key), how="full_outer")
    )

    def image(side: str, kind: ChangeType) -> Any:
        """The row of one side as a change row: the key from whichever side holds it."""
        return F.struct(
            *[
                F.coalesce(spark_column(c, "n"), spark_column(c, "o")).alias(c)
                if c in key
                else spark_column(c, side).alias(c)
                for c in columns
            ],
            F.lit(kind.value).alias(CHANGE_TYPE),
        )

    was, now = F.col(f"o.{o}").isNotNull(), F.col(f"n.{n}").isNotNull()
    # No branch for a key whose row is the same: a null array, which explode leaves out.
    kinds = (
        F.when(~was, F.array(image("n", ChangeType.INSERT)))
        .when(~now, F.array(image("o", ChangeType.DELETE)))
        .when(
            values_differ("n", "o", values),
            F.array(image("o", ChangeType.UPDATE_PREIMAGE), image("n", ChangeType.UPDATE_POSTIMAGE)),
        )
    )
    return joined.select(F.explode(kinds).alias(changes)).select(f"{changes}.*")


@dataclass(frozen=True)
class KeyedSource:
    """What a MERGE writes: the keyed rows (`keyed`: the output's `columns` and `KEEP`, one row
    a key), how many keys (`keys`) and their range (`bounds`); `probe`, the affected keys'
    materialised frame when the batch gave it, whose values a listed MERGE reads."""

    keyed: DataFrame
    keys: int
    bounds: KeyRange | None
    probe: DataFrame | None = None


def keyed_source(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    key: Sequence[str],
    columns: Sequence[str],
    *,
    full: bool,
    known: Keys | None = None,
) -> KeyedSource:
    """`source` as a MERGE writes it: for a `full` write, its differences with the table only
    (`_differences`), counted in a Spark job; otherwise `source`, counted unless `known`."""
    from pyspark.sql import functions as F

    if full:
        source = _differences(spark, path, source.where(F.col(KEEP)), key, columns)
    if known is None or full:
        keyed, keys, bounds = materialised(source, list(key))
        return KeyedSource(keyed, keys, bounds)
    probe, keys, bounds = known
    return KeyedSource(source, keys, bounds, probe)


def merge_keyed(
    strategy: Strategy,
    spark: SparkSession,
    path: str,
    source: KeyedSource,
    batch: SinkFacts,
    key: Sequence[str],
    columns: Sequence[str],
    stamp: Stamp | None,
    *,
    rows: Any = None,
) -> MergeCounts:
    """Write `source` by the MERGE `strategy` names (`batch`: the facts it was chosen by),
    stamped with `stamp`; the counts say how many keys it covered. A state table's batch of no
    key (NO_COMMIT) writes nothing. Raises DriverMergeFailedError when delta-rs failed before its
    commit (nothing written)."""
    if strategy is Strategy.NO_COMMIT:  # nothing differs: a state table takes no commit
        return MergeCounts(applied=False)
    keyed, keys, bounds = source.keyed, source.keys, source.bounds
    if strategy is Strategy.DRIVER_MERGE:
        listed_keys = batch.settings.key_ranges
        merged = _merge_on_driver(path, keyed, columns, key, stamp, keys=keys, rows=rows, listed=listed_keys)
        return replace(merged, keys=keys)
    assert strategy is Strategy.SPARK_MERGE, strategy
    listed = None
    if lists_keys(batch):
        listed = _key_values(keyed if source.probe is None else source.probe, key[0])
    if stamp is None:
        counts = merge_on_spark(spark, path, keyed, columns, key, bounds=bounds, listed=listed)
    else:
        with stamp.spark(spark):
            counts = merge_on_spark(spark, path, keyed, columns, key, bounds=bounds, listed=listed)
        if stamp.commit is not None:
            counts = final_counts(path, stamp.commit, counts)
    return replace(counts, keys=keys)


def told_driver_failed(path: str, exc: Exception) -> None:
    """Say that the driver's MERGE failed before its commit, and Spark's writes the batch."""
    log.warning("lakejoin: the driver's MERGE into %s failed (%s); Spark's MERGE writes the batch", path, exc)


def _merge_on_driver(
    path: str,
    source: DataFrame,
    columns: Sequence[str],
    key: Sequence[str],
    stamp: Stamp | None,
    *,
    keys: int,
    rows: Any = None,
    listed: bool,
) -> MergeCounts:
    """The one MERGE of a batch of `keys` keys, by delta-rs (see driver_merge.py), stamped with
    `stamp` (the batch commit's, checked after it, or a state table's). `rows`: `source` already
    on the driver (Arrow), else collected here. `listed`: key ranges are on."""
    inserted, updated, deleted, applied = driver_merge.merge_on_driver(
        path,
        source,
        columns,
        key,
        txn=stamp.txn if stamp is not None else None,
        user_metadata=stamp.user_metadata if stamp is not None else None,
        listed=listed,
        empty=keys == 0,
        rows=rows,
    )
    if stamp is None or stamp.commit is None:
        return MergeCounts(inserted=inserted, updated=updated, deleted=deleted, applied=applied)
    return final_counts(path, stamp.commit, MergeCounts(inserted=inserted, updated=updated, deleted=deleted))


def _key_values(keys: DataFrame, column: str) -> list[Any] | None:
    """The distinct values of `column` in a small materialised frame of keys, for a literal list
    in a MERGE condition (None for a type whose values may not come back from Python as the same
    literal, as `KeyRange` does)."""
    from pyspark.sql.types import DateType, DecimalType, IntegralType, StringType

    if not isinstance(keys.schema[column].dataType, (IntegralType, StringType, DateType, DecimalType)):
        return None
    return sorted({row[0] for row in keys.select(spark_column(column)).collect() if row[0] is not None})


def _differences(
    spark: SparkSession, path: str, wanted: DataFrame, key: Sequence[str], columns: Sequence[str]
) -> DataFrame:
    """What a full write must change in the table to make it hold `wanted`: the rows whose key
    the table lacks or whose `columns` differ (`KEEP` true), and the keys the table holds that
    `wanted` lacks (`KEEP` false). One join of the two on the key; the unchanged rows, which a
    MERGE would skip anyway, are left out, so the MERGE's own join is of the differences only,
    not of the whole recompute (25-35 % less time at 1.5 M rows, docs/bench/analysis.md)."""
    from pyspark.sql import functions as F

    new, old = "_lj_new", "_lj_old"
    values = [c for c in columns if c not in key]
    wanted = wanted.select(*spark_columns(columns)).withColumn(new, F.lit(True)).alias("n")
    table = spark.read.format("delta").load(path).select(*spark_columns(columns))
    table = table.withColumn(old, F.lit(True)).alias("o")
    differs = F.col(f"o.{old}").isNull() | F.col(f"n.{new}").isNull() | values_differ("n", "o", values)
    return (
        wanted.join(table, same_key("n", "o", key), how="full_outer")
        .where(differs)
        .select(
            *[F.coalesce(spark_column(c, "n"), spark_column(c, "o")).alias(c) for c in key],
            *[spark_column(c, "n").alias(c) for c in values],
            F.col(f"n.{new}").isNotNull().alias(KEEP),
        )
    )


def fill(
    spark: SparkSession, path: str, rows: DataFrame, key: Sequence[str], stamp: Stamp | None
) -> MergeCounts:
    """A full write into a table with no files: an append laid out by key (see key_ranges),
    which later batches' MERGEs then read by range, stamped with `stamp`. A state table's retry
    that finds the append done writes nothing and says so."""
    from deltalake import DeltaTable

    if stamp is not None and stamp.commit is not None:
        with stamp.spark(spark):
            write_laid_out(rows, path, list(key))
        return final_counts(path, stamp.commit, MergeCounts())
    before = _version(path)
    if stamp is None:
        write_laid_out(rows, path, list(key))
    else:
        with stamp.spark(spark):
            write_laid_out(rows, path, list(key))
    last = numbered_history(DeltaTable(path), 1)[0][0]
    if last["version"] == before:
        return MergeCounts(applied=False)
    return MergeCounts(inserted=operation_metrics(last).get("numOutputRows", 0))


def _version(path: str) -> int:
    """The table's newest version, from its log (delta-rs): no Spark call."""
    from deltalake import DeltaTable

    return int(DeltaTable(path).version())
