"""lakejoin's own upsert (issue 37): one Delta commit that marks the changed keys' old rows
deleted with deletion vectors, adds their new rows, and writes the change rows lakejoin itself
computed as the commit's change data files. Its only read of the table is the key column (with
each row's file and index) of the files whose statistics may hold an updated or deleted key: a
MERGE reads every column of those files to write the pre-images, which lakejoin already knows.

It drives Delta 4.4.0's transaction API through py4j (docs/design/delta_txn_recipe.md), an
internal API with no compatibility promise, so key_upsert_jvm.py checks at first use that this
JVM's classes have the members it calls:
- DeltaLog; OptimisticTransaction (txnVersion, updateSetTransaction, trackReadPredicates,
  filterFiles, writeFiles, registerSQLMetrics, commit); actions.Metadata, actions.Protocol;
- files.TahoeBatchFileIndex;
- commands.DMLWithDeletionVectorsHelper, commands.DeletionVectorBitmapGenerator;
- stats.StatsCollectionUtils;
- DeltaOperations.Merge, DeltaOperations.MergePredicate; DeltaConcurrentModificationException;
- Spark's ConstantFolding, Literal, SQLMetric and PythonUtils.
A Delta of other classes, or a table with a feature it does not handle (row tracking, column
mapping, partitions, no deletion vectors: key_upsert_rules.py), makes `upsert` return None: the
caller writes the batch with the public MERGE and says why, once, in its notes.

>>> counts = upsert(spark, path, changes, ["order_id"], columns, Stamp.batch(commit))  # doctest: +SKIP
>>> counts                                                                 # doctest: +SKIP
MergeCounts(inserted=15, updated=70, deleted=15, applied=True, version=42, keys=0)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lakejoin.delta.key_ranges import write_partitions
from lakejoin.delta.markers import failpoint
from lakejoin.delta.sql_text import spark_column, spark_columns
from lakejoin.errors import BatchStateError
from lakejoin.sink.key_upsert_jvm import ConcurrentCommitError, Target, conflict, open_target
from lakejoin.sink.key_upsert_rules import (
    CHANGE_TYPE,
    DV_METRICS,
    ChangeCounts,
    ChangeType,
    WrittenFiles,
    balanced,
    commit_metrics,
    key_ranges,
)
from lakejoin.sink.merge_terms import MergeCounts
from lakejoin.sink.output_counts import final_counts
from lakejoin.sink.stamp import Stamp

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["ENABLED", "ConcurrentCommitError", "enabled", "upsert"]

TAG, TAG_VALUE = "lakejoin.write", "key_upsert"  # in the commit's tags
# The session conf that turns the upsert off ("false"): every batch then takes the public MERGE.
ENABLED = "spark.lakejoin.write.keyUpsert"


def enabled(spark: SparkSession) -> bool:
    return (spark.conf.get(ENABLED, None) or "true").strip().lower() != "false"


log = logging.getLogger(__name__)

# Ranges of old keys Delta's file pruning gets: an OR of this many is cheap to evaluate against
# every file's statistics; more of them prune no more when each file covers a range of keys.
# A guess: measure filterFiles with 150,000 keys (recipe §9.7).
MAX_RANGES = 32
# At most this many keys' first values come to the driver to make those ranges from; a batch of
# more (a full refresh that changes much of the table) reads the key column of every file.
MAX_LISTED = 500_000
FILE, ROW, INSERTED = "_lj_file", "_lj_row", "_lj_inserted"
NEW_KINDS = (ChangeType.INSERT.value, ChangeType.UPDATE_POSTIMAGE.value)


def upsert(
    spark: SparkSession,
    path: str,
    changes: DataFrame,
    key: Sequence[str],
    columns: Sequence[str],
    stamp: Stamp | None,
    *,
    note: Callable[[str], None] | None = None,
) -> MergeCounts | None:
    """Apply `changes` to the table at `path` in one commit. `changes` holds `columns` and
    `_change_type` for each key whose row changed: an insert, an update's pre- and post-image,
    or a delete; the pre-images and deletes hold the table's current rows of their keys. The
    commit carries `stamp` (sink/stamp.py): an output's is the batch commit (delta/markers.py),
    checked after it; None (a test's table) commits with no txn.

    None, after `note(why)`: Delta or the table is not one this write handles, or the table
    does not hold one row for each key `changes` updates or deletes, or holds a key it
    inserts (rows are counted by key, their values not compared); nothing was committed,
    and the caller writes the batch with the public MERGE. Raises ConcurrentCommitError when
    another commit won, BatchStateError when `changes` is no set of change rows (nothing
    committed either way)."""
    target, why = open_target(spark, path, list(key), list(columns))
    if target is None:
        _decline(path, str(why), note)
        return None
    batch = stamp.commit if stamp is not None else None
    if stamp is not None and target.txn.txnVersion(stamp.app) >= stamp.txn_version:
        # Delta would apply the commit a second time: another run committed this batch first.
        return final_counts(path, batch, MergeCounts()) if batch else MergeCounts(applied=False)
    began = time.monotonic()
    frame, counts, old_keys = _materialised(target, changes)
    fault = counts.fault()
    if fault is not None:
        raise _mismatch(path, fault)
    if counts.change_rows == 0 and batch is None:
        return MergeCounts(applied=False)  # a batch commit lands even empty; a write without one need not
    try:
        return _apply(target, frame, counts, old_keys, stamp, (began, time.monotonic()))
    except _DisagreesError as exc:
        # The output is not what its inputs at the previous pins give (someone wrote to it, or a
        # derivation is wrong): the public MERGE, which reads the rows it replaces, makes it
        # right. The deletion vector files written are in no commit: VACUUM removes them.
        log.warning("lakejoin: %s: its rows disagree with the batch's old rows: %s", path, exc)
        _decline(path, f"the table's rows are not the batch's old rows ({exc})", note)
        return None


_NOTED: set[tuple[str, str]] = set()


def _decline(path: str, why: str, note: Callable[[str], None] | None) -> None:
    """Tell the caller why the public MERGE writes this batch; the log hears it once a process."""
    text = f"the one-commit upsert does not write {path}: {why}; the public MERGE writes it"
    if (path, why) not in _NOTED:
        _NOTED.add((path, why))
        log.info(text)
    if note is not None:
        note(text)


def _materialised(
    target: Target, changes: DataFrame
) -> tuple[DataFrame, ChangeCounts, list[tuple[Any, ...]] | None]:
    """The change rows materialised once and counted by kind in that job, and the distinct
    keys (tuples of the key's columns) the batch changes but for its updates' new rows (None:
    more than MAX_LISTED keys, or no key column of a type whose values come back from Python as
    the same literal, so nothing to prune files by)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F
    from pyspark.sql.types import DateType, DecimalType, IntegralType, StringType

    kind = F.col(CHANGE_TYPE)
    observed = Observation()
    by_kind = [F.sum((kind == t.value).cast("long")).alias(t.name) for t in ChangeType]
    frame = (
        changes.select(*spark_columns(target.columns), kind)
        .observe(observed, F.count(F.lit(1)).alias("rows"), *by_kind)
        .localCheckpoint()
    )
    got = observed.get
    known = {t: int(got[t.name] or 0) for t in ChangeType}
    counts = ChangeCounts(
        inserts=known[ChangeType.INSERT],
        preimages=known[ChangeType.UPDATE_PREIMAGE],
        postimages=known[ChangeType.UPDATE_POSTIMAGE],
        deletes=known[ChangeType.DELETE],
        unknown=int(got["rows"]) - sum(known.values()),
    )
    exact = (IntegralType, StringType, DateType, DecimalType)
    if (
        not counts.keys
        or counts.keys > MAX_LISTED
        or not any(isinstance(target.field(c).dataType, exact) for c in target.key)
    ):
        return frame, counts, None
    columns = spark_columns(target.key)
    old = frame.where(kind != ChangeType.UPDATE_POSTIMAGE.value).select(*columns).distinct()
    return frame, counts, [tuple(row) for row in old.collect()]


def _apply(
    target: Target,
    frame: DataFrame,
    counts: ChangeCounts,
    old_keys: list[tuple[Any, ...]] | None,
    stamp: Stamp | None,
    times: tuple[float, float],
) -> MergeCounts:
    """Mark the old rows deleted, write the new rows and the change rows, and commit it all.
    `times`: when the upsert began and when its change rows were materialised."""
    jvm, txn = target.jvm, target.txn
    if stamp is not None:
        # txn.commit ignores the txnAppId/txnVersion confs MERGE reads: the txn action goes in here.
        txn.updateSetTransaction(stamp.app, stamp.txn_version, jvm.some(int(time.time() * 1000)))
    # Delta checks only a read predicate's partition part; on an unpartitioned table TRUE makes
    # any file another writer adds meanwhile a conflict, also for a batch of inserts, which reads
    # no file of the table.
    txn.trackReadPredicates(jvm.seq([jvm.true]), False, True)
    actions: Any = jvm.seq([])
    dv: dict[str, int] = {}
    if counts.old_rows or counts.inserts:  # inserts too: the table must not hold their keys
        actions, dv = _mark_old_rows(target, frame, old_keys, counts)
    scanned = time.monotonic()
    written, files = jvm.seq([]), WrittenFiles()
    if counts.change_rows:
        written, files = _write_rows(target, frame, counts)
    done = time.monotonic()
    began, materialised = times
    seconds = {
        # MERGE's own name for the time it takes to materialise its source.
        "materializeSourceTimeMs": materialised - began,
        "scanTimeMs": scanned - began,
        "rewriteTimeMs": done - scanned,
        "executionTimeMs": done - began,
    }
    metrics = commit_metrics(counts, dv, files, {k: int(v * 1000) for k, v in seconds.items()})
    # After writeFiles, which registers a numOutputRows of its own (data and change rows).
    txn.registerSQLMetrics(jvm.session, jvm.smap({k: jvm.metric(v) for k, v in metrics.items()}))
    return counts.merge_counts(_commit(target, actions.appendedAll(written), stamp))


def _mark_old_rows(
    target: Target, frame: DataFrame, old_keys: list[tuple[Any, ...]] | None, counts: ChangeCounts
) -> tuple[Any, dict[str, int]]:
    """Deletion vectors over the table's rows of the updated and deleted keys, found by a scan
    of the key column of the files that may hold them or an inserted key: the actions that
    commit them, and processUnmodifiedData's counts (MERGE with deletion vectors takes the same
    steps). A batch of inserts only writes no deletion vector; its scan checks their keys."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    jvm, txn, helper = target.jvm, target.txn, target.jvm.commands.DMLWithDeletionVectorsHelper
    snapshot, data_path = txn.snapshot(), target.delta_log.dataPath()
    predicate = _old_key_predicate(target, old_keys)
    # keepNumRecords: without the files' row counts no file is ever seen as wholly deleted.
    candidates = txn.filterFiles(jvm.seq([_resolved(target, snapshot, predicate)]), True)
    log.debug("%s: the batch's keys fall in %d of the table's files", target.path, candidates.size())
    index = jvm.delta.files.TahoeBatchFileIndex(
        jvm.session, "merge", candidates, target.delta_log, data_path, snapshot, False
    )
    plan = target.delta_log.createDataFrame(snapshot, candidates, False, jvm.some("merge"))
    scan = helper.createTargetDfForScanningForMatches(jvm.session, plan.queryExecution().analyzed(), index)
    matched = _matched_old_rows(target, DataFrame(scan, target.spark), frame)
    if not counts.old_rows:
        return jvm.seq([]), {}
    results = jvm.commands.DeletionVectorBitmapGenerator.buildRowIndexSetsForFilesMatchingCondition(
        jvm.session,
        txn,
        True,  # the table has DVs: False would replace a file's DV and bring its deleted rows back
        matched._jdf,
        candidates,
        jvm.true,  # the join picked the rows already
        jvm.some(F.col(FILE)._jc),
        jvm.some(F.col(ROW)._jc),
    )
    touched = helper.findFilesWithMatchingRows(
        txn, helper.generateCandidateFileMap(data_path, candidates), results
    )
    prefix = jvm.delta.stats.StatsCollectionUtils.getDataSkippingStringPrefixLength(
        jvm.session, txn.metadata()
    )
    done = helper.processUnmodifiedData(jvm.session, touched, snapshot, prefix)
    reported = done._2()
    dv = {n: int(reported.apply(n)) if reported.contains(n) else 0 for n in [*DV_METRICS, "numModifiedRows"]}
    if dv["numModifiedRows"] != counts.old_rows:
        # The DV files written are in no commit: VACUUM removes them.
        held = dv["numModifiedRows"]
        raise _DisagreesError(f"it holds {held} of the {counts.old_rows} rows the batch replaces")
    return done._1(), dv


def _old_key_predicate(target: Target, old_keys: list[tuple[Any, ...]] | None) -> Column:
    """True on every row each of whose key columns (of a type that gives exact literals) is in
    one of the batch keys' ranges of that column: for each column an OR of ranges, on which
    Delta skips files by their statistics (it reduces an IN list to one range, from the least
    key to the greatest, which random keys make the whole table), and for a key of several
    columns the AND of them, each a superset of the batch's keys, so the AND is too. The ranges
    of a key of several columns share MAX_RANGES (the predicate's size stays bounded)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DateType, DecimalType, IntegralType, StringType

    if not old_keys:
        return F.lit(True)
    exact = (IntegralType, StringType, DateType, DecimalType)
    ranged = [(i, c) for i, c in enumerate(target.key) if isinstance(target.field(c).dataType, exact)]
    if not ranged:
        return F.lit(True)
    share = max(1, MAX_RANGES // len(ranged))
    terms = []
    for i, name in ranged:
        column, dtype = spark_column(name), target.field(name).dataType

        def within(lo: Any, hi: Any, column: Column = column, dtype: Any = dtype) -> Column:
            # Literals of the column's own type: for any other the analyzer casts the column,
            # and data skipping reads no statistics through a cast.
            low, high = F.lit(lo).cast(dtype), F.lit(hi).cast(dtype)
            return column == low if lo == hi else (column >= low) & (column <= high)

        ranges = key_ranges((k[i] for k in old_keys), share)
        terms.append(balanced([within(lo, hi) for lo, hi in ranges], lambda a, b: a | b))
    return balanced(terms, lambda a, b: a & b)


def _resolved(target: Target, snapshot: Any, predicate: Column) -> Any:
    """`predicate` as a resolved Catalyst expression, its casts of literals folded: Delta's
    data skipping skips nothing on unresolved attributes (SkippingEligibleColumn) and matches
    only literals, not a Cast of one (DataFiltersBuilder)."""
    from pyspark.sql import DataFrame

    jvm = target.jvm
    empty = target.delta_log.createDataFrame(snapshot, jvm.seq([]), False, jvm.none)
    plan = DataFrame(empty, target.spark).where(predicate)._jdf.queryExecution().analyzed()
    return jvm.jvm.org.apache.spark.sql.catalyst.optimizer.ConstantFolding.apply(plan).condition()


def _matched_old_rows(target: Target, scan: DataFrame, frame: DataFrame) -> DataFrame:
    """The file and row index of each table row of an updated or deleted key. `scan` reads the
    key columns and `_metadata` only: nothing downstream asks for another column, so the
    Parquet read is of the key alone."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    key, kind = spark_columns(target.key), F.col(CHANGE_TYPE)
    # One row per key (a post-image names its pre-image's key), inserts too: an insert of a key
    # the table holds would leave the key two rows. The files pruned away hold none of them.
    batch_keys = frame.where(kind != ChangeType.UPDATE_POSTIMAGE.value).select(
        *key, (kind == ChangeType.INSERT.value).alias(INSERTED)
    )
    # Not filtered by `predicate` row by row: the scan holds only the files it kept already, and
    # an OR of many ranges outgrows Spark's generated code (64 KB), which then interprets it for
    # every row (60 s of a 65 s write at 15 M rows and 150,000 keys, session 38).
    rows = scan.select(
        *key, F.col("_metadata.file_path").alias(FILE), F.col("_metadata.row_index").alias(ROW)
    )
    observed = Observation()
    matched = (
        rows.join(F.broadcast(batch_keys), on=list(target.key), how="inner")
        .observe(observed, F.sum(F.col(INSERTED).cast("long")).alias("inserted"))
        .localCheckpoint()  # the check and Delta's bitmap aggregate read the join once
    )
    inserted = int(observed.get["inserted"] or 0)
    if inserted:
        raise _DisagreesError(f"it holds {inserted} keys the batch inserts")
    return matched.where(~F.col(INSERTED)).select(*key, F.col(FILE), F.col(ROW))


def _write_rows(target: Target, frame: DataFrame, counts: ChangeCounts) -> tuple[Any, WrittenFiles]:
    """The new rows as data files and every change row as a change data file, in one
    writeFiles: it routes a row with a null `_change_type` to the table, any other to
    `_change_data/`, so a new row goes in twice and an old row's change once."""
    from pyspark.sql import functions as F

    kind = F.col(CHANGE_TYPE)
    routes = F.when(kind.isin(*NEW_KINDS), F.array(F.lit(None).cast("string"), kind)).otherwise(F.array(kind))
    # writeFiles neither casts nor checks the schema, as a DataFrameWriter does: the rows get
    # the table's own types here.
    routed = frame.select(
        *[spark_column(f.name).cast(f.dataType).alias(f.name) for f in target.schema.fields],
        F.explode(routes).alias(CHANGE_TYPE),
    )
    # Files of disjoint key ranges, so that the next batches' pruning by key skips most of them;
    # a large batch's over every core.
    files = write_partitions(counts.new_rows, target.spark.sparkContext.defaultParallelism)
    laid_out = routed.repartitionByRange(files, *spark_columns(target.key))
    actions = target.txn.writeFiles(laid_out._jdf)
    data = changes = size = 0
    for action in target.jvm.listed(actions):
        if action.getClass().getSimpleName() == "AddCDCFile":
            changes += 1
        else:
            data, size = data + 1, size + int(action.size())
    return actions, WrittenFiles(data, changes, size)


def _commit(target: Target, actions: Any, stamp: Stamp | None) -> int:
    """Commit `actions` (and the txn's SetTransaction) as a MERGE: its version."""
    jvm = target.jvm
    predicate = getattr(jvm.delta, "DeltaOperations$MergePredicate")
    merge = getattr(jvm.delta, "DeltaOperations$Merge")
    # No condition: MERGE writes its SQL into commitInfo, and an OR of ranges would bloat it.
    operation = merge(
        jvm.none,
        jvm.none,
        jvm.none,
        jvm.none,
        jvm.seq([predicate(jvm.none, "update"), predicate(jvm.none, "delete")]),
        jvm.seq([predicate(jvm.none, "insert")]),
        jvm.seq([]),
    )
    # The commit's tags say which write made it (commitInfo.tags; history shows them).
    tags = jvm.smap({TAG: TAG_VALUE})
    failpoint("before_upsert_commit")  # its files are written, none is in a commit yet
    try:
        if stamp is None:
            return int(target.txn.commit(actions, operation, tags))
        # commit takes userMetadata from the session conf the stamp sets: Merge carries none.
        with stamp.spark(target.spark):
            return int(target.txn.commit(actions, operation, tags))
    except Exception as exc:
        refused = conflict(jvm, exc)
        if refused is None:
            raise
        raise refused from exc


class _DisagreesError(Exception):
    """The table's rows are not the old rows the change rows say it holds."""


def _mismatch(path: str, what: str) -> BatchStateError:
    return BatchStateError(
        f"the batch's change rows are no set of changes: {what}; nothing was committed",
        where=f"output {path}",
        fix=f"report it (a fault in lakejoin); meanwhile run with --conf {ENABLED}=false, which "
        "writes every batch with Delta's MERGE",
    )
