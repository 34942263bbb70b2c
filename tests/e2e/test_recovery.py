"""A batch is its output's commit (DESIGN §2, version 2): a view with nothing new does nothing, a
run killed at any commit point of a batch leaves either nothing or something the next run
finishes exactly once, four runs of one pipeline commit each batch once, and the batch log is an index
the outputs can rebuild.

The crashes are real: `lakejoin run` in a subprocess (its own Spark JVM) with
LAKEJOIN_FAILPOINT=<point>, which SIGKILLs the process at that point of the batch.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from deltalake import DeltaTable

from lakejoin.delta.log import BatchLog
from lakejoin.delta.markers import app_id, output_batches
from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus
from lakejoin.delta.sources import history_may_hold_changes
from lakejoin.engine.batch import BatchOutcome, batch_log
from lakejoin.engine.pending import pending_work
from lakejoin.errors import BatchStateError, QualityCheckError
from lakejoin.sink import key_upsert
from lakejoin.sink.writers import driver_merge
from lakejoin.spec.layout import reports_folder, state_path
from tests.lakehouse import (
    CLI_TIMEOUT,
    MERCHANTS,
    PRODUCTS,
    Lakehouse,
    run_cli_with_failpoint,
)

# The one-commit upsert (sink/key_upsert.py), which takes a batch of many keys into a large
# output, forced for a batch of a few keys (otherwise one MERGE from the driver).
UPSERT = {driver_merge.MAX_KEYS: "0"}

pytestmark = pytest.mark.e2e

VIEW = "display_products"


def seeded(lake: Lakehouse, how: str = "left", extra: str = ""):
    merchants = [("m1", "Acme", "a.png"), ("m2", "Bolt", "b.png"), ("m3", "Cask", None)]
    lake.create("merchants", MERCHANTS, merchants)
    lake.create(
        "products",
        PRODUCTS,
        [
            ("p1", "pen", 1.0, "m1"),
            ("p2", "cup", 2.0, "m2"),
            ("p3", "lid", 3.0, "m2"),
            ("p4", "mug", 4.0, None),
            ("p5", "box", 5.0, "m9"),  # dangling fk
        ],
    )
    return lake.spec(how, extra=extra)


def change_everything_once(lake: Lakehouse) -> None:
    """A left update, an fk move, a new key, a right update and deletes on both sides."""
    lake.upsert("products", "product_id", [("p1", "pen", 1.5, "m1"), ("p2", "cup", 2.0, "m3")])
    lake.upsert("products", "product_id", [("p6", "cap", 6.0, "m2")])
    lake.upsert("merchants", "merchant_id", [("m2", "Bolt Ltd", "b2.png")])
    lake.delete("merchants", "merchant_id", ["m1"])
    lake.delete("products", "product_id", ["p4"])


def change_after_the_crash(lake: Lakehouse) -> None:
    lake.upsert("products", "product_id", [("p7", "jar", 7.0, "m3")])
    lake.upsert("merchants", "merchant_id", [("m3", "Cask & Co", "c.png")])
    lake.delete("products", "product_id", ["p3"])


def version(path: str) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(path).version()) if DeltaTable.is_deltatable(path) else -1


def versions(spec) -> dict[str, int]:  # noqa: ANN001 - PipelineSpec
    """The current version of every table a batch writes: output, state, batch log."""
    view = spec.views[VIEW]
    paths = {"output": view.path, "state": state_path(spec, view), "log": batch_log(spec).path}
    return {name: version(path) for name, path in paths.items()}


def output_txn(spec) -> int | None:  # noqa: ANN001
    return output_batches(spec.views[VIEW].path, app_id(spec.name, VIEW)).txn_version


def statuses(log: BatchLog) -> list[tuple[int, str]]:
    return [(r.batch_id, r.status.value) for r in log.history(VIEW)]


def keys_of(rows: list[dict]) -> list[str]:
    return [r["product_id"] for r in rows]


def assert_log_agrees_with_output(spec) -> None:  # noqa: ANN001
    """The log's last committed batch is the output's: same id as its txn, same version."""
    committed = batch_log(spec).last_committed(VIEW)
    assert committed is not None
    assert output_txn(spec) == 2 * committed.batch_id + 1
    from deltalake import DeltaTable

    commits = {c["version"]: c for c in DeltaTable(spec.views[VIEW].path).history(10)}
    assert f'"batch": {committed.batch_id}' in commits[committed.output_version]["userMetadata"]


# --- nothing new --------------------------------------------------------------------------------


def test_a_rerun_with_nothing_new_is_skipped_writes_nothing_and_starts_no_spark_job(lake):
    spec = seeded(lake)
    lake.run(spec, checks=False)
    change_everything_once(lake)
    second = lake.run(spec, checks=False)
    assert second.outcome is BatchOutcome.COMMITTED and second.batch_id == 2
    before, rows = versions(spec), lake.output(spec)

    tracker = lake.spark.sparkContext.statusTracker()
    lake.spark.sparkContext.setJobGroup("nothing-new", "a view with nothing new")
    try:
        again = lake.run(spec, checks=False)
    finally:
        lake.spark.sparkContext.setJobGroup("", "")

    assert again.outcome is BatchOutcome.SKIPPED and again.batch_id is None
    assert "no new versions since batch 2" in (again.reason or "")
    assert list(tracker.getJobIdsForGroup("nothing-new")) == []
    assert {k: again.pinned_versions[k] for k in ("products", "merchants")} == {
        k: second.pinned_versions[k] for k in ("products", "merchants")
    }
    assert versions(spec) == before
    assert lake.output(spec) == rows == lake.expected(spec)
    assert statuses(batch_log(spec)) == [(1, "committed"), (2, "committed")]
    assert_log_agrees_with_output(spec)


def test_a_vacuum_or_an_optimize_of_the_sources_is_nothing_new(lake):
    """VACUUM and OPTIMIZE commit versions that hold no change rows: the batch skips as when
    nothing is new, and the next real change is read from the last committed pins on."""
    from delta.tables import DeltaTable

    spec = seeded(lake)
    first = lake.run(spec, checks=False)
    before, rows = versions(spec), lake.output(spec)
    for name in ("products", "merchants"):
        table = DeltaTable.forPath(lake.spark, lake.path(name))
        table.optimize().executeCompaction()
        table.vacuum(0)
        assert version(lake.path(name)) > first.pinned_versions[name]

    pending = pending_work(spec, VIEW)  # the DAG's pre-check is the plan itself
    skipped = lake.run(spec, checks=False)

    assert pending.run is False and "only maintenance commits" in pending.reason, pending
    assert skipped.outcome is BatchOutcome.SKIPPED and skipped.batch_id is None
    assert versions(spec) == before
    assert lake.output(spec) == rows
    assert [r.batch_id for r in batch_log(spec).history(VIEW)] == [1]

    change_everything_once(lake)
    assert pending_work(spec, VIEW).run is True
    after = lake.run(spec, checks=False)

    assert after.outcome is BatchOutcome.COMMITTED and after.batch_id == 2
    assert after.start_versions["products"] == first.pinned_versions["products"]
    assert lake.output(spec) == lake.expected(spec) != rows


@pytest.mark.parametrize(
    ("operations", "expected"),
    [
        ({}, False),  # no new version
        ({v: "OPTIMIZE" for v in range(11, 200)}, False),  # read over several pages
        ({**{v: "VACUUM END" for v in range(11, 200)}, 150: "MERGE"}, True),
        ({**{v: "OPTIMIZE" for v in range(11, 200)}, 199: "WRITE"}, True),  # newest first: one page
        ({v: "OPTIMIZE" for v in range(11, 200) if v != 40}, True),  # a version the history lacks
    ],
)
def test_only_maintenance_commits_are_nothing_new_and_history_is_read_newest_first(operations, expected):
    """The rule the plan applies to delta-rs's history."""
    upto = max(operations, default=10)
    log = sorted(operations.items(), reverse=True) + [(v, "WRITE") for v in range(10, -1, -1)]
    reads: list[int] = []

    def newest(limit: int) -> list[tuple[int, str]]:
        reads.append(limit)
        return log[:limit]

    assert history_may_hold_changes(newest, 10, upto) is expected
    if operations.get(upto) == "WRITE":
        assert len(reads) == 1  # the newest commit is a data commit: no further page is read


