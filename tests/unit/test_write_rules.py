"""The output write's pure rules: the counts a write reports once its batch commit is found
(sink/output_counts.py, the output's log stood in for), the SQL its driver MERGE writes keys
and names as, which tables that MERGE may write, and the Spark settings that choose a path (the
choice itself: test_sink_choice.py)."""

from __future__ import annotations

import datetime
import decimal
from types import SimpleNamespace

import pyarrow as pa
import pytest

from lakejoin.delta import key_ranges, lookups, markers, sql_text
from lakejoin.delta.markers import FINAL, BatchMarker, OutputCommit, operation_metrics
from lakejoin.delta.records import BatchMode
from lakejoin.errors import CommittedElsewhereError, ConcurrentBatchError
from lakejoin.sink import driver_merge, spark_merge
from lakejoin.sink.merge_terms import MergeCounts
from lakejoin.sink.output_counts import final_counts

pytestmark = pytest.mark.unit

FINAL_MARK = BatchMarker(3, FINAL, BatchMode.INCREMENTAL, {"s": 1}, {"s": 2})
COMMIT = OutputCommit("app", FINAL_MARK)
WRITTEN = MergeCounts(inserted=2, updated=3, deleted=1, applied=False, keys=6)


@pytest.mark.parametrize(
    ("commit_info", "counts"),
    [
        ({"operation": "MERGE", "operationMetrics": {"numOutputRows": "9"}}, MergeCounts(2, 3, 1, True, 12)),
        ({"operation": "WRITE", "operationMetrics": {"numOutputRows": "4"}}, MergeCounts(6, 3, 1, True, 12)),
        ({"operation": "WRITE", "operationMetrics": {"num_output_rows": 4}}, MergeCounts(6, 3, 1, True, 12)),
        ({"operation": "WRITE"}, MergeCounts(2, 3, 1, True, 12)),
    ],
    ids=["merge", "append_adds_its_rows", "delta_rs_metrics", "no_metrics"],
)
def test_a_write_reports_its_counts_with_the_batch_commits_version(monkeypatch, commit_info, counts):
    """The batch commit's appended rows count as inserted when it is an append (a first build
    laid out by key) the write has not counted."""
    monkeypatch.setattr(markers, "find_commit", lambda path, wanted: (12, FINAL_MARK, commit_info))

    assert final_counts("/out", COMMIT, WRITTEN) == counts


def test_a_batch_commit_delta_skipped_means_another_run_committed_the_batch(monkeypatch):
    monkeypatch.setattr(markers, "find_commit", lambda path, wanted: None)

    with pytest.raises(CommittedElsewhereError, match="another run committed batch 3 first"):
        final_counts("/out", COMMIT, WRITTEN)


@pytest.mark.parametrize(("txn", "elsewhere"), [(7, True), (9, True), (5, False), (None, False)])
def test_a_conflict_with_another_runs_commit_of_this_batch_is_the_batch_committed(tmp_path, txn, elsewhere):
    """Batch 3 commits with txn version 7 (markers.py): a conflict after it (or a later batch)
    landed leaves this run nothing to do; before it, the conflict stays an error."""
    import pyarrow as pa
    from deltalake import CommitProperties, Transaction, write_deltalake

    from lakejoin.sink.conflicts import or_committed as _or_committed

    path = str(tmp_path / "out")
    done = [Transaction(app_id="app", version=txn)] if txn is not None else None
    write_deltalake(path, pa.table({"k": [1]}), commit_properties=CommitProperties(app_transactions=done))
    conflict = ConcurrentBatchError("another commit landed on this table", where="out")

    found = _or_committed(conflict, path, COMMIT.app, COMMIT.final.batch_id)

    assert isinstance(found, CommittedElsewhereError) is elsewhere
    if elsewhere:
        assert "another run committed batch 3 first" in found.what
    else:
        assert found is conflict


