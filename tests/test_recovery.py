"""A batch is a transaction (DESIGN §2): reruns write nothing twice, a crash between the output
MERGE and the batch commit is retried on exactly the pinned versions, and a plan whose checks
keep failing stays planned until a full refresh supersedes it.

The crash is real: `lakejoin run` in a subprocess (its own Spark JVM) with the failpoint
LAKEJOIN_FAILPOINT=after_output_merge, which SIGKILLs the process right after the output MERGE,
before the routing-index update and the batch commit.
"""

from __future__ import annotations

import json
import signal
from dataclasses import replace
from pathlib import Path

import pytest

from lakejoin.engine.records import BatchMode, BatchRecord, BatchStatus, BatchStore, read_histories
from lakejoin.errors import QualityCheckError
from lakejoin.pending import pending_work
from lakejoin.engine.batch import BatchOutcome, batch_log, committed_output_version, routing_index_path
from lakejoin.sources import data_files, history_may_hold_changes, latest_version
from tests.lakehouse import MERCHANTS, PRODUCTS, Lakehouse, fk_join_oracle, run_cli_with_failpoint

pytestmark = pytest.mark.e2e

VIEW = "display_products"


def seeded(lake: Lakehouse, how: str = "left"):
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
    return lake.spec(how)


def change_everything_once(lake: Lakehouse) -> None:
    """A left update, an fk move, a right update and deletes on both sides: four commits."""
    lake.upsert("products", "product_id", [("p1", "pen", 1.5, "m1"), ("p2", "cup", 2.0, "m3")])
    lake.upsert("merchants", "merchant_id", [("m2", "Bolt Ltd", "b2.png")])
    lake.delete("merchants", "merchant_id", ["m1"])
    lake.delete("products", "product_id", ["p4"])


def versions(lake: Lakehouse, spec) -> dict[str, int]:  # noqa: ANN001 - PipelineSpec
    """The current version of every table a batch writes: output, routing index, batch records."""
    paths = {
        "output": spec.views[VIEW].path,
        "routing": routing_index_path(spec, spec.views[VIEW]),
        "batches": batch_log(spec).path,
    }
    return {name: latest_version(lake.spark, path, role=name) for name, path in paths.items()}


def operations(lake: Lakehouse, path: str) -> list[tuple[int, str]]:
    from delta.tables import DeltaTable

    rows = DeltaTable.forPath(lake.spark, path).history().select("version", "operation").collect()
    return sorted((int(r["version"]), r["operation"]) for r in rows)


def txn_actions(path: str, version: int) -> list[dict]:
    """The `txn` actions (appId, version) Delta recorded in one commit of the table at `path`."""
    log = Path(path) / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [a["txn"] for a in actions if "txn" in a]


def oracle_at(lake: Lakehouse, spec, pins: dict[str, int]) -> list[dict]:  # noqa: ANN001
    join = spec.views[VIEW].fk_join
    return fk_join_oracle(
        lake.rows_at("products", pins["products"]),
        lake.rows_at("merchants", pins["merchants"]),
        join=join,
        left_key="product_id",
        right_key="merchant_id",
    )


def statuses(store: BatchStore) -> list[tuple[int, str]]:
    return [(r.batch_id, r.status.value) for r in store.history(VIEW)]


def keys_of(rows: list[dict]) -> list[str]:
    return [r["product_id"] for r in rows]


# --- idempotency -------------------------------------------------------------------------------


def test_a_rerun_with_nothing_new_is_skipped_and_writes_nothing(lake):
    spec = seeded(lake)
    lake.run(spec, checks=False)
    change_everything_once(lake)
    second = lake.run(spec, checks=False)
    assert second.outcome is BatchOutcome.COMMITTED and second.batch_id == 2
    before, rows = versions(lake, spec), lake.output(spec)

    again = lake.run(spec, checks=False)

    assert again.outcome is BatchOutcome.SKIPPED and again.batch_id is None
    assert {k: again.pinned_versions[k] for k in ("products", "merchants")} == {
        k: second.pinned_versions[k] for k in ("products", "merchants")
    }
    assert versions(lake, spec) == before
    assert lake.output(spec) == rows == lake.expected(spec)
    assert [r.batch_id for r in batch_log(spec).history(VIEW)] == [1, 2]