# --- a kill -9 at every commit point ------------------------------------------------------------


# Two kills, each in its own JVM (60-90 s a run). A kill where a view keeps state is list_join's
# and rekey's (fk_join keeps none); the log rebuilt from a driver MERGE's commit is
# test_a_deleted_batch_log_is_rebuilt_from_the_output_and_the_view_goes_on.
@pytest.mark.parametrize("point", ["before_upsert_commit", "after_output_commit"])
def test_a_batch_killed_at_a_commit_point_ends_exact_on_the_next_run(lake, point, lineage_events):
    """Batch 2 updates keys the output holds and inserts a new one, in one commit, the batch
    commit: with a write of many keys forced, the one-commit upsert's.
    - killed after its batch commit, before its log row: batch 2 happened; the next plan
      rebuilds its log row from the output's log and runs batch 3;
    - killed in the upsert after it wrote its files, before it committed them: nothing of the
      batch is visible (its files are in no commit); the next run plans afresh.
    OpenLineage: the killed `lakejoin run` sent its batch's START and nothing after it; the next
    run's events carry the same run id when it runs that batch again (issue 39)."""
    spec = seeded(lake)
    assert lake.run(spec, checks=False).batch_id == 1
    lineage_events()
    change_everything_once(lake)
    before = versions(spec)

    crashed = run_cli_with_failpoint(spec.file, point, conf=UPSERT)

    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    after_crash = versions(spec)
    assert after_crash["log"] == before["log"]  # the log row comes last
    assert after_crash["state"] == before["state"] == -1  # fk_join keeps no state table
    expected_txn = {"before_upsert_commit": 3, "after_output_commit": 5}[point]
    assert output_txn(spec) == expected_txn
    assert after_crash["output"] == before["output"] + {3: 0, 5: 1}[expected_txn]
    last = DeltaTable(spec.views[VIEW].path).history(1)[0]
    if point == "after_output_commit":
        assert (last.get("tags") or {}).get(key_upsert.TAG) == key_upsert.TAG_VALUE
    crash_pins = {"products": version(lake.path("products")), "merchants": version(lake.path("merchants"))}

    change_after_the_crash(lake)  # they belong to a later batch than the one the crash cut

    (started,) = lineage_events()  # the killed run's: START, then nothing
    assert started["eventType"] == "START"
    assert started["run"]["facets"]["lakejoin_batch"]["batchId"] == 2

    retry = lake.run(spec)
    again = lineage_events()
    assert [e["eventType"] for e in again] == ["START", "COMPLETE"]
    same_batch = retry.batch_id == 2
    assert (again[0]["run"]["runId"] == started["run"]["runId"]) is same_batch

    out = lake.output(spec)
    assert len(set(keys_of(out))) == len(out)
    if point == "after_output_commit":
        assert retry.batch_id == 3
        assert {k: retry.start_versions[k] for k in crash_pins} == crash_pins
        assert batch_log(spec).history(VIEW)[1].notes == {"log": "rebuilt from the output's commit"}
    else:
        assert retry.batch_id == 2
        assert retry.pinned_versions["products"] > crash_pins["products"]
    assert lake.output(spec) == lake.expected(spec)
    assert_log_agrees_with_output(spec)

    assert lake.run(spec, checks=False).outcome is BatchOutcome.SKIPPED
    out = lake.output(spec)
    assert out == lake.expected(spec)
    assert "p7" in keys_of(out) and "p3" not in keys_of(out) and "p4" not in keys_of(out)
    assert {r["merchant_id"]: r["display_name"] for r in out if r["merchant_id"]}["m3"] == "Cask & Co"
    assert_log_agrees_with_output(spec)