@pytest.mark.parametrize(
    ("metrics", "read"),
    [
        (
            {"numOutputRows": "7", "numTargetRowsUpdated": "2"},
            {"numOutputRows": 7, "numTargetRowsUpdated": 2},
        ),
        (
            {"num_output_rows": 7, "num_target_rows_deleted": 1},
            {"numOutputRows": 7, "numTargetRowsDeleted": 1},
        ),
        ({"executionTimeMs": "1.5", "numFiles": "x", "numRows": "3"}, {"numRows": 3}),  # numbers only
        (None, {}),
    ],
)
def test_operation_metrics_read_spark_and_delta_rs_alike(metrics, read):
    assert operation_metrics({"operationMetrics": metrics}) == read


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        (7, "7"),
        (-3, "-3"),
        # Typed: DataFusion reads a bare 1.50 as a Float64, and a decimal(38, x) key of more
        # than ~15 digits as another number (issue 51).
        (decimal.Decimal("1.50"), "CAST('1.50' AS DECIMAL(3, 2))"),
        (decimal.Decimal("-12345678901234567.89"), "CAST('-12345678901234567.89' AS DECIMAL(19, 2))"),
        (decimal.Decimal("0E-10"), "CAST('0.0000000000' AS DECIMAL(10, 10))"),
        (datetime.date(2026, 1, 3), "DATE '2026-01-03'"),
        (datetime.datetime(2026, 1, 3, 4, 5, 6, 7), "TIMESTAMP '2026-01-03T04:05:06.000007'"),  # was a DATE
        (b"a'b", "X'612762'"),
        ("k1", "'k1'"),
        ("O'Brien", "'O''Brien'"),  # a quote doubled: a literal, not SQL
    ],
)
def test_a_key_value_is_written_as_a_sql_literal(value, literal):
    assert sql_text.literal(value) == literal


@pytest.mark.parametrize(
    ("name", "quoted"), [("id", '"id"'), ('odd"name', '"odd""name"'), ("with space", '"with space"')]
)
def test_a_name_is_quoted(name, quoted):
    assert sql_text.quoted(name) == quoted


@pytest.mark.parametrize(
    ("schema", "writable"),
    [
        (pa.schema([("id", pa.string()), ("v", pa.int64())]), True),
        (pa.schema([pa.field("id", pa.string(), nullable=False)]), False),
        (pa.schema([("s", pa.struct([pa.field("x", pa.int32(), nullable=False)]))]), False),
        (pa.schema([("l", pa.list_(pa.field("item", pa.int32(), nullable=False)))]), False),
        (pa.schema([("l", pa.list_(pa.struct([("x", pa.int32())])))]), True),
    ],
    ids=["nullable", "not_null_column", "not_null_field", "not_null_element", "nested_nullable"],
)
def test_the_driver_merge_writes_only_tables_nullable_throughout(schema, writable):
    assert driver_merge.all_nullable(schema) is writable


class Conf:
    def __init__(self, settings: dict[str, str]) -> None:
        self.settings = settings

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.settings.get(name, default)


@pytest.mark.parametrize(
    ("settings", "figures"),
    [
        ({}, (100, True, 20_000, 3_000_000, True, 20_000)),
        (
            {
                spark_merge.ONE_MERGE_MAX_KEYS: "0",
                driver_merge.ENABLED: "FALSE",
                driver_merge.MAX_KEYS: "5",
                driver_merge.MAX_ROWS: "10",
                key_ranges.ENABLED: "false",
                lookups.MAX_KEYS: "7",
            },
            (0, False, 5, 10, False, 7),  # 0 keys: never one MERGE (tests force the other writes so)
        ),
        (
            {lookups.ENABLED: "false", lookups.MAX_KEYS: "7", spark_merge.ONE_MERGE_MAX_KEYS: "3"},
            (3, True, 20_000, 3_000_000, True, 0),
        ),
    ],
    ids=["defaults", "set", "driver_lookups_off"],
)
def test_the_write_paths_settings_and_their_defaults(settings, figures):
    spark = SimpleNamespace(conf=Conf(settings))

    assert (
        spark_merge.one_merge_max_keys(spark),
        driver_merge.enabled(spark),
        driver_merge.max_keys(spark),
        driver_merge.max_rows(spark),
        key_ranges.enabled(spark),
        lookups.max_keys(spark),
    ) == figures


