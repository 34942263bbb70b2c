"""Writing a view's output: a MERGE that inserts new rows, updates changed ones, deletes gone
ones, and leaves rows whose content did not change untouched (no spurious change rows)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from lakejoin import delete_changed, driver_merge, key_ranges
from lakejoin.engine.markers import (
    OutputCommit,
    current_txn,
    failpoint,
    operation_metrics,
    stamped,
)
from lakejoin.errors import ConcurrentBatchError, SourceError
from lakejoin.key_ranges import KeyRange, Keys, materialised, write_laid_out
from lakejoin.merge_terms import HELD, KEEP, PRESENT, MergeCounts, any_of, same_key, values_differ
from lakejoin.sources import data_files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

# Above this many keys a batch takes one MERGE: its rows are too many to broadcast from a
# driver with Spark's default memory, and a shuffle of the table is then the cheaper join anyway.
SPLIT_MERGE_MAX_KEYS = 500_000
# At most this many keys (the default; a Spark conf may set it) a batch is written by one MERGE
# that also inserts, with the keys as literals in its condition: Delta then reads only the files
# that hold them, and the outer join an insert needs shuffles those few files. Above it, the
# keys fall in most files, and the split write (a probe of which keys the table holds, a MERGE
# of those without inserts, an append of the new ones) avoids shuffling the whole table. The
# literals are equalities joined by OR: Delta 4.4 skips files on those, not on an IN list.
ONE_MERGE_MAX_KEYS = "spark.lakejoin.write.oneMergeMaxKeys"
ONE_MERGE_DEFAULT = 100
# Delta's own default for new tables; when a session sets it, lakejoin follows it.
DV_DEFAULT = "spark.databricks.delta.properties.defaults.enableDeletionVectors"
# Whether Delta's MERGE materialises its source first ("auto": whenever the source's plan holds
# anything but Delta scans, as a local checkpoint does).
MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"


def nullable(kind: DataType) -> Any:
    """`kind` with every field, element and value nullable, at every depth."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    if isinstance(kind, StructType):
        return StructType([StructField(f.name, nullable(f.dataType), True, f.metadata) for f in kind.fields])
    if isinstance(kind, ArrayType):
        return ArrayType(nullable(kind.elementType), True)
    if isinstance(kind, MapType):
        return MapType(nullable(kind.keyType), nullable(kind.valueType), True)
    return kind


def ensure_keyed_table(spark: SparkSession, path: str, schema: StructType) -> None:
    """Create a table lakejoin MERGEs into (an output or a state table) if it does not exist:
    CDF on, deletion vectors on unless the session's Delta default for new tables
    (`DV_DEFAULT`) turns them off.

    Not clustered: lakejoin lays its tables out by key itself (key_ranges), and delta-rs, which
    writes a batch of few keys (driver_merge.py), does not write clustered tables. A table a
    person clusters (ALTER TABLE ... CLUSTER BY) keeps working; its batches take Spark's MERGE.

    A batch's changed keys fall on random rows of every file. Without deletion vectors each
    MERGE rewrites every file it touches, which is the whole table; with them it writes the
    changed rows and marks the old ones (at 15 M rows and 1 % changed, 0 rows copied instead of
    14.9 M, and 23 s instead of 35 s: docs/bench/analysis.md).
    """
    from delta.tables import DeltaTable

    if _exists(path):  # the usual case: decided from the log, without a Spark call
        return
    # Every column nullable in the table, nested ones too (whatever the rows that typed it say):
    # delta-rs 1.6's MERGE, which writes a batch of few keys, fails its NOT NULL check on the
    # rows it deletes.
    schema = nullable(schema)
    deletion_vectors = spark.conf.get(DV_DEFAULT, None) or "true"
    (
        DeltaTable.createIfNotExists(spark)
        .location(path)
        .addColumns(schema)
        .property("delta.enableChangeDataFeed", "true")
        .property("delta.enableDeletionVectors", deletion_vectors)
        .execute()
    )


def ensure_output(spark: SparkSession, path: str, schema: StructType) -> None:
    """Create the output table (see `ensure_keyed_table`) if it does not exist yet."""
    ensure_keyed_table(spark, path, schema)