# --- concurrency --------------------------------------------------------------------------------


def test_four_runs_of_one_pipeline_started_together_commit_each_batch_once(lake):
    """Each run plans batch 2; one commits it. A run that then finds the batch committed (Delta
    skipped its commit, or its commit conflicted with the winner's commit of this batch) has
    nothing new and exits 0; only a conflict with something else stays a failure, in one clear
    message."""
    spec = seeded(lake)
    lake.run(spec, checks=False)
    change_everything_once(lake)
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("PYSPARK_GATEWAY")}
    command = [sys.executable, "-m", "lakejoin.cli", "run", spec.file, "--no-checks"]
    runs = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(4)
    ]
    outputs = [" ".join(run.communicate(timeout=CLI_TIMEOUT)[0].split()) for run in runs]
    codes = [run.returncode for run in runs]

    assert sum("1 committed" in text for text in outputs) == 1, outputs  # the winner
    for code, text in zip(codes, outputs, strict=True):
        if "1 committed" in text or "nothing new" in text:
            assert code == 0, text
        else:  # a conflict with a commit that was not this batch's: the loser says why
            assert code == 1 and "another commit landed" in text, text
    assert statuses(batch_log(spec)) == [(1, "committed"), (2, "committed")]
    assert lake.output(spec) == lake.expected(spec)
    assert len(set(keys_of(lake.output(spec)))) == len(lake.output(spec))
    assert_log_agrees_with_output(spec)
    assert lake.run(spec, checks=False).outcome is BatchOutcome.SKIPPED