def test_a_flagged_keys_write_refused_every_time_stops_the_batch_naming_the_table(tmp_path):
    """engine/health.py tries a refused commit again; when every attempt is refused the batch
    stops with the conflict's message (not delta-rs's own error), or is in if another run
    committed it."""
    from deltalake.exceptions import CommitFailedError

    from lakejoin.engine.write import write_flagged
    from tests.unit.shop import shop

    class Refused:
        path = str(tmp_path / "health" / "display_products")

        def write(self) -> int:
            raise CommitFailedError("Commit failed: a concurrent transaction deleted data")

    spec = shop()
    view = spec.views["display_products"]
    with pytest.raises(ConcurrentBatchError) as raised:
        write_flagged(Refused(), spec, view, batch_id=3)  # type: ignore[arg-type]
    assert not isinstance(raised.value, CommittedElsewhereError)  # no output: not committed
    assert "another commit landed on this table while batch 3 was writing it" in raised.value.what
    assert "flagged keys" in raised.value.where and Refused.path in raised.value.where
    assert "concurrent transaction deleted data" in raised.value.what


def test_a_decimal_key_of_17_digits_is_updated_and_deleted_by_the_driver_merge(tmp_path):
    """The MERGE condition lists the keys as typed literals: a bare 12345678901234567.89 is a
    Float64 to DataFusion, which matched no row, so the update inserted a second row of the key
    and the delete deleted nothing (issue 51)."""
    from deltalake import DeltaTable, write_deltalake

    d = decimal.Decimal
    money = pa.decimal128(38, 2)
    path = str(tmp_path / "out")
    keys = [d("12345678901234567.89"), d("12345678901234567.88"), d("1.00")]
    write_deltalake(path, pa.table({"k": pa.array(keys, money), "v": ["a", "b", "c"]}))
    batch = pa.table({"k": pa.array(keys[:2], money), "v": ["a2", "b"], driver_merge.KEEP: [True, False]})

    counts = driver_merge.merge_rows(path, batch, ["k", "v"], ["k"], txn=None)

    assert counts == (0, 1, 1, True)
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    assert sorted((r["k"], r["v"]) for r in rows) == [(keys[2], "c"), (keys[0], "a2")]


def test_the_driver_merge_writes_lists_of_structs_with_the_change_feed_spark_would(tmp_path):
    """list_join's output (a list of structs with strings, null lists and empty ones) is written
    by the driver's MERGE too (issue 52): from a sliced Arrow table, as Spark's `toArrow` may
    hand it; an unchanged row gives no change row, an updated one its pre- and post-image."""
    from deltalake import DeltaTable, write_deltalake

    item = pa.struct([("address_id", pa.string()), ("city", pa.string())])
    schema = pa.schema([("k", pa.string()), ("addresses", pa.list_(item))])
    path = str(tmp_path / "out")
    old = [
        {"k": "p1", "addresses": [{"address_id": "a1", "city": "Oslo"}]},
        {"k": "p2", "addresses": None},
        {"k": "p3", "addresses": []},
        {"k": "p4", "addresses": [{"address_id": "a2", "city": None}]},
    ]
    write_deltalake(
        path, pa.Table.from_pylist(old, schema), configuration={"delta.enableChangeDataFeed": "true"}
    )
    new = [
        {"k": "pad", "addresses": [{"address_id": "zz", "city": "x" * 40}], driver_merge.KEEP: True},
        {"k": "p1", "addresses": [{"address_id": "a1", "city": "Oslo"}], driver_merge.KEEP: True},
        {"k": "p2", "addresses": [{"address_id": "a3", "city": "Bergen"}, None], driver_merge.KEEP: True},
        {"k": "p3", "addresses": None, driver_merge.KEEP: False},
        {"k": "p5", "addresses": [], driver_merge.KEEP: True},
    ]
    batch = pa.Table.from_pylist(new, schema.append(pa.field(driver_merge.KEEP, pa.bool_()))).slice(1)

    counts = driver_merge.merge_rows(path, batch, ["k", "addresses"], ["k"], txn=("app", 1))

    assert counts == (1, 1, 1, True)
    table = DeltaTable(path)
    rows = {r["k"]: r["addresses"] for r in table.to_pyarrow_table().to_pylist()}
    assert rows == {
        "p1": [{"address_id": "a1", "city": "Oslo"}],
        "p2": [{"address_id": "a3", "city": "Bergen"}, None],
        "p4": [{"address_id": "a2", "city": None}],
        "p5": [],
    }
    feed = pa.table(table.load_cdf(starting_version=1).read_all()).to_pylist()
    assert sorted((r["k"], r["_change_type"]) for r in feed) == [
        ("p2", "update_postimage"),
        ("p2", "update_preimage"),
        ("p3", "delete"),
        ("p5", "insert"),
    ]
    assert table.transaction_version("app") == 1