def schema_drift(spark: SparkSession, path: str, schema: StructType) -> str | None:
    """How the output's columns differ from the ones a batch computes (None: they match)."""
    current = _schema(path)
    wanted = [(f.name, f.dataType.simpleString()) for f in schema.fields]
    have = [(f.name, f.dataType.simpleString()) for f in current.fields]
    if wanted == have:
        return None
    return f"the output has columns {have}, its inputs now give {wanted}"


def _exists(path: str) -> bool:
    from deltalake import DeltaTable

    return bool(DeltaTable.is_deltatable(path))


def _schema(path: str) -> StructType:
    """The table's columns, from its Delta log (delta-rs): no Spark snapshot to load."""
    import json

    from deltalake import DeltaTable
    from pyspark.sql.types import StructType

    return StructType.fromJson(json.loads(DeltaTable(path).schema().to_json()))


def drift_error(drift: str, *, where: str) -> SourceError:
    return SourceError(
        f"the view's columns changed: {drift}",
        where=where,
        fix="run the view with --full-refresh: it rewrites the output with the new columns",
    )


def replace_output(path: str, recomputed: DataFrame, commit: OutputCommit | None = None) -> MergeCounts:
    """Rewrite the whole output with a new schema (the declared policy for a schema change
    under a full refresh: downstream readers see every row deleted and inserted once)."""
    spark = recomputed.sparkSession
    writer = recomputed.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
    if commit is None:
        writer.save(path)
        return MergeCounts(inserted=recomputed.count())
    with stamped(spark, commit.app, commit.final):
        writer.save(path)
    return _final_counts(path, commit, MergeCounts())


def _final_counts(
    path: str, commit: OutputCommit, counts: MergeCounts, *, add_appended: bool = True
) -> MergeCounts:
    """`counts` with the rows the batch commit appended (Delta's operationMetrics, unless
    `add_appended` is false: `counts` holds them already) and its version; a batch commit Delta
    skipped means another run committed this batch first."""
    found = commit.committed(path)
    if found is None:
        raise ConcurrentBatchError(
            f"another run committed batch {commit.final.batch_id} first; this run wrote nothing more",
            where=f"output {path}",
            fix="nothing to do: the batch is committed once; run again for newer changes",
        )
    version, info = found
    appended = operation_metrics(info).get("numOutputRows", 0) if info.get("operation") == "WRITE" else 0
    if not add_appended:
        appended = 0
    return MergeCounts(
        inserted=counts.inserted + appended,
        updated=counts.updated,
        deleted=counts.deleted,
        applied=True,
        version=version,
    )


def merge_affected(
    spark: SparkSession,
    path: str,
    recomputed: DataFrame,
    affected: DataFrame,
    key: Sequence[str],
    commit: OutputCommit | None = None,
    *,
    known: Keys | None = None,
) -> MergeCounts:
    """Write the recomputed rows of the affected keys; affected keys with no row are deleted.
    `known`: `affected` as `key_ranges.materialised` gave it (frame, count, range)."""
    from pyspark.sql import functions as F

    source = affected.select(*key).join(recomputed.withColumn(PRESENT, F.lit(True)), on=list(key), how="left")
    source = source.withColumn(KEEP, F.col(PRESENT).isNotNull()).drop(PRESENT)
    return merge_by_key(spark, path, source, key, recomputed.columns, full=False, commit=commit, known=known)


