"""The one-commit upsert's rules without a JVM (sink/key_upsert_rules.py, and the pieces of
key_upsert_jvm.py that are plain Python): which tables it writes, the key ranges its file
pruning reads, how it reads Delta's members, what its commit records, and how a conflict reads."""

from __future__ import annotations

import datetime
import decimal
import json
from types import SimpleNamespace

import pytest

from lakejoin.errors import ConcurrentBatchError
from lakejoin.sink import key_upsert, key_upsert_jvm
from lakejoin.sink.conflicts import batch_error as _concurrent
from lakejoin.sink.key_upsert_jvm import EXPECTED, ConcurrentCommitError, conflict
from lakejoin.sink.key_upsert_rules import (
    ChangeCounts,
    TableLog,
    WrittenFiles,
    balanced,
    column_refusals,
    commit_metrics,
    key_ranges,
    member_shapes,
    table_refusals,
)
from lakejoin.sink.merge_terms import MergeCounts

pytestmark = pytest.mark.unit

D = datetime.date


@pytest.mark.parametrize(
    ("values", "max_ranges", "ranges"),
    [
        ([], 4, []),
        ([5], 4, [(5, 5)]),
        ([3, 1, 2, 2, None], 4, [(1, 3)]),  # sorted, deduplicated, nulls left out, neighbours joined
        ([1, 2, 4, 5, 9], 4, [(1, 2), (4, 5), (9, 9)]),
        ([1, 3, 5, 7], 4, [(1, 1), (3, 3), (5, 5), (7, 7)]),  # exactly max_ranges: kept
        ([1, 2, 10, 11, 12, 40], 1, [(1, 40)]),
        ([1, 5, 6, 20, 21, 100], 2, [(1, 21), (100, 100)]),  # the widest gap stays open
        ([1, 10, 20, 30], 3, [(1, 10), (20, 20), (30, 30)]),
        ([1, 11, 21, 31], 3, [(1, 1), (11, 11), (21, 31)]),  # equal gaps: the last one closes
        ([-3, -2, 0], 4, [(-3, -2), (0, 0)]),
        (
            [D(2026, 1, 1), D(2026, 1, 2), D(2026, 1, 5)],
            4,
            [(D(2026, 1, 1), D(2026, 1, 2)), (D(2026, 1, 5),) * 2],
        ),
        (
            [D(2026, 1, 1), D(2026, 1, 3), D(2026, 3, 1)],
            2,
            [(D(2026, 1, 1), D(2026, 1, 3)), (D(2026, 3, 1),) * 2],
        ),
        (["a", "b", "c"], 4, [("a", "a"), ("b", "b"), ("c", "c")]),  # strings have no neighbours
        (["a", "b", "c", "d", "e", "f"], 3, [("a", "b"), ("c", "d"), ("e", "f")]),  # groups of two
        (["a", "zz", "zzz"], 2, [("a", "zz"), ("zzz", "zzz")]),  # no distance: by count, not by gap
        ([decimal.Decimal("1.5"), decimal.Decimal("2.5"), decimal.Decimal("9")], 2, [(1.5, 2.5), (9, 9)]),
    ],
    ids=[
        "none",
        "one",
        "messy_input",
        "runs",
        "at_the_cap",
        "one_range",
        "widest_gap",
        "smallest_gap",
        "tie",
        "negative",
        "days_join",
        "days_by_gap",
        "strings",
        "strings_by_count",
        "strings_ignore_gaps",
        "decimals_no_neighbours",
    ],
)
def test_old_keys_become_at_most_max_ranges_that_cover_them(values, max_ranges, ranges):
    assert key_ranges(values, max_ranges) == ranges


@pytest.mark.parametrize("max_ranges", [1, 2, 7, 128])
def test_the_ranges_cover_every_key_and_overlap_nothing(max_ranges):
    values = [v * v % 1009 for v in range(500)]

    ranges = key_ranges(values, max_ranges)

    assert len(ranges) <= max_ranges
    assert all(lo <= hi for lo, hi in ranges)
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert all(any(lo <= v <= hi for lo, hi in ranges) for v in values)