def test_a_batch_of_no_key_is_its_commit_alone_from_the_driver(tmp_path):
    """A batch whose affected keys hold nothing to write still commits its txn and marker (the
    batch's pins): one delta-rs commit of no rows, no MERGE and no JVM (issue 52)."""
    from deltalake import DeltaTable, write_deltalake

    path = str(tmp_path / "out")
    write_deltalake(path, pa.table({"k": [1], "v": ["a"]}))
    nothing = pa.table(
        {
            "k": pa.array([], pa.int64()),
            "v": pa.array([], pa.string()),
            driver_merge.KEEP: pa.array([], pa.bool_()),
        }
    )

    counts = driver_merge.merge_rows(
        path, nothing, ["k", "v"], ["k"], txn=("app", 4), user_metadata="batch 4"
    )

    table = DeltaTable(path)
    assert counts == (0, 0, 0, True)
    assert table.version() == 1 and table.transaction_version("app") == 4
    assert table.history(1)[0].get("userMetadata") == "batch 4"
    assert table.to_pyarrow_table().to_pylist() == [{"k": 1, "v": "a"}]
    assert driver_merge.merge_rows(path, nothing, ["k", "v"], ["k"], txn=("app", 4)) == (0, 0, 0, False)
    assert DeltaTable(path).version() == 1  # the same batch again: already committed


def test_the_driver_merge_writes_no_decimal_column_delta_rs_cannot_keep_statistics_of():
    """delta-rs writes a decimal's min and max as a double: 99999999999.0000000001 is kept as
    99999999999.0, and Spark then skips the file for `= 99999999999.0000000001` (an outright
    wrong answer for the output's readers, and a key a later MERGE does not find). A double
    holds every decimal of up to 15 digits exactly."""
    fine = pa.schema([("k", pa.decimal128(15, 2)), ("n", pa.int64()), ("s", pa.string())])
    nested = pa.schema([("s", pa.struct([("x", pa.decimal128(16, 2))]))])

    assert driver_merge.exact_statistics(fine) is True
    assert driver_merge.exact_statistics(pa.schema([("k", pa.decimal128(38, 2))])) is False
    assert driver_merge.exact_statistics(nested) is False


def test_the_driver_merge_refused_for_another_reason_than_a_conflict_says_that_reason(tmp_path):
    """delta-rs's CommitFailedError holds every refused commit: an append-only table's refusal
    of a delete is no 'another commit landed' (issue 51)."""
    from deltalake import write_deltalake
    from deltalake.exceptions import CommitFailedError

    path = str(tmp_path / "out")
    append_only = {"delta.appendOnly": "true"}
    write_deltalake(path, pa.table({"k": [1, 2], "v": ["a", "b"]}), configuration=append_only)
    batch = pa.table({"k": [1], "v": ["a"], driver_merge.KEEP: [False]})

    with pytest.raises(CommitFailedError, match="append-only") as raised:
        driver_merge.merge_rows(path, batch, ["k", "v"], ["k"], txn=None)
    assert not isinstance(raised.value, ConcurrentBatchError)


class _JavaClass:
    def __init__(self, name: str, parent: _JavaClass | None = None) -> None:
        self.name, self.parent = name, parent

    def getName(self) -> str:  # noqa: N802 - py4j's names
        return self.name

    def getSimpleName(self) -> str:  # noqa: N802
        return self.name.rsplit(".", 1)[1]

    def getSuperclass(self) -> _JavaClass | None:  # noqa: N802
        return self.parent


def _java_error(text: str, *classes: str, message: str = "") -> Exception:
    """Py4JJavaError's shape: its text (the whole Java stack trace), and `java_exception` (of
    `message`), whose class has `classes` for superclasses, most derived first."""
    cls = None
    for name in reversed(classes):
        cls = _JavaClass(name, cls)
    error = RuntimeError(text)
    error.java_exception = SimpleNamespace(  # type: ignore[attr-defined]
        getClass=lambda: cls, getCause=lambda: None, getMessage=lambda: message
    )
    return error