def merge_full(
    spark: SparkSession,
    path: str,
    recomputed: DataFrame,
    key: Sequence[str],
    commit: OutputCommit | None = None,
) -> MergeCounts:
    """MERGE a full recompute: rows missing from it are deleted, unchanged rows are skipped."""
    from pyspark.sql import functions as F

    return merge_by_key(
        spark,
        path,
        recomputed.withColumn(KEEP, F.lit(True)),
        key,
        recomputed.columns,
        full=True,
        commit=commit,
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
) -> MergeCounts:
    """Make the table's rows under the keys of `source` what `source` says. A source row whose
    boolean `KEEP` column is false deletes its key; the others insert, or update a row whose
    `columns` differ (an unchanged row is not rewritten, so it yields no change rows). With
    `full`, every key absent from `source` is deleted too.

    With `commit` (a view's output), the last commit of the write is the batch commit (see
    engine/markers.py). Without it (a state table), the write is one commit (the driver's MERGE
    or Spark's), which inside `markers.idempotent` applies once per (app, version).

    A batch of an output too many keys for one MERGE and too large for the driver's is written by
    deleting its changed keys and appending their rows, where that suits it (delete_changed.py);
    otherwise by the split write (`_merge_then_append`).

    `known` (not with `full`): the keys of `source`, one row each, as `key_ranges.materialised`
    gave them (frame, count, range). The write then probes the table with them, and `source`
    (built from materialised frames) is materialised once, inside the probe's job, not in a
    job of its own first.

    >>> rows = rows.withColumn(KEEP, F.lit(True))                             # doctest: +SKIP
    >>> merge_by_key(spark, path, rows, ["id"], rows.columns[:-1], full=False)  # doctest: +SKIP
    MergeCounts(inserted=2, updated=1, deleted=0, applied=True)
    """
    from pyspark.sql import functions as F

    if full:
        if key_ranges.enabled(spark) and data_files(spark, path) == 0:
            return _fill(spark, path, source.where(F.col(KEEP)).select(*columns), key[0], commit)
        source = _differences(spark, path, source.where(F.col(KEEP)), key, columns)
    probe = None
    if known is None or full:
        keyed, keys, bounds = materialised(source, key[0])
    else:
        (probe, keys, bounds), keyed = known, source
    small = not full and 0 < keys <= one_merge_max_keys(spark)
    on_driver = not full and 0 < keys <= driver_merge.max_keys(spark) and driver_merge.enabled(spark)
    if on_driver and driver_merge.writable(path, keyed, most_rows=driver_merge.max_rows(spark)):
        return replace(_merge_on_driver(spark, path, keyed, columns, key, commit), keys=keys)
    large = commit is not None and not full and not small
    if large and delete_changed.applies(spark, path, keyed, key, keys):
        assert commit is not None
        values = _key_values(keyed if probe is None else probe, key[0]) or []
        written = None
        if values:
            written = delete_changed.write(spark, path, keyed, values, columns, key[0], commit)
        if written is not None:
            return replace(_final_counts(path, commit, written, add_appended=False), keys=keys)
    # A state table (no `commit`) is written by one MERGE whatever its size: a kept state costs
    # at most one commit a batch (issue 23), and it is the only state lakejoin keeps (rekey's
    # index, one row per master), a table smaller than the outputs the split write is for.
    if commit is None and keys == 0:  # nothing differs: a state table takes no commit
        return MergeCounts(applied=False)
    if small or keys > SPLIT_MERGE_MAX_KEYS or commit is None:
        listed = None
        if small and key_ranges.enabled(spark):
            listed = _key_values(keyed if probe is None else probe, key[0])
        if commit is None:
            counts = _merge(spark, path, keyed, columns, key, inserts=True, bounds=bounds, listed=listed)
        else:
            with stamped(spark, commit.app, commit.final):
                merged = _merge(spark, path, keyed, columns, key, inserts=True, bounds=bounds, listed=listed)
            counts = _final_counts(path, commit, merged)
        return replace(counts, keys=keys)
    return replace(_merge_then_append(spark, path, keyed, columns, key, bounds, commit, probe), keys=keys)


def _merge_on_driver(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    columns: Sequence[str],
    key: Sequence[str],
    commit: OutputCommit | None,
) -> MergeCounts:
    """The one MERGE of a batch of few keys, by delta-rs (see driver_merge.py): stamped as the
    batch commit with `commit`, else with the `idempotent` block's txn the session is in."""
    if commit is None:
        inserted, updated, deleted, applied = driver_merge.merge_on_driver(
            path, source, columns, key, txn=current_txn(spark), listed=key_ranges.enabled(spark)
        )
        return MergeCounts(inserted=inserted, updated=updated, deleted=deleted, applied=applied)
    marker = commit.final
    inserted, updated, deleted, _ = driver_merge.merge_on_driver(
        path,
        source,
        columns,
        key,
        txn=(commit.app, marker.txn_version),
        user_metadata=marker.as_json(),
        listed=key_ranges.enabled(spark),
    )
    return _final_counts(path, commit, MergeCounts(inserted=inserted, updated=updated, deleted=deleted))


def one_merge_max_keys(spark: SparkSession) -> int:
    """Up to how many keys a batch's write is one MERGE (`ONE_MERGE_MAX_KEYS`)."""
    return int(spark.conf.get(ONE_MERGE_MAX_KEYS, None) or ONE_MERGE_DEFAULT)