def test_a_vacuum_or_an_optimize_of_the_sources_is_nothing_new(lake):
    """VACUUM and OPTIMIZE commit versions that hold no change rows: the batch skips as when
    nothing is new, and the next real change is read from the last committed pins on."""
    from delta.tables import DeltaTable

    spec = seeded(lake)
    first = lake.run(spec, checks=False)
    before, rows = versions(lake, spec), lake.output(spec)
    for name in ("products", "merchants"):
        table = DeltaTable.forPath(lake.spark, lake.path(name))
        table.optimize().executeCompaction()
        table.vacuum(0)
        assert latest_version(lake.spark, lake.path(name), role=name) > first.pinned_versions[name]

    pending = pending_work(spec, VIEW)  # the DAG's pre-check, on delta-rs, agrees
    skipped = lake.run(spec, checks=False)

    assert pending.run is False and "only maintenance commits" in pending.reason, pending
    assert skipped.outcome is BatchOutcome.SKIPPED and skipped.batch_id is None
    assert versions(lake, spec) == before
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
    """The rule both the engine (Spark's history) and the DAG's pre-check (delta-rs) apply."""
    upto = max(operations, default=10)
    log = sorted(operations.items(), reverse=True) + [(v, "WRITE") for v in range(10, -1, -1)]
    reads: list[int] = []

    def newest(limit: int) -> list[tuple[int, str]]:
        reads.append(limit)
        return log[:limit]

    assert history_may_hold_changes(newest, 10, upto) is expected
    if operations.get(upto) == "WRITE":
        assert len(reads) == 1  # the newest commit is a data commit: no further page is read


def test_re_executing_a_committed_batch_applies_none_of_its_writes_twice(lake, monkeypatch):
    """Replay batch 2 after it committed, through run_view itself: the only trick is that the
    batch store answers "batch 2 is still planned" (as after a lost commit acknowledgement), so
    the runner redoes the whole batch on the committed pins. Every write of the batch (output
    MERGE, routing-index MERGE, batch record) carries its txnAppId/txnVersion, so Delta skips
    all three: no table gets a new version and the output is unchanged."""
    spec = seeded(lake)
    lake.run(spec, checks=False)
    change_everything_once(lake)
    lake.run(spec, checks=False)
    committed = batch_log(spec).last(VIEW)
    assert committed is not None and committed.status is BatchStatus.COMMITTED
    before, rows = versions(lake, spec), lake.output(spec)
    assert rows == lake.expected(spec)

    read = BatchStore.histories

    def planned_again(self: BatchStore, views):  # noqa: ANN001, ANN202
        found = read(self, views)
        if VIEW in found:
            found[VIEW] = [*found[VIEW][:-1], replace(committed, status=BatchStatus.PLANNED)]
        return found

    with monkeypatch.context() as patch:
        patch.setattr(BatchStore, "histories", planned_again)
        replay = lake.run(spec, checks=False)

    assert replay.outcome is BatchOutcome.COMMITTED and replay.retried
    assert replay.batch_id == committed.batch_id
    assert replay.pinned_versions == committed.pinned_versions
    assert replay.affected_keys > 0  # the batch really was recomputed ...
    assert replay.output_applied is False  # ... and its MERGE was skipped by Delta
    assert versions(lake, spec) == before
    assert lake.output(spec) == rows == lake.expected(spec)
    assert statuses(batch_log(spec)) == [(1, "committed"), (2, "committed")]


# --- crash between the output MERGE and the commit ---------------------------------------------