def test_a_write_failure_that_is_no_conflict_says_its_own_cause(lake):
    """The output's data files deleted behind lakejoin's back: the batch's Spark MERGE cannot read
    them. The error is Spark's, naming the missing file, not 'another commit landed ... run the
    view again', which every JVM stack trace (java.util.concurrent) made it (issue 51)."""
    from lakejoin.errors import ConcurrentBatchError
    from lakejoin.sink import driver_merge

    spec = seeded(lake)
    lake.run(spec, checks=False)
    for data in Path(spec.views[VIEW].path).glob("*.parquet"):
        data.unlink()
    lake.upsert("products", "product_id", [("p1", "pen", 1.5, "m1")])
    lake.spark.conf.set(driver_merge.ENABLED, "false")
    try:
        with pytest.raises(Exception) as raised:  # noqa: PT011 - Spark's own, whatever its class
            lake.run(spec, checks=False)
    finally:
        lake.spark.conf.unset(driver_merge.ENABLED)

    assert not isinstance(raised.value, ConcurrentBatchError), raised.value
    assert "FILE_NOT_EXIST" in str(raised.value), str(raised.value)[:2000]


# --- the batch log is an index ------------------------------------------------------------------


def test_a_deleted_batch_log_is_rebuilt_from_the_output_and_the_view_goes_on(lake):
    spec = seeded(lake)
    lake.run(spec, checks=False)
    change_everything_once(lake)
    second = lake.run(spec, checks=False)
    shutil.rmtree(batch_log(spec).path)

    assert pending_work(spec, VIEW).run is False  # the plan rebuilt the log's last row
    rebuilt = batch_log(spec).last_committed(VIEW)
    assert rebuilt is not None and rebuilt.batch_id == 2
    assert rebuilt.pinned_versions == second.pinned_versions
    assert rebuilt.output_version == second.output_version

    change_after_the_crash(lake)
    third = lake.run(spec, checks=False)
    assert third.batch_id == 3 and third.start_versions == second.pinned_versions
    assert lake.output(spec) == lake.expected(spec)
    assert_log_agrees_with_output(spec)