def _key_values(keys: DataFrame, column: str) -> list[Any] | None:
    """The distinct values of `column` in a small materialised frame of keys, for a literal list
    in a MERGE condition (None for a type whose values may not come back from Python as the same
    literal, as `KeyRange` does)."""
    from pyspark.sql.types import DateType, DecimalType, IntegralType, StringType

    if not isinstance(keys.schema[column].dataType, (IntegralType, StringType, DateType, DecimalType)):
        return None
    return sorted({row[0] for row in keys.select(column).collect() if row[0] is not None})


def _differences(
    spark: SparkSession, path: str, wanted: DataFrame, key: Sequence[str], columns: Sequence[str]
) -> DataFrame:
    """What a full write must change in the table to make it hold `wanted`: the rows whose key
    the table lacks or whose `columns` differ (`KEEP` true), and the keys the table holds that
    `wanted` lacks (`KEEP` false). One join of the two on the key; the unchanged rows, which a
    MERGE would skip anyway, are left out, so the write takes the split path of an incremental
    batch instead of one MERGE whose outer join shuffles the whole table and the whole
    recompute (25-35 % less time at 1.5 M rows, docs/bench/analysis.md)."""
    from pyspark.sql import functions as F

    new, old = "_lj_new", "_lj_old"
    values = [c for c in columns if c not in key]
    wanted = wanted.select(*columns).withColumn(new, F.lit(True)).alias("n")
    table = spark.read.format("delta").load(path).select(*columns).withColumn(old, F.lit(True)).alias("o")
    differs = F.col(f"o.{old}").isNull() | F.col(f"n.{new}").isNull() | values_differ("n", "o", values)
    return (
        wanted.join(table, same_key("n", "o", key), how="full_outer")
        .where(differs)
        .select(
            *[F.coalesce(F.col(f"n.`{c}`"), F.col(f"o.`{c}`")).alias(c) for c in key],
            *[F.col(f"n.`{c}`").alias(c) for c in values],
            F.col(f"n.{new}").isNotNull().alias(KEEP),
        )
    )


def _fill(
    spark: SparkSession, path: str, rows: DataFrame, first_key: str, commit: OutputCommit | None
) -> MergeCounts:
    """A full write into a table with no files: an append laid out by key (see key_ranges),
    which later batches' MERGEs then read by range. Inside `markers.idempotent` a retry that
    finds the append done writes nothing and says so."""
    from deltalake import DeltaTable

    if commit is not None:
        with stamped(spark, commit.app, commit.final):
            write_laid_out(rows, path, first_key)
        return _final_counts(path, commit, MergeCounts())
    before = _version(path)
    write_laid_out(rows, path, first_key)
    last = DeltaTable(path).history(1)[0]
    if last["version"] == before:
        return MergeCounts(applied=False)
    return MergeCounts(inserted=operation_metrics(last).get("numOutputRows", 0))


def _version(path: str) -> int:
    """The table's newest version, from its log (delta-rs): no Spark call."""
    from deltalake import DeltaTable

    return int(DeltaTable(path).version())


def _merge_then_append(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    columns: Sequence[str],
    key: Sequence[str],
    bounds: KeyRange,
    commit: OutputCommit,
    probe: DataFrame | None = None,
) -> MergeCounts:
    """Delta's MERGE joins the source with every file a key touches; once it also inserts, that
    join is an outer join, which shuffles those files whole (with random keys, the whole
    table). So the keys the table already holds are updated and deleted by a MERGE without
    inserts, whose join broadcasts the small source, and the new keys are appended: at 15 M
    rows and 1 % changed 22 s instead of 52 s (docs/bench/analysis.md). The last of the two
    commits is the batch commit, and a batch with nothing to change still makes one (an empty
    append), so that its pins are recorded. An output's write alone takes this path: a state
    table is written by one MERGE (`merge_by_key`)."""
    from pyspark.sql import functions as F

    flagged, held, inserted = _held_by_table(spark, path, source, list(key), bounds, probe)
    has_existing = held > 0
    new_rows = flagged.where(F.col(KEEP) & ~F.col(HELD)).select(*columns)
    present = flagged.where(F.col(HELD)).drop(HELD)
    merged = F.broadcast(present) if has_existing else None
    return _stamped_write(spark, path, merged, new_rows, columns, key, bounds, commit, inserted)