def test_a_batch_killed_after_its_output_merge_is_retried_on_its_pinned_versions(lake):
    spec = seeded(lake)
    store = BatchStore(lake.spark, spec.name, batch_log(spec).path)
    output_path = spec.views[VIEW].path
    assert lake.run(spec, checks=False).batch_id == 1
    change_everything_once(lake)
    before = versions(lake, spec)

    crashed = run_cli_with_failpoint(spec.file)

    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    # The output got batch 2's MERGE, stamped with batch 2's txn; nothing after it happened.
    after_crash = versions(lake, spec)
    assert after_crash == {**before, "output": before["output"] + 1, "batches": before["batches"] + 1}
    assert operations(lake, output_path)[-1] == (after_crash["output"], "MERGE")
    assert [t["version"] for t in txn_actions(output_path, after_crash["output"])] == [2]
    planned = store.last(VIEW)
    assert planned is not None
    assert (planned.batch_id, planned.status) == (2, BatchStatus.PLANNED)
    assert planned.pinned_versions["products"] == latest_version(lake.spark, lake.path("products"), role="p")
    assert lake.output(spec) == oracle_at(lake, spec, planned.pinned_versions)

    # Changes after the crash belong to the next batch, not to the retry.
    lake.upsert("products", "product_id", [("p6", "cap", 6.0, "m3")])
    lake.upsert("merchants", "merchant_id", [("m3", "Cask & Co", "c.png")])
    lake.delete("products", "product_id", ["p3"])

    retry = lake.run(spec)

    assert retry.outcome is BatchOutcome.COMMITTED and retry.retried
    assert retry.batch_id == 2
    assert retry.pinned_versions == planned.pinned_versions
    assert retry.output_applied is False
    out = lake.output(spec)
    assert out == lake.expected(spec) == oracle_at(lake, spec, planned.pinned_versions)
    assert len(set(keys_of(out))) == len(out)
    assert "p6" not in keys_of(out) and "p3" in keys_of(out)
    assert {r["merchant_id"]: r["display_name"] for r in out}["m3"] == "Cask"
    after_retry = versions(lake, spec)
    assert after_retry["output"] == after_crash["output"]  # no second MERGE for batch 2
    assert after_retry["routing"] == before["routing"] + 1  # the retry did the routing update
    # Batch 1 filled the empty output with one append (key_ranges' layout), batch 2 MERGEd once.
    assert [op for _, op in operations(lake, output_path)] == ["CREATE TABLE", "WRITE", "MERGE"]
    assert statuses(store) == [(1, "committed"), (2, "committed")]
    assert "output" in store.history(VIEW)[-1].notes

    following = lake.run(spec, checks=False)

    assert following.batch_id == 3 and not following.retried
    assert following.start_versions == planned.pinned_versions
    out = lake.output(spec)
    assert out == lake.expected(spec)
    assert "p6" in keys_of(out) and "p3" not in keys_of(out)
    assert len(set(keys_of(out))) == len(out)


def test_a_batch_killed_between_its_output_update_and_its_inserts_appends_them_once_on_retry(lake):
    """The output takes two commits: a MERGE of the keys it holds, then an append of the new
    ones. A crash between them leaves the last committed batch where it was, so a view reading
    this one still pins the old output; the retry skips the MERGE and appends the new rows."""
    spec = seeded(lake)
    store = BatchStore(lake.spark, spec.name, batch_log(spec).path)
    output_path = spec.views[VIEW].path
    lake.run(spec, checks=False)
    lake.upsert("products", "product_id", [("p1", "pen", 1.5, "m1"), ("p6", "cap", 6.0, "m3")])
    before = versions(lake, spec)

    crashed = run_cli_with_failpoint(spec.file, "between_update_and_insert")

    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    after_crash = versions(lake, spec)
    assert after_crash["output"] == before["output"] + 1
    assert operations(lake, output_path)[-1] == (after_crash["output"], "MERGE")
    assert "p6" not in keys_of(lake.output(spec))
    committed = store.last_committed(VIEW)
    assert committed is not None and committed.batch_id == 1
    assert committed_output_version(committed) == before["output"]  # what a downstream view pins

    retry = lake.run(spec, checks=False)

    assert retry.retried and retry.batch_id == 2 and retry.inserted == 1
    assert retry.output_applied is True
    assert [op for _, op in operations(lake, output_path)][-2:] == ["MERGE", "WRITE"]
    out = lake.output(spec)
    assert out == lake.expected(spec)
    assert sorted(keys_of(out)) == ["p1", "p2", "p3", "p4", "p5", "p6"]
    committed = store.last_committed(VIEW)
    assert committed is not None and committed.batch_id == 2
    assert committed_output_version(committed) == after_crash["output"] + 1

    again = lake.run(spec, checks=False)
    assert again.outcome is BatchOutcome.SKIPPED
    assert versions(lake, spec)["output"] == after_crash["output"] + 1


# --- a plan whose checks keep failing ----------------------------------------------------------


