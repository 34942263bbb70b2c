"""Writing a view's output: a batch changes only the rows whose content changed (no spurious
change rows): new rows inserted, changed ones updated, gone ones deleted, in one commit.

An output's batch is written by lakejoin's own upsert (key_upsert.py), which reads only the
output's key column, when the view kind derived the affected keys' old rows (`upsert_affected`)
and for a full refresh's differences (`merge_full`); a batch of a handful of keys into a small
table by the driver's MERGE (driver_merge.py, no Spark job); the rest, and every batch the
upsert declines, by Delta's public MERGE (spark_merge.py), the way strategy.py chooses.
The tables it writes are created by keyed_tables.py, and an output write's counts come from
output_counts.py."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from lakejoin.delta.key_ranges import Keys, materialised, write_laid_out
from lakejoin.delta.markers import OutputCommit, operation_metrics
from lakejoin.delta.sql_text import spark_column, spark_columns
from lakejoin.sink import driver_merge
from lakejoin.sink.facts import WriteFacts
from lakejoin.sink.merge_terms import KEEP, PRESENT, MergeCounts, same_key, values_differ
from lakejoin.sink.output_counts import final_counts
from lakejoin.sink.spark_merge import merge_on_spark
from lakejoin.sink.stamp import Stamp
from lakejoin.sink.strategy import SinkFacts, Strategy, Target, choose, driver_sized, lists_keys

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


def replace_output(path: str, recomputed: DataFrame, commit: OutputCommit | None = None) -> MergeCounts:
    """Rewrite the whole output with a new schema (the declared policy for a schema change
    under a full refresh: downstream readers see every row deleted and inserted once)."""
    spark = recomputed.sparkSession
    writer = recomputed.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
    if commit is None:
        writer.save(path)
        return MergeCounts(inserted=recomputed.count())
    with Stamp.batch(commit).spark(spark):
        writer.save(path)
    return final_counts(path, commit, MergeCounts())


def merge_affected(
    spark: SparkSession,
    path: str,
    recomputed: DataFrame,
    affected: DataFrame,
    key: Sequence[str],
    commit: OutputCommit | None = None,
    *,
    known: Keys | None = None,
    held: HeldRows | None = None,
    facts: WriteFacts | None = None,
) -> MergeCounts:
    """Write the recomputed rows of the affected keys; affected keys with no row are deleted.
    `known`: `affected` as `key_ranges.materialised` gave it (frame, count, range). `held`: the
    same rows and keys on the driver, which the driver's MERGE writes as they are (no Spark job
    reads the rows again). `facts`: the write's, when `upsert_affected` gathered them first."""
    from pyspark.sql import functions as F

    present = recomputed.withColumn(PRESENT, F.lit(True))
    source = affected.select(*spark_columns(key)).join(present, on=list(key), how="left")
    source = source.withColumn(KEEP, F.col(PRESENT).isNotNull()).drop(PRESENT)
    rows = driver_merge.keyed_rows(held.rows, held.keys, key) if held is not None else None
    return merge_by_key(
        spark,
        path,
        source,
        key,
        recomputed.columns,
        full=False,
        commit=commit,
        known=known,
        rows=rows,
        facts=facts or WriteFacts.of(spark, path, recomputed),
    )


@dataclass(frozen=True)
class HeldRows:
    """A small batch's recomputed rows on the driver (`rows`, a pyarrow Table of the output's
    columns) and its affected keys (`keys`, tuples of the output key's columns)."""

    rows: Any
    keys: Sequence[tuple[Any, ...]]


def upsert_affected(
    spark: SparkSession,
    path: str,
    recomputed: DataFrame,
    previous: DataFrame,
    key: Sequence[str],
    commit: OutputCommit,
    *,
    keys: int | None,
    note: Callable[[str], None],
    facts: WriteFacts | None = None,
) -> MergeCounts | None:
    """Write the affected keys' rows (`recomputed`, `keys` of them when counted) given the rows
    the output holds for those keys (`previous`, derived from the inputs at the previous pins:
    views/base.Rebuilt): the change rows of the keys whose row differs, in one commit that
    reads only the output's key column (key_upsert.py).

    None: the caller writes the batch with `merge_affected` (given the same `facts`). Either
    the keys are few enough for the driver's MERGE (delta-rs, no Spark job), or the upsert
    declined, after `note(why)`; nothing was written either way."""
    from lakejoin.sink import key_upsert

    if keys is not None:
        facts = facts or WriteFacts.of(spark, path, recomputed)
        batch = SinkFacts(Target.OUTPUT, full=False, keys=keys, settings=facts.settings, table=facts.table)
        if choose(batch) is Strategy.DRIVER_MERGE:
            return None
    changes = change_rows(recomputed, previous.select(*spark_columns(recomputed.columns)), key)
    return key_upsert.upsert(
        spark, path, changes, key, recomputed.columns, commit, note=note, stamp=Stamp.batch(commit)
    )


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