def _held_by_table(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    keys: list[str],
    bounds: KeyRange,
    probe: DataFrame | None = None,
) -> tuple[DataFrame, int, int]:
    """`source` with a `HELD` column (the table holds the row's key), materialised once, and
    how many source rows the table holds and how many are new rows to append, counted in that
    same job. The table is read by key column alone, within the source's key range, and
    probed with `probe` (materialised keys of `source`) when given."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    table_keys = spark.read.format("delta").load(path).where(bounds.covers(F.col(keys[0]))).select(*keys)
    held_keys = (
        table_keys.join(
            F.broadcast((source if probe is None else probe).select(*keys)), on=keys, how="left_semi"
        )
        .dropDuplicates(keys)
        .withColumn(HELD, F.lit(True))
    )
    flagged = source.join(F.broadcast(held_keys), on=keys, how="left").withColumn(
        HELD, F.coalesce(F.col(HELD), F.lit(False))
    )
    observed = Observation()
    done = flagged.observe(
        observed,
        F.sum(F.col(HELD).cast("long")).alias("held"),
        F.sum((F.col(KEEP) & ~F.col(HELD)).cast("long")).alias("new"),
    ).localCheckpoint()
    row = observed.get
    return done, int(row["held"] or 0), int(row["new"] or 0)


def _stamped_write(
    spark: SparkSession,
    path: str,
    present: DataFrame | None,
    new_rows: DataFrame,
    columns: Sequence[str],
    key: Sequence[str],
    bounds: KeyRange,
    commit: OutputCommit,
    inserted: int,
) -> MergeCounts:
    """The output write of a batch: the MERGE of the keys the output holds (`present`, None when
    it holds none) and the append of new rows, the last of them stamped as the batch commit."""
    counts = MergeCounts()
    if present is not None:
        marker = commit.pre if inserted else commit.final
        with stamped(spark, commit.app, marker):
            counts = _merge(spark, path, present, columns, key, inserts=False, bounds=bounds)
        if marker is commit.pre and not counts.applied and not commit.finishing:
            raise ConcurrentBatchError(
                f"another run is writing batch {marker.batch_id} of this view; this run stopped "
                "before its output commit",
                where=f"output {path}",
                fix="nothing to do: that run commits the batch once; run again for newer changes",
            )
        if inserted:
            failpoint("between_output_commits")
    if inserted or present is None:
        with stamped(spark, commit.app, commit.final):
            new_rows.write.format("delta").mode("append").save(path)
    return _final_counts(path, commit, counts)


def _merge(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    columns: Sequence[str],
    key: Sequence[str],
    *,
    inserts: bool,
    bounds: KeyRange | None = None,
    listed: list[Any] | None = None,
) -> MergeCounts:
    """One MERGE. `bounds`, the source's key range, and `listed`, every value the source holds
    in the key's first column, let Delta skip the target's files that hold none of them."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    values = [c for c in columns if c not in key]
    changed = values_differ("t", "s", values)
    on = same_key("t", "s", key)
    if bounds is not None:
        on = bounds.covers(F.col(f"t.`{bounds.column}`")) & on
    if listed:
        on = any_of(F.col(f"t.`{key[0]}`"), listed) & on
    keep = F.col(f"s.`{KEEP}`")
    merge = (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), on)
        .whenMatchedDelete(condition=~keep)
        .whenMatchedUpdate(condition=keep & changed, set={f"`{c}`": F.col(f"s.`{c}`") for c in values})
    )
    if inserts:
        merge = merge.whenNotMatchedInsert(
            condition=keep, values={f"`{c}`": F.col(f"s.`{c}`") for c in columns}
        )
    # Every source lakejoin merges is a local checkpoint, or a join of checkpoints and pinned
    # snapshots: deterministic and materialised already. Delta's "auto" would materialise it a
    # second time (2 Spark jobs per MERGE) because a checkpoint is not a Delta scan.
    previous = spark.conf.get(MATERIALIZE_SOURCE, None)
    spark.conf.set(MATERIALIZE_SOURCE, "none")
    try:
        result = merge.execute()
    finally:
        if previous is None:
            spark.conf.unset(MATERIALIZE_SOURCE)
        else:
            spark.conf.set(MATERIALIZE_SOURCE, previous)
    rows = result.collect() if result is not None else []
    if not rows:
        return MergeCounts(applied=False)
    row = rows[0].asDict()
    return MergeCounts(
        inserted=int(row.get("num_inserted_rows", 0)),
        updated=int(row.get("num_updated_rows", 0)),
        deleted=int(row.get("num_deleted_rows", 0)),
    )