def test_a_plan_whose_checks_keep_failing_stays_planned_until_a_full_refresh(lake):
    from delta.tables import DeltaTable

    spec = seeded(lake)
    store = batch_log(spec)
    lake.run(spec, checks=False)
    # Someone deletes an output row behind lakejoin's back: a left join now has fewer rows than
    # its left table, and no incremental batch touches that key again.
    DeltaTable.forPath(lake.spark, spec.views[VIEW].path).delete("product_id = 'p5'")
    lake.upsert("products", "product_id", [("p1", "pen", 1.5, "m1")])

    for _ in range(2):
        with pytest.raises(QualityCheckError, match="batch 2 failed its checks"):
            lake.run(spec)
        stuck = store.last(VIEW)
        assert stuck is not None and (stuck.batch_id, stuck.status) == (2, BatchStatus.PLANNED)
    report = json.loads(Path(spec.state_path, "reports", VIEW, "batch-000002.json").read_text())
    assert report["success"] is False

    lake.upsert("products", "product_id", [("p6", "cap", 6.0, "m2")])
    refresh = lake.run(spec, full_refresh=True)

    assert refresh.outcome is BatchOutcome.COMMITTED and not refresh.retried
    assert (refresh.batch_id, refresh.mode) == (3, BatchMode.FULL_REFRESH)
    assert statuses(store) == [(1, "committed"), (2, "abandoned"), (3, "committed")]
    out = lake.output(spec)
    assert out == lake.expected(spec)
    assert {"p5", "p6"} <= set(keys_of(out))

    # The view is incremental again afterwards, routing index included.
    lake.upsert("merchants", "merchant_id", [("m2", "Bolt Ltd", "b2.png")])
    following = lake.run(spec, checks=False)
    assert (following.batch_id, following.mode) == (4, BatchMode.INCREMENTAL)
    assert lake.output(spec) == lake.expected(spec)


def test_batch_records_stay_readable_without_spark_when_deletion_vectors_are_the_default(lake):
    """delta-rs (the Airflow skip check, the report pages) cannot read deletion vectors. The batch
    records are append-only, so lakejoin creates them without, whatever the session's default."""
    spec = seeded(lake)
    default = "spark.databricks.delta.properties.defaults.enableDeletionVectors"
    lake.spark.conf.set(default, "true")
    try:
        lake.run(spec, checks=False)
    finally:
        lake.spark.conf.unset(default)

    histories = read_histories(spec.name, batch_log(spec).path)

    assert [(r.batch_id, r.status) for r in histories[VIEW]] == [(1, BatchStatus.COMMITTED)]
    assert deletion_vectors(lake, batch_log(spec).path) == "false"


def test_the_batch_records_are_compacted_every_few_batches_and_read_the_same(lake):
    """Each record is a one-row file, and a plan reads all of its view's: without compaction the
    plan's read grows with every batch ever run. Every `compact_every`-th batch of a view, the
    commit compacts the records with Delta's OPTIMIZE; no record changes."""
    path = lake.path("batches")
    store = BatchStore(lake.spark, "shop", path, compact_every=3)
    files = []
    for batch_id in (1, 2, 3):
        for view in ("a", "b"):
            record = BatchRecord(
                view, batch_id, BatchStatus.PLANNED, BatchMode.INCREMENTAL, {}, {"s": batch_id}
            )
            store.plan(record)
            if batch_id == 3 and view == "b":
                before = store.histories(["a", "b"])
            store.commit(replace(record, status=BatchStatus.COMMITTED, metrics={"inserted": batch_id}))
            files.append(data_files(lake.spark, path))

    # A file per record; batch 3 of view a compacts the 10 into one, batch 3 of b the 3 left.
    assert files == [2, 4, 6, 8, 1, 1]
    compactions = [op for _, op in operations(lake, path) if op == "OPTIMIZE"]
    assert len(compactions) == 2
    after = store.histories(["a", "b"])
    assert [(r.batch_id, r.status) for r in after["a"]] == [(n, BatchStatus.COMMITTED) for n in (1, 2, 3)]
    assert after["a"] == before["a"]
    assert after["b"][:2] == before["b"][:2] and after["b"][2].status is BatchStatus.COMMITTED
    spark_free = read_histories("shop", path)
    assert [(r.batch_id, r.status, r.metrics) for r in spark_free["b"]] == [
        (r.batch_id, r.status, r.metrics) for r in after["b"]
    ]


def test_output_and_routing_index_are_created_with_deletion_vectors_unless_the_session_says_no(lake):
    """A batch's MERGE marks replaced rows in a deletion vector instead of rewriting every file a
    random key touches; a session whose Delta default for new tables turns them off is obeyed."""
    spec = seeded(lake)
    lake.run(spec, checks=False)
    change_everything_once(lake)
    lake.run(spec, checks=False)
    output, routing = spec.views[VIEW].path, routing_index_path(spec, spec.views[VIEW])

    assert deletion_vectors(lake, output) == deletion_vectors(lake, routing) == "true"
    assert lake.output(spec) == lake.expected(spec)
    merge = lake.spark.sql(f"DESCRIBE HISTORY delta.`{output}` LIMIT 1").first()
    assert merge is not None and merge["operation"] == "MERGE"
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
