"""The py4j edge of Delta's transaction API, for the one-commit upsert (key_upsert.py): Scala's
collections, options and literals from Python; the check, once a process, that this JVM's Delta
has the members the upsert calls (`EXPECTED`); the transaction it opens on a table, with the
table's own refusals (key_upsert_rules.py); and Delta's conflict errors told from the others.

>>> jvm = Jvm(spark)                                     # doctest: +SKIP
>>> txn.filterFiles(jvm.seq([condition]), True)          # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakejoin.delta.conflicts import DELTA_CONFLICTS as CONFLICTS
from lakejoin.sink.key_upsert_rules import TableLog, column_refusals, member_shapes, table_refusals

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructField, StructType

__all__ = ["ConcurrentCommitError", "Jvm", "Target", "classes_refusal", "conflict", "open_target"]

ROW_INDEX_CONF = "spark.databricks.delta.deletionVectors.useMetadataRowIndex"
DELTA_VERSION = "4.4.0"  # the Delta the upsert was built for: any other takes the public MERGE

_SEQ, _MAP, _PLAN = "scala.collection.immutable.Seq", "scala.collection.immutable.Map", "LogicalPlan"
_D, _SQL = "org.apache.spark.sql.delta", "org.apache.spark.sql"
# The members used, as `member_shapes` writes them (erased types; javap-checked on 4.4.0).
EXPECTED: dict[str, set[str]] = {
    f"{_D}.DeltaLog": {
        f"static {_D}.DeltaLog forTable({_SQL}.SparkSession,java.lang.String)",
        f"{_D}.OptimisticTransaction startTransaction(scala.Option,scala.Option)",
        f"{_SQL}.Dataset createDataFrame({_D}.SnapshotDescriptor,{_SEQ},boolean,scala.Option)",
        "org.apache.hadoop.fs.Path dataPath()",
    },
    f"{_D}.OptimisticTransaction": {
        f"{_D}.Snapshot snapshot()",
        f"{_D}.actions.Metadata metadata()",
        f"{_D}.actions.Protocol protocol()",
        "long txnVersion(java.lang.String)",
        "void updateSetTransaction(java.lang.String,long,scala.Option)",
        f"void trackReadPredicates({_SEQ},boolean,boolean)",
        f"{_SEQ} filterFiles({_SEQ},boolean)",
        f"{_SEQ} writeFiles({_SQL}.Dataset)",
        f"void registerSQLMetrics({_SQL}.SparkSession,{_MAP})",
        f"long commit({_SEQ},{_D}.DeltaOperations$Operation,{_MAP})",
    },
    f"{_D}.actions.Metadata": {"java.lang.String json()"},
    f"{_D}.actions.Protocol": {"java.lang.String json()"},
    f"{_D}.files.TahoeBatchFileIndex": {
        f"<init>({_SQL}.SparkSession,java.lang.String,{_SEQ},{_D}.DeltaLog,org.apache.hadoop.fs.Path,"
        f"{_D}.SnapshotDescriptor,boolean)"
    },
    f"{_D}.commands.DMLWithDeletionVectorsHelper": {
        f"static {_SQL}.Dataset createTargetDfForScanningForMatches({_SQL}.SparkSession,"
        f"{_SQL}.catalyst.plans.logical.{_PLAN},{_D}.files.TahoeFileIndex)",
        f"static {_MAP} generateCandidateFileMap(org.apache.hadoop.fs.Path,{_SEQ})",
        f"static {_SEQ} findFilesWithMatchingRows({_D}.OptimisticTransaction,{_MAP},{_SEQ})",
        f"static scala.Tuple2 processUnmodifiedData({_SQL}.SparkSession,{_SEQ},{_D}.Snapshot,int)",
    },
    f"{_D}.commands.DeletionVectorBitmapGenerator": {
        f"static {_SEQ} buildRowIndexSetsForFilesMatchingCondition({_SQL}.SparkSession,"
        f"{_D}.OptimisticTransaction,boolean,{_SQL}.Dataset,{_SEQ},{_SQL}.catalyst.expressions.Expression,"
        "scala.Option,scala.Option)"
    },
    f"{_D}.stats.StatsCollectionUtils": {
        f"static int getDataSkippingStringPrefixLength({_SQL}.SparkSession,{_D}.actions.Metadata)"
    },
    f"{_D}.DeltaOperations$Merge": {
        f"<init>(scala.Option,scala.Option,scala.Option,scala.Option,{_SEQ},{_SEQ},{_SEQ})"
    },
    f"{_D}.DeltaOperations$MergePredicate": {"<init>(scala.Option,java.lang.String)"},
    f"{_D}.DeltaConcurrentModificationException": set(),
    f"{_SQL}.catalyst.optimizer.ConstantFolding": {
        f"static {_SQL}.catalyst.plans.logical.{_PLAN} apply({_SQL}.catalyst.plans.logical.{_PLAN})"
    },
    f"{_SQL}.catalyst.expressions.Literal": {f"static {_SQL}.catalyst.expressions.Literal TrueLiteral()"},
    f"{_SQL}.execution.metric.SQLMetric": {"<init>(java.lang.String,long)", "void set(long)"},
    "org.apache.spark.api.python.PythonUtils": {
        f"static {_SEQ} toSeq(java.util.List)",
        f"static {_MAP} toScalaMap(java.util.Map)",
    },
}


class ConcurrentCommitError(RuntimeError):
    """Delta refused the upsert's commit because another commit landed on the table during it.
    sink/conflicts.py's `batch_error` turns it, by its class, into the batch's ConcurrentBatchError;
    the files it wrote stay behind, unreferenced, until VACUUM."""


class Jvm:
    """py4j plumbing: Delta's packages, and Scala's collections, options and literals."""

    def __init__(self, spark: SparkSession) -> None:
        jvm: Any = spark._jvm  # None only on Spark Connect, which has no JVM to call
        self.jvm = jvm
        self.session: Any = spark._jsparkSession
        self.delta = jvm.org.apache.spark.sql.delta
        self.commands = self.delta.commands
        self._utils = jvm.org.apache.spark.api.python.PythonUtils
        self.none = jvm.scala.Option.empty()
        self.true = jvm.org.apache.spark.sql.catalyst.expressions.Literal.TrueLiteral()

    def some(self, value: Any) -> Any:
        return self.jvm.scala.Option.apply(value)

    def seq(self, items: Sequence[Any]) -> Any:
        """A Scala immutable Seq, what every Delta signature here takes (not scala.collection.Seq)."""
        return self._utils.toSeq(list(items))

    def smap(self, items: dict[str, Any]) -> Any:
        return self._utils.toScalaMap(items)

    def listed(self, seq: Any) -> list[Any]:
        """A Scala Seq's elements, one py4j call each: for short Seqs (the files a write added)."""
        return list(self.jvm.scala.jdk.javaapi.CollectionConverters.asJava(seq))

    def metric(self, value: int) -> Any:
        metric = self.jvm.org.apache.spark.sql.execution.metric.SQLMetric("sum", 0)
        metric.set(int(value))  # a Python int picks set(long); set(double) throws on a sum metric
        return metric