def test_the_last_batchs_pins_survive_a_checkpoint_and_log_cleanup_of_the_output(lake):
    """Delta keeps `txn` actions in checkpoints; commitInfo goes with cleaned-up log files. The
    batch id survives in the txn and the pins in the batch log; with both the commit file and
    the batch log gone, the plan says what happened and what to do."""
    spec = seeded(lake)
    lake.run(spec, checks=False)
    change_everything_once(lake)
    second = lake.run(spec, checks=False)
    output = spec.views[VIEW].path
    lake.spark.sql(
        f"ALTER TABLE delta.`{output}` SET TBLPROPERTIES (delta.logRetentionDuration = 'interval 0 seconds', "
        "delta.deletedFileRetentionDuration = 'interval 0 seconds')"
    )
    checkpoint_and_clean_up(lake, output)
    log_files = sorted(p.name for p in (Path(output) / "_delta_log").glob("*.json"))
    assert f"{second.output_version:020d}.json" not in log_files, log_files
    assert output_txn(spec) == 5  # batch 2's txn, from the checkpoint

    change_after_the_crash(lake)
    assert pending_work(spec, VIEW).run is True
    third = lake.run(spec, checks=False)
    assert third.batch_id == 3 and third.start_versions == second.pinned_versions
    assert lake.output(spec) == lake.expected(spec)

    shutil.rmtree(batch_log(spec).path)
    checkpoint_and_clean_up(lake, output)
    lake.upsert("products", "product_id", [("p8", "bag", 8.0, "m2")])
    with pytest.raises(BatchStateError, match="batch 3 committed into the output") as failed:
        lake.run(spec, checks=False)
    assert "--full-refresh" in failed.value.fix
    refresh = lake.run(spec, checks=False, full_refresh=True)
    assert (refresh.batch_id, refresh.mode) == (4, BatchMode.FULL_REFRESH)
    assert lake.output(spec) == lake.expected(spec)


def checkpoint_and_clean_up(lake: Lakehouse, path: str) -> None:
    """A commit after the last batch's, a checkpoint at it, and log cleanup (delta-rs: Delta's
    own cleanup keeps every log file of the current day, whatever the retention)."""
    from delta.tables import DeltaTable
    from deltalake import DeltaTable as LogReader

    DeltaTable.forPath(lake.spark, path).optimize().executeCompaction()  # may find nothing to do
    lake.spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('lakejoin.touched' = '{uuid.uuid4()}')")
    table = LogReader(path)
    table.create_checkpoint()
    table.cleanup_metadata()


def test_a_log_row_per_batch_committed_wins_and_compaction_keeps_every_row(tmp_path):
    log = BatchLog("shop", str(tmp_path / "log"))
    for batch_id, status in [
        (1, BatchStatus.COMMITTED),
        (2, BatchStatus.ABANDONED),
        (3, BatchStatus.COMMITTED),
    ]:
        log.append(BatchRecord("a", batch_id, status, BatchMode.INCREMENTAL, {"s": 0}, {"s": batch_id}))
    # A row appended twice (a log append retried) and the other view's rows stay apart.
    log.append(BatchRecord("a", 3, BatchStatus.COMMITTED, BatchMode.INCREMENTAL, {"s": 0}, {"s": 3}))
    log.append(BatchRecord("b", 1, BatchStatus.COMMITTED, BatchMode.FULL_REFRESH, {}, {"s": 1}))
    before = log.histories()
    log.compact()

    assert [(r.batch_id, r.status) for r in before["a"]] == [
        (1, BatchStatus.COMMITTED),
        (2, BatchStatus.ABANDONED),
        (3, BatchStatus.COMMITTED),
    ]
    assert log.histories() == before
    assert log.last_committed("a").pinned_versions == {"s": 3}  # type: ignore[union-attr]
    assert [r.view for r in log.history("b")] == ["b"]