def test_no_ranges_at_all_is_an_error():
    with pytest.raises(ValueError, match="at least 1"):
        key_ranges([1], 0)


@pytest.mark.parametrize(
    ("terms", "text"),
    [
        (["a"], "a"),
        (["a", "b"], "(a OR b)"),
        (["a", "b", "c", "d"], "((a OR b) OR (c OR d))"),
        (["a", "b", "c", "d", "e"], "((a OR b) OR (c OR (d OR e)))"),
    ],
)
def test_terms_join_in_a_balanced_tree(terms, text):
    assert balanced(terms, lambda x, y: f"({x} OR {y})") == text


def test_a_thousand_ranges_make_a_shallow_predicate():
    def depth(tree):
        return 1 + max(depth(tree[0]), depth(tree[1])) if isinstance(tree, tuple) else 0

    assert depth(balanced(list(range(1000)), lambda x, y: (x, y))) == 10


def test_no_terms_is_an_error():
    with pytest.raises(ValueError, match="no terms"):
        balanced([], lambda x, y: x)


LAKEJOIN = {"changeDataFeed", "deletionVectors", "appendOnly", "invariants"}  # what its outputs carry
ON = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true"}


def assert_each_named(reasons, refused):
    """One reason for each expected refusal, in order, each holding its words."""
    assert len(reasons) == len(refused)
    assert all(part in reason for part, reason in zip(refused, reasons, strict=True))


@pytest.mark.parametrize(
    ("features", "configuration", "partitions", "refused"),
    [
        (LAKEJOIN, ON, [], []),
        (LAKEJOIN | {"domainMetadata", "v2Checkpoint", "inCommitTimestamp"}, ON, [], []),
        (LAKEJOIN, {**ON, "delta.appendOnly": "false", "delta.enableChangeDataFeed": "TRUE"}, [], []),
        (LAKEJOIN, ON, ["day"], ["partitioned (by day)"]),
        (LAKEJOIN | {"columnMapping"}, {**ON, "delta.columnMapping.mode": "name"}, [], ["maps column names"]),
        (LAKEJOIN | {"columnMapping"}, {**ON, "delta.columnMapping.mode": "none"}, [], []),
        (LAKEJOIN | {"rowTracking"}, ON, [], ["row ids"]),  # supported is enough: new files get ids
        (LAKEJOIN, {**ON, "delta.enableRowTracking": "true"}, [], ["row ids"]),
        (LAKEJOIN, {**ON, "delta.enableDeletionVectors": "false"}, [], ["deletion vectors are off"]),
        (LAKEJOIN - {"deletionVectors"}, ON, [], ["deletion vectors are off"]),
        (set(), ON, [], ["deletion vectors are off"]),  # a legacy protocol lists no features
        (LAKEJOIN, {"delta.enableDeletionVectors": "true"}, [], ["change data feed is off"]),
        (LAKEJOIN, {**ON, "delta.appendOnly": "true"}, [], ["append-only"]),
        (LAKEJOIN | {"clustering", "identityColumns"}, ON, [], ["not handle: clustering, identityColumns"]),
        (
            LAKEJOIN | {"rowTracking"},
            {"delta.enableDeletionVectors": "true"},
            ["day"],
            ["partitioned", "row ids", "change data feed is off"],
        ),
    ],
    ids=[
        "lakejoin_output",
        "features_delta_adds",
        "properties_any_case",
        "partitioned",
        "column_mapping",
        "column_mapping_none",
        "row_tracking_supported",
        "row_tracking_enabled",
        "dvs_disabled",
        "dvs_unsupported",
        "legacy_protocol",
        "no_change_feed",
        "append_only",
        "unhandled_features",
        "several",
    ],
)
def test_the_upsert_refuses_a_table_it_does_not_handle(features, configuration, partitions, refused):
    reasons = table_refusals(features, configuration, partitions)

    assert_each_named(reasons, refused)