TRACE = (
    "An error occurred while calling o87.execute.\n: org.apache.spark.SparkException: "
    "[FAILED_READ_FILE.FILE_NOT_EXIST] Encountered error while reading file file:/out/part-0.parquet. "
    "File does not exist.\n\tat org.apache.spark.executor.Executor$TaskRunner.run(Executor.scala:619)\n"
    "\tat java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1136)\n"
)


def test_a_conflict_is_told_by_its_class_never_by_the_word_concurrent(tmp_path):
    """engine/write.py says 'another commit landed ... run the view again' only for Delta's and
    delta-rs's conflicts: nearly every JVM stack trace names java.util.concurrent, whatever
    failed (issue 51). delta-rs's errors are real ones; Delta's are their shapes in PySpark."""
    from deltalake import DeltaTable, write_deltalake

    from lakejoin.sink.conflicts import batch_error as _concurrent
    from lakejoin.sink.key_upsert_jvm import ConcurrentCommitError

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"k": [1, 2]}))
    stale = DeltaTable(path)
    write_deltalake(path, pa.table({"k": [3]}), mode="overwrite")
    try:
        stale.delete("k = 1")  # its file was removed meanwhile: delta-rs's ConcurrentDeleteRead
    except Exception as exc:  # noqa: BLE001 - the table below says what it is
        delta_rs_conflict: Exception = exc
    append_only = str(tmp_path / "append_only")
    write_deltalake(append_only, pa.table({"k": [1]}), configuration={"delta.appendOnly": "true"})
    try:
        DeltaTable(append_only).delete("k = 1")
    except Exception as exc:  # noqa: BLE001
        refused: Exception = exc
    twin = type("ConcurrentAppendException", (Exception,), {"__module__": "delta.exceptions.captured"})
    connect = type("UnknownException", (Exception,), {"getCondition": lambda self: "DELTA_METADATA_CHANGED"})
    java_conflict = (
        "io.delta.exceptions.ConcurrentAppendException",
        "org.apache.spark.sql.delta.ConcurrentAppendException",
        "io.delta.exceptions.DeltaConcurrentModificationException",
        "org.apache.spark.sql.delta.DeltaConcurrentModificationException",
        "java.util.ConcurrentModificationException",
    )
    table = [
        (delta_rs_conflict, True),
        (refused, False),  # a CommitFailedError too
        (twin("[DELTA_CONCURRENT_APPEND.WITHOUT_HINT] Transaction conflict detected."), True),
        (connect("[DELTA_METADATA_CHANGED] The metadata of the Delta table has been changed"), True),
        (_java_error("An error occurred while calling o9.commit", *java_conflict, message="[DELTA_"), True),
        (ConcurrentCommitError("Delta refused the upsert (ConcurrentAppendException)"), True),
        (_java_error(TRACE, "org.apache.spark.SparkException", "java.lang.Exception"), False),
        (OSError(28, "No space left on device: java.util.concurrent.ExecutionException"), False),
    ]

    found = [isinstance(_concurrent(exc, 3, where="view 'v'"), ConcurrentBatchError) for exc, _ in table]

    assert found == [conflict for _, conflict in table]


@pytest.mark.parametrize(
    ("rows", "cores", "files"),
    [
        (0, 2, 1),
        (56, 2, 1),  # a micro-batch's rows stay one file
        (19_999, 2, 1),
        (20_000, 2, 2),  # a core each once each gets ROWS_PER_TASK rows
        (150_000, 2, 2),  # the 1 % batch at 15 M orders: was one task
        (150_000, 8, 8),
        (600_000, 2, 3),  # past ROWS_PER_FILE a file, whatever the cores
    ],
)
def test_a_large_batch_is_written_over_every_core_a_small_one_as_one_file(rows, cores, files):
    assert key_ranges.ROWS_PER_TASK == 10_000 and key_ranges.ROWS_PER_FILE == 250_000
    assert key_ranges.write_partitions(rows, cores) == files