@dataclass(frozen=True)
class Target:
    """The table being written and the transaction open on it."""

    spark: SparkSession
    jvm: Jvm
    path: str
    delta_log: Any
    txn: Any
    table: TableLog
    key: list[str]
    columns: list[str]

    @property
    def schema(self) -> StructType:
        from pyspark.sql.types import StructType

        return StructType.fromJson(self.table.schema)

    def field(self, name: str) -> StructField:
        return next(f for f in self.schema.fields if f.name.lower() == name.lower())


def open_target(
    spark: SparkSession, path: str, key: list[str], columns: list[str]
) -> tuple[Target | None, str]:
    """A transaction on the table at `path`, or why the upsert may not write it."""
    why = classes_refusal(spark)
    if why is not None:
        return None, why
    jvm = Jvm(spark)
    delta_log = jvm.delta.DeltaLog.forTable(jvm.session, path)
    # Both arguments explicit: py4j applies no Scala defaults. None/None reads a fresh snapshot.
    txn = delta_log.startTransaction(jvm.none, jvm.none)
    table = TableLog.of(str(txn.protocol().json()), str(txn.metadata().json()))
    reasons = table_refusals(table.writer_features, table.configuration, table.partition_columns)
    reasons += column_refusals(table.columns, columns, key)
    # The scan reads row indexes from `_metadata`; the conf's other value is Delta's older path.
    if (spark.conf.get(ROW_INDEX_CONF, None) or "true").lower() != "true":
        reasons.append(f"{ROW_INDEX_CONF} is off")
    if reasons:
        return None, "; ".join(reasons)
    return Target(spark, jvm, path, delta_log, txn, table, key, columns), ""


_CHECKED: list[str | None] = []  # the process's one answer: its JVM's classes do not change


def classes_refusal(spark: SparkSession) -> str | None:
    """Why Delta's classes in this JVM are not the ones the upsert was built for (None: they
    are), asked once per process."""
    if not _CHECKED:
        _CHECKED.append(_check_classes(spark._jvm))
    return _CHECKED[0]


def _check_classes(jvm: Any) -> str | None:
    from py4j.java_gateway import JavaClass

    try:
        version = str(jvm.io.delta.package.VERSION())
    except Exception as exc:  # a class py4j cannot find is a JavaPackage, which cannot be called
        return f"Delta's version cannot be read ({type(exc).__name__})"
    if version != DELTA_VERSION:
        return f"Delta is {version}; the upsert was built for {DELTA_VERSION}"
    for name, wanted in EXPECTED.items():
        found = jvm
        for part in name.split("."):
            found = getattr(found, part)
        if not isinstance(found, JavaClass):
            return f"Delta {version} has no class {name}"
        # _java_lang_class, not Class.forName: Spark loads Delta's jar in a class loader of its own.
        cls = found._java_lang_class
        # One py4j call a member (Arrays.toString of a Method[] is not reachable through py4j):
        # a few hundred, once a process.
        listed = [str(m.toString()) for m in [*cls.getMethods(), *cls.getConstructors()]]
        have = member_shapes("[" + ", ".join(listed) + "]")
        missing = sorted(wanted - have)
        if missing:
            return f"{name} in Delta {version} has no {missing[0]}"
    return None


def conflict(jvm: Jvm, exc: Exception) -> ConcurrentCommitError | None:
    """The ConcurrentCommitError for a Delta conflict (None: `exc` is no conflict). py4j raises
    Py4JJavaError, whose `java_exception` says it by its class; once delta.exceptions is
    imported (delta.tables imports it), PySpark raises Delta's Python twin of it instead (one
    of delta.exceptions' classes, which share no base of Delta's own and keep no Java object)."""
    origin = getattr(exc, "java_exception", None)
    if origin is not None:
        if not jvm.delta.DeltaConcurrentModificationException._java_lang_class.isInstance(origin):
            return None
        kind, text = str(origin.getClass().getSimpleName()), str(origin.getMessage() or "")
    elif type(exc).__module__.startswith("delta.exceptions") and type(exc).__name__ in CONFLICTS:
        kind, text = type(exc).__name__, str(exc)
    else:
        return None
    lines = text.strip().splitlines()
    return ConcurrentCommitError(
        f"Concurrent commit: Delta refused the upsert ({kind}): {lines[0] if lines else ''}"
    )