@pytest.mark.parametrize(
    ("table", "columns", "key", "refused"),
    [
        (["id", "v"], ["v", "id"], ["id"], []),
        (["id", "V"], ["ID", "v"], ["Id"], []),  # Spark's names compare without case
        (["a", "b", "v"], ["a", "b", "v"], ["a", "b"], []),
        (["id", "v"], ["id"], ["id"], ["missing ['v'], extra []"]),
        (["id", "v"], ["id", "v", "w"], ["id"], ["missing [], extra ['w']"]),
        (["id", "v"], ["id", "v"], [], ["no key"]),
        (["id", "v"], ["id", "v"], ["k"], ["key ['k'] is not among"]),
        (["id", "_change_type"], ["id", "_change_type"], ["id"], ["['_change_type']"]),
        (["filePath", "v"], ["filePath", "v"], ["filePath"], ["['filePath']"]),
    ],
    ids=[
        "same",
        "case",
        "composite",
        "missing",
        "extra",
        "no_key",
        "key_elsewhere",
        "cdc_column",
        "helper_name",
    ],
)
def test_the_rows_must_be_the_tables_columns_and_name_nothing_delta_uses(table, columns, key, refused):
    reasons = column_refusals(table, columns, key)

    assert_each_named(reasons, refused)


def test_the_table_is_read_from_its_log_actions():
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    protocol = {
        "protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "writerFeatures": ["deletionVectors"]}
    }
    metadata = {
        "metaData": {
            "id": "x",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(schema),
            "partitionColumns": [],
            "configuration": {"delta.enableDeletionVectors": "true"},
        }
    }

    table = TableLog.of(json.dumps(protocol), json.dumps(metadata))

    assert table == TableLog(
        frozenset({"deletionVectors"}), {"delta.enableDeletionVectors": "true"}, (), schema
    )
    assert table.columns == ["id"]
    legacy = TableLog.of(
        json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}), json.dumps(metadata)
    )
    assert legacy.writer_features == frozenset()