def merge_full(
    spark: SparkSession,
    path: str,
    recomputed: DataFrame,
    key: Sequence[str],
    commit: OutputCommit | None = None,
    *,
    note: Callable[[str], None] | None = None,
) -> MergeCounts:
    """Make the output hold exactly a full recompute: rows missing from it are deleted,
    unchanged rows are left alone. An output's differences are found by one join of the
    recompute with the table, which gives their old rows too: the one-commit upsert writes them
    (key_upsert.py), else, after `note(why)`, Delta's MERGE. A table small enough for the
    driver (`_driver_sized`) has its differences written by `merge_by_key`: by the driver's
    MERGE when they are few."""
    from pyspark.sql import functions as F

    from lakejoin.sink import key_upsert

    facts = WriteFacts.of(spark, path, recomputed)
    if facts.settings.key_ranges and _empty(facts):
        stamp = Stamp.batch(commit) if commit is not None else Stamp.session(spark)
        return _fill(spark, path, recomputed, key, stamp)
    if commit is not None and key_upsert.enabled(spark) and not _driver_sized(facts):
        table = spark.read.format("delta").load(path).select(*spark_columns(recomputed.columns))
        changes = change_rows(recomputed, table, key)
        written = key_upsert.upsert(
            spark, path, changes, key, recomputed.columns, commit, note=note, stamp=Stamp.batch(commit)
        )
        if written is not None:
            return written
    return merge_by_key(
        spark,
        path,
        recomputed.withColumn(KEEP, F.lit(True)),
        key,
        recomputed.columns,
        full=True,
        commit=commit,
        facts=facts,
    )


def merge_by_key(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    key: Sequence[str],
    columns: Sequence[str],
    *,
    full: bool,
    commit: OutputCommit | None = None,
    known: Keys | None = None,
    rows: Any = None,
    facts: WriteFacts | None = None,
) -> MergeCounts:
    """Make the table's rows under the keys of `source` what `source` says. A source row whose
    boolean `KEEP` column is false deletes its key; the others insert, or update a row whose
    `columns` differ (an unchanged row is not rewritten, so it yields no change rows). With
    `full`, every key absent from `source` is deleted too. One commit, by the driver's MERGE or
    Spark's (strategy.py).

    With `commit` (a view's output), the commit is the batch commit (see delta/markers.py).
    Without it (a state table), inside `markers.idempotent` it applies once per (app, version).

    `known` (not with `full`): the keys of `source`, one row each, as `key_ranges.materialised`
    gave them (frame, count, range), so they are not counted again. `rows`: `source` on the
    driver already (a pyarrow Table, `columns` and `KEEP`), which the driver's MERGE takes as it is.
    `facts`: the write's, when its caller gathered them already (sink/facts.py).

    >>> rows = rows.withColumn(KEEP, F.lit(True))                             # doctest: +SKIP
    >>> merge_by_key(spark, path, rows, ["id"], rows.columns[:-1], full=False)  # doctest: +SKIP
    MergeCounts(inserted=2, updated=1, deleted=0, applied=True)
    """
    from pyspark.sql import functions as F

    facts = facts or WriteFacts.of(spark, path, source)
    # A state table's write runs inside engine/write.py's `idempotent` block: its stamp.
    stamp = Stamp.batch(commit) if commit is not None else Stamp.session(spark)
    if full:
        if facts.settings.key_ranges and _empty(facts):
            return _fill(spark, path, source.where(F.col(KEEP)).select(*spark_columns(columns)), key, stamp)
        source = _differences(spark, path, source.where(F.col(KEEP)), key, columns)
    probe = None
    if known is None or full:
        keyed, keys, bounds = materialised(source, list(key))
    else:
        (probe, keys, bounds), keyed = known, source
    target = Target.STATE if commit is None else Target.OUTPUT
    batch = SinkFacts(target, full=full, keys=keys, settings=facts.settings, table=facts.table)
    chosen = choose(batch)
    if chosen is Strategy.DRIVER_MERGE:
        try:
            merged = _merge_on_driver(
                path, keyed, columns, key, stamp, keys=keys, rows=rows, listed=facts.settings.key_ranges
            )
            return replace(merged, keys=keys)
        except driver_merge.DriverMergeFailedError as exc:  # nothing committed: Spark's MERGE writes it
            log.warning(
                "lakejoin: the driver's MERGE into %s failed (%s); Spark's MERGE writes the batch", path, exc
            )
            chosen = choose(replace(batch, driver_failed=True))
    if chosen is Strategy.NO_COMMIT:  # nothing differs: a state table takes no commit
        return MergeCounts(applied=False)
    listed = None
    if lists_keys(batch):
        listed = _key_values(keyed if probe is None else probe, key[0])
    if stamp is None:
        counts = merge_on_spark(spark, path, keyed, columns, key, bounds=bounds, listed=listed)
    else:
        with stamp.spark(spark):
            counts = merge_on_spark(spark, path, keyed, columns, key, bounds=bounds, listed=listed)
        if stamp.commit is not None:
            counts = final_counts(path, stamp.commit, counts)
    return replace(counts, keys=keys)


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


def _driver_sized(facts: WriteFacts) -> bool:
    """Whether a full write's differences go to `merge_by_key` (strategy.driver_sized). A full
    recompute of a small view (a fan-out fallback on a table of a few rows) then costs a join
    and a delta-rs MERGE, 0.3-0.5 s, not the JVM upsert's 2.5 s (the demo, session 57)."""
    return driver_sized(facts.settings, facts.table)


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


def _fill(
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
    last = DeltaTable(path).history(1)[0]
    if last["version"] == before:
        return MergeCounts(applied=False)
    return MergeCounts(inserted=operation_metrics(last).get("numOutputRows", 0))


def _empty(facts: WriteFacts) -> bool:
    """Whether the table holds no data file (created, never written)."""
    return facts.table.files == 0


def _version(path: str) -> int:
    """The table's newest version, from its log (delta-rs): no Spark call."""
    from deltalake import DeltaTable

    return int(DeltaTable(path).version())