# --- a batch whose checks fail ------------------------------------------------------------------


def test_a_batch_whose_checks_fail_commits_nothing_and_the_next_run_starts_afresh(lake, monkeypatch):
    suites = lake.root / "expectations" / "shop"
    suites.mkdir(parents=True)
    (suites / f"{VIEW}.json").write_text(
        '{"name": "display_products", "expectations": [{"type": "expect_column_values_to_be_between",'
        ' "kwargs": {"column": "price", "min_value": 0, "max_value": 100}}]}'
    )
    monkeypatch.setenv("LAKEJOIN_EXPECTATIONS_DIR", str(lake.root / "expectations"))
    spec = seeded(lake)
    lake.run(spec)
    lake.upsert("products", "product_id", [("p1", "pen", 500.0, "m1")])
    before = versions(spec)

    for batch_id in (2, 3):
        with pytest.raises(QualityCheckError, match=f"batch {batch_id} failed its checks"):
            lake.run(spec)
        assert {k: v for k, v in versions(spec).items() if k != "log"} == {
            k: v for k, v in before.items() if k != "log"
        }
        assert batch_log(spec).last(VIEW).status is BatchStatus.ABANDONED  # type: ignore[union-attr]
    report = (reports_folder(spec, VIEW) / "batch-000002.json").read_text()
    assert '"success": false' in report

    lake.upsert("products", "product_id", [("p1", "pen", 50.0, "m1")])
    fixed = lake.run(spec)
    assert (fixed.batch_id, fixed.mode) == (4, BatchMode.INCREMENTAL)
    assert statuses(batch_log(spec)) == [
        (1, "committed"),
        (2, "abandoned"),
        (3, "abandoned"),
        (4, "committed"),
    ]
    assert lake.output(spec) == lake.expected(spec)
    assert_log_agrees_with_output(spec)


def test_output_and_state_are_created_with_deletion_vectors_unless_the_session_says_no(lake):
    """Spark's MERGE (a batch above the driver MERGE's few keys, forced here) marks replaced rows
    in a deletion vector instead of rewriting every file a random key touches; a session whose
    Delta default for new tables turns them off is obeyed."""
    from lakejoin.sink import driver_merge

    spec = seeded(lake, extra="  products_by_name:\n    rekey: {source: display_products, key: name}\n")
    lake.run(spec, checks=False)
    change_everything_once(lake)
    lake.spark.conf.set(driver_merge.ENABLED, "false")
    try:
        lake.run(spec, checks=False)
    finally:
        lake.spark.conf.unset(driver_merge.ENABLED)
    lake.run(spec, "products_by_name", checks=False)
    output, index = spec.views[VIEW].path, state_path(spec, spec.views["products_by_name"])

    assert deletion_vectors(lake, output) == deletion_vectors(lake, index) == "true"
    assert lake.output(spec) == lake.expected(spec)
    merge = lake.spark.sql(f"DESCRIBE HISTORY delta.`{output}` LIMIT 1").collect()[0]
    assert merge["operation"] == "MERGE"
    assert int(merge["operationMetrics"].get("numTargetRowsCopied", "0")) == 0

    other = "display_products_again"
    spec = lake.spec(
        extra=f"  {other}:\n    fk_join: {{left: products, right: merchants, fk: merchant_id, how: left,"
        " right_columns: [display_name, photo_url]}\n"
    )
    default = "spark.databricks.delta.properties.defaults.enableDeletionVectors"
    lake.spark.conf.set(default, "false")
    try:
        lake.run(spec, other, checks=False)
    finally:
        lake.spark.conf.unset(default)
    assert deletion_vectors(lake, spec.views[other].path) == "false"
    assert lake.output(spec, other) == lake.expected(spec, other)


def deletion_vectors(lake: Lakehouse, path: str) -> str:
    detail = lake.spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert detail is not None
    return str(detail["properties"].get("delta.enableDeletionVectors"))