# Method.toString of the real 4.4.0 jar (docs/design/delta_txn_recipe.md §2, probe2).
PROBED = {
    "org.apache.spark.sql.delta.DeltaLog": [
        "public org.apache.spark.sql.delta.OptimisticTransaction org.apache.spark.sql.delta.DeltaLog"
        ".startTransaction(scala.Option,scala.Option)",
        "public org.apache.spark.sql.Dataset org.apache.spark.sql.delta.DeltaLog.createDataFrame("
        "org.apache.spark.sql.delta.SnapshotDescriptor,scala.collection.immutable.Seq,boolean,scala.Option)",
        "public static org.apache.spark.sql.delta.DeltaLog org.apache.spark.sql.delta.DeltaLog.forTable("
        "org.apache.spark.sql.SparkSession,java.lang.String)",
    ],
    "org.apache.spark.sql.delta.OptimisticTransaction": [
        "public scala.collection.immutable.Seq org.apache.spark.sql.delta.OptimisticTransaction.filterFiles("
        "scala.collection.immutable.Seq,boolean)",
        "public scala.collection.immutable.Seq org.apache.spark.sql.delta.OptimisticTransaction.writeFiles("
        "org.apache.spark.sql.Dataset)",
        "public long org.apache.spark.sql.delta.OptimisticTransaction.commit(scala.collection.immutable.Seq,"
        "org.apache.spark.sql.delta.DeltaOperations$Operation,scala.collection.immutable.Map)",
        "public void org.apache.spark.sql.delta.OptimisticTransaction.registerSQLMetrics("
        "org.apache.spark.sql.SparkSession,scala.collection.immutable.Map)",
        "public long org.apache.spark.sql.delta.OptimisticTransaction.txnVersion(java.lang.String)",
        "public void org.apache.spark.sql.delta.OptimisticTransaction.updateSetTransaction(java.lang.String,"
        "long,scala.Option)",
        "public void org.apache.spark.sql.delta.OptimisticTransaction.trackReadPredicates("
        "scala.collection.immutable.Seq,boolean,boolean)",
    ],
    "org.apache.spark.sql.delta.commands.DMLWithDeletionVectorsHelper": [
        "public static org.apache.spark.sql.Dataset org.apache.spark.sql.delta.commands"
        ".DMLWithDeletionVectorsHelper.createTargetDfForScanningForMatches(org.apache.spark.sql.SparkSession,"
        "org.apache.spark.sql.catalyst.plans.logical.LogicalPlan,org.apache.spark.sql.delta.files.TahoeFileIndex)",
        "public static scala.collection.immutable.Map org.apache.spark.sql.delta.commands"
        ".DMLWithDeletionVectorsHelper.generateCandidateFileMap(org.apache.hadoop.fs.Path,"
        "scala.collection.immutable.Seq)",
        "public static scala.collection.immutable.Seq org.apache.spark.sql.delta.commands"
        ".DMLWithDeletionVectorsHelper.findFilesWithMatchingRows(org.apache.spark.sql.delta.OptimisticTransaction,"
        "scala.collection.immutable.Map,scala.collection.immutable.Seq)",
        "public static scala.Tuple2 org.apache.spark.sql.delta.commands.DMLWithDeletionVectorsHelper"
        ".processUnmodifiedData(org.apache.spark.sql.SparkSession,scala.collection.immutable.Seq,"
        "org.apache.spark.sql.delta.Snapshot,int)",
    ],
    "org.apache.spark.sql.delta.commands.DeletionVectorBitmapGenerator": [
        "public static scala.collection.immutable.Seq org.apache.spark.sql.delta.commands"
        ".DeletionVectorBitmapGenerator.buildRowIndexSetsForFilesMatchingCondition("
        "org.apache.spark.sql.SparkSession,org.apache.spark.sql.delta.OptimisticTransaction,boolean,"
        "org.apache.spark.sql.Dataset,scala.collection.immutable.Seq,"
        "org.apache.spark.sql.catalyst.expressions.Expression,scala.Option,scala.Option)"
    ],
    "org.apache.spark.sql.delta.files.TahoeBatchFileIndex": [
        "public org.apache.spark.sql.delta.files.TahoeBatchFileIndex(org.apache.spark.sql.SparkSession,"
        "java.lang.String,scala.collection.immutable.Seq,org.apache.spark.sql.delta.DeltaLog,"
        "org.apache.hadoop.fs.Path,org.apache.spark.sql.delta.SnapshotDescriptor,boolean)"
    ],
    "org.apache.spark.sql.delta.DeltaOperations$Merge": [
        "public org.apache.spark.sql.delta.DeltaOperations$Merge(scala.Option,scala.Option,scala.Option,"
        "scala.Option,scala.collection.immutable.Seq,scala.collection.immutable.Seq,"
        "scala.collection.immutable.Seq)"
    ],
}


@pytest.mark.parametrize("name", sorted(PROBED))
def test_the_expected_members_are_the_ones_the_real_jar_listed(name):
    listing = "[" + ", ".join(PROBED[name]) + "]"

    assert member_shapes(listing) <= EXPECTED[name]


@pytest.mark.parametrize(
    ("listing", "shapes"),
    [
        ("[public long a.B.f(int,long)]", {"long f(int,long)"}),
        ("[public static final int a.B.g()]", {"static int g()"}),
        ("[public a.B$C(scala.Option,java.lang.String)]", {"<init>(scala.Option,java.lang.String)"}),
        ("[public void a.B.h() throws java.io.IOException,java.lang.X]", {"void h()"}),
        ("[public default java.lang.String a.Action.json()]", {"java.lang.String json()"}),
        ("[]", set()),
    ],
    ids=["method", "static", "constructor", "throws", "trait_default", "empty"],
)
def test_a_member_reads_as_its_shape_whatever_class_declares_it(listing, shapes):
    assert member_shapes(listing) == shapes


def test_the_module_docstring_names_every_delta_class_it_checks():
    doc = key_upsert.__doc__ or ""
    for name in EXPECTED:
        short = name.rpartition(".")[2].replace("$", ".")
        assert short in doc, f"key_upsert's docstring does not name {short}"


@pytest.mark.parametrize(
    ("counts", "fault"),
    [
        (ChangeCounts(inserts=2, preimages=1, postimages=1, deletes=1), None),
        (ChangeCounts(), None),
        (ChangeCounts(preimages=2, postimages=1), "2 update pre-images but 1 post-images"),
        (ChangeCounts(inserts=1, unknown=3), "3 change rows have a _change_type other than"),
    ],
)
def test_change_rows_pair_up_and_name_a_known_kind(counts, fault):
    found = counts.fault()

    if fault is None:
        assert found is None
    else:
        assert fault in str(found)


def test_the_commit_records_a_merges_counts():
    counts = ChangeCounts(inserts=2, preimages=3, postimages=3, deletes=1)
    dv = {"numRemovedFiles": 1, "numDeletionVectorsAdded": 2, "numModifiedRows": 4}

    metrics = commit_metrics(counts, dv, WrittenFiles(data=1, changes=2, data_bytes=700), {"scanTimeMs": 5})

    assert metrics["operationNumSourceRows"] == 6  # one source row a key
    assert (metrics["numTargetRowsInserted"], metrics["numTargetRowsUpdated"]) == (2, 3)
    assert (metrics["numTargetRowsDeleted"], metrics["numOutputRows"]) == (1, 5)
    assert (metrics["numTargetFilesRemoved"], metrics["numTargetDeletionVectorsAdded"]) == (1, 2)
    assert metrics["numTargetDeletionVectorsUpdated"] == 0
    assert (metrics["numTargetFilesAdded"], metrics["numTargetChangeFilesAdded"]) == (1, 2)
    assert (metrics["numTargetBytesAdded"], metrics["scanTimeMs"]) == (700, 5)
    assert "numModifiedRows" not in metrics
    assert counts.merge_counts(9) == MergeCounts(inserted=2, updated=3, deleted=1, version=9)


class _JavaError(Exception):
    """Py4JJavaError's shape: the Java exception in `java_exception`."""

    def __init__(self, java_exception):
        super().__init__("An error occurred while calling o42.commit")
        self.java_exception = java_exception


def _java(simple_name, message, conflicts=True):
    cls = SimpleNamespace(getSimpleName=lambda: simple_name)
    return SimpleNamespace(getClass=lambda: cls, getMessage=lambda: message, conflicts=conflicts)


FAKE_JVM = SimpleNamespace(
    delta=SimpleNamespace(
        DeltaConcurrentModificationException=SimpleNamespace(
            _java_lang_class=SimpleNamespace(isInstance=lambda e: e.conflicts)
        )
    )
)


@pytest.mark.parametrize(
    "exc",
    [
        _JavaError(_java("MetadataChangedException", "[DELTA_METADATA_CHANGED] The metadata changed.\nmore")),
        # Delta's Python twin, which PySpark raises once delta.exceptions is imported.
        type("ConcurrentAppendException", (Exception,), {"__module__": "delta.exceptions.captured"})(
            "[DELTA_CONCURRENT_APPEND.WITHOUT_HINT] Transaction conflict detected."
        ),
    ],
    ids=["py4j", "pyspark_converted"],
)
def test_a_delta_conflict_becomes_what_the_batch_reports_as_concurrent(exc):
    refused = conflict(FAKE_JVM, exc)

    assert isinstance(refused, ConcurrentCommitError)
    assert "\n" not in str(refused)
    assert isinstance(_concurrent(refused, 3, where="view 'v' output"), ConcurrentBatchError)


@pytest.mark.parametrize(
    "exc",
    [ValueError("no Java here"), _JavaError(_java("SparkException", "Job aborted", conflicts=False))],
    ids=["python", "other_java"],
)
def test_another_error_is_no_conflict(exc):
    assert conflict(FAKE_JVM, exc) is None


def test_the_upsert_loads_without_a_jvm():
    assert key_upsert.__all__ == ["ENABLED", "ConcurrentCommitError", "enabled", "upsert"]
    assert key_upsert_jvm.DELTA_VERSION == "4.4.0"
