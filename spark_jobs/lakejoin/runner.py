"""One batch of one view, as a transaction (DESIGN §2): plan, changes, affected keys,
recompute, write, check, commit.

>>> summary = run_view(spark, spec, "display_products")     # doctest: +SKIP
>>> summary.status, summary.affected_keys                     # doctest: +SKIP
(<BatchOutcome.COMMITTED: 'committed'>, 3)
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from lakejoin import quality
from lakejoin.batches import BatchMode, BatchRecord, BatchStatus, BatchStore, failpoint, idempotent, last_of
from lakejoin.changes import net_changes, no_changes, read_change_feed, translate_read_error
from lakejoin.errors import BatchStateError, KeyConflictError, NullKeyError, RepairError, SourceError
from lakejoin.repair import RepairRange, repair_changes
from lakejoin.schema_checks import check_view_schemas
from lakejoin.sink import drift_error, ensure_output, merge_affected, merge_full, replace_output, schema_drift
from lakejoin.sources import column_types, latest_version, may_hold_changes, require_change_feed, snapshot
from lakejoin.spec import PipelineSpec, Source, View, ViewKind
from lakejoin.views.base import BatchContext, ViewKindLogic

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class Phase(enum.Enum):
    PLAN = "plan"
    CHANGES = "changes"
    AFFECTED = "affected keys"
    RECOMPUTE = "recompute"
    WRITE = "write"
    CHECK = "check"
    COMMIT = "commit"


class BatchOutcome(enum.Enum):
    COMMITTED = "committed"
    SKIPPED = "skipped"


@dataclass
class BatchSummary:
    view: str
    outcome: BatchOutcome
    batch_id: int | None = None
    mode: BatchMode | None = None
    retried: bool = False
    start_versions: dict[str, int] = field(default_factory=dict)
    pinned_versions: dict[str, int] = field(default_factory=dict)
    changed_keys: dict[str, int] = field(default_factory=dict)
    affected_keys: int = 0
    recomputed_rows: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged_skipped: int = 0
    output_applied: bool = True
    output_version: int | None = None
    report: str | None = None
    phase_seconds: dict[str, float] = field(default_factory=dict)
    kind_metrics: dict[str, int] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    def metrics(self) -> dict[str, int]:
        counts = {f"changed_keys.{name}": n for name, n in self.changed_keys.items()}
        counts.update(
            affected_keys=self.affected_keys,
            recomputed_rows=self.recomputed_rows,
            inserted=self.inserted,
            updated=self.updated,
            deleted=self.deleted,
            unchanged_skipped=self.unchanged_skipped,
            output_version=self.output_version if self.output_version is not None else -1,
        )
        counts.update(self.kind_metrics)
        counts.update({f"ms.{p}": int(s * 1000) for p, s in self.phase_seconds.items()})
        return counts


StepCallback = Callable[[Phase], None]


def routing_index_path(spec: PipelineSpec, view: View) -> str:
    return str(Path(spec.state_path) / "routing" / view.name)


def batch_store(spark: SparkSession, spec: PipelineSpec) -> BatchStore:
    return BatchStore(spark, spec.name, str(Path(spec.state_path) / "batches"))


def run_view(
    spark: SparkSession,
    spec: PipelineSpec,
    view_name: str,
    *,
    full_refresh: bool = False,
    repair: RepairRange | None = None,
    checks: bool = True,
    on_step: StepCallback | None = None,
) -> BatchSummary:
    """Run one batch of a view: the changes since its last committed batch, all keys
    (`full_refresh`), or the keys a past range of changes touched (`repair`, see repair.py)."""
    view = spec.views[view_name]
    batch = _Batch(spark, spec, view, on_step or (lambda phase: None))
    if repair is not None and full_refresh:
        raise RepairError(
            "a repair and a full refresh were both asked for",
            where=f"view '{view_name}'",
            fix="a full refresh already re-derives every key: ask for one or the other",
        )
    plan = batch.plan(full_refresh) if repair is None else batch.plan_repair(repair)
    if plan is None:
        return batch.summary
    batch.execute(plan, checks=checks)
    return batch.summary


def recompute_view(spark: SparkSession, spec: PipelineSpec, view_name: str) -> DataFrame:
    """The whole view recomputed from its sources' current versions, as a lazy DataFrame.

    Nothing is written and no batch is recorded: use it to inspect the Spark plan of a full
    recompute (`.explain()`), or to compare the output with a from-scratch result.

    >>> recompute_view(spark, spec, "enriched_purchases").explain()   # doctest: +SKIP
    """
    view = spec.views[view_name]
    batch = _Batch(spark, spec, view, lambda phase: None)
    # Every input at its newest version, an upstream view's output included: a recompute
    # reads what the tables hold, committed batch or not (there may be no batch records).
    pinned = {s.name: latest_version(spark, s.path, role=batch._where(s)) for s in batch.sources}
    batch._check_inputs(pinned)
    record = BatchRecord(view_name, 0, BatchStatus.PLANNED, BatchMode.FULL_REFRESH, {}, pinned)
    ctx = BatchContext(spark, spec, view, record, batch.routing_path)
    return batch.kind.rebuild(ctx, None).rows


def committed_output_version(record: BatchRecord) -> int:
    """The output version a committed batch left (recorded in its metrics; -1 when unknown)."""
    return int(record.metrics.get("output_version", -1))


def view_logic(spec: PipelineSpec, view: View) -> ViewKindLogic:
    """The logic of the view's kind (fk_join, list_join, rekey)."""
    from lakejoin.views.enrich import EnrichView
    from lakejoin.views.fk_join import FkJoinView
    from lakejoin.views.list_join import ListJoinView
    from lakejoin.views.rekey import RekeyView

    kinds: dict[ViewKind, type[ViewKindLogic]] = {
        ViewKind.FK_JOIN: FkJoinView,
        ViewKind.LIST_JOIN: ListJoinView,
        ViewKind.REKEY: RekeyView,
        ViewKind.ENRICH: EnrichView,
    }
    return kinds[view.kind](spec, view)


class _Batch:
    """The state of one batch while it runs; each method is one step of the protocol."""

    def __init__(self, spark: SparkSession, spec: PipelineSpec, view: View, on_step: StepCallback) -> None:
        self.spark = spark
        self.spec = spec
        self.view = view
        self.kind = view_logic(spec, view)
        self.sources: tuple[Source, ...] = self.kind.sources
        self.store = batch_store(spark, spec)
        self.routing_path = routing_index_path(spec, view)
        self.on_step = on_step
        self.summary = BatchSummary(view=view.name, outcome=BatchOutcome.SKIPPED)
        self._clock = time.monotonic()
        self._phase: Phase | None = None
        self._repair_ends: dict[str, int] = {}  # a repair's last version of each change source
        self._records: dict[str, list[BatchRecord]] | None = None

    def _enter(self, phase: Phase) -> None:
        now = time.monotonic()
        if self._phase is not None:
            self.summary.phase_seconds[self._phase.value] = now - self._clock
        self._phase, self._clock = phase, now
        self.on_step(phase)

    def _where(self, source: Source, version: int | None = None) -> str:
        at = f" at version {version}" if version is not None else ""
        return f"view '{self.view.name}', source '{source.name}' ({source.path}){at}"

    # --- 1. plan ---------------------------------------------------------------------------

    def _history(self, view: str) -> list[BatchRecord]:
        """A view's batch records as the plan found them: this view's and its upstream views'
        come from one read of the records (the plan's own writes only add non-committed ones)."""
        if self._records is None:
            upstreams = {s.upstream for s in self.sources if s.upstream is not None}
            self._records = self.store.histories({self.view.name, *upstreams})
        if view not in self._records:
            self._records.update(self.store.histories([view]))
        return self._records[view]

    def plan(self, full_refresh: bool) -> BatchRecord | None:
        self._enter(Phase.PLAN)
        last = last_of(self._history(self.view.name))
        if last is not None and last.status is BatchStatus.PLANNED and last.mode is BatchMode.REPAIR:
            # A repair that died part-way wrote only rows as of the pins it shares with the
            # checkpoint: nothing to finish, and the next repair can simply start again.
            self.store.commit(replace(last, status=BatchStatus.ABANDONED))
        elif last is not None and last.status is BatchStatus.PLANNED:
            if not full_refresh or last.mode is BatchMode.FULL_REFRESH:
                # A planned batch that never committed: redo it on exactly the versions it pinned.
                self.summary.retried = True
                self._check_inputs(last.pinned_versions)
                return self._begin(last)
            # A full refresh supersedes a stuck plan (say, one whose checks keep failing on the
            # data it pinned): it re-derives every key, so nothing the plan held is lost.
            self.store.commit(replace(last, status=BatchStatus.ABANDONED))
        if last is not None and last.status is not BatchStatus.COMMITTED:
            committed = last_of(self._history(self.view.name), BatchStatus.COMMITTED)
            start_from, next_id = committed, last.batch_id + 1
        else:
            start_from, next_id = last, (last.batch_id + 1 if last else 1)
        pinned = {s.name: self._latest(s) for s in self.sources}
        pinned.update(self._state_versions())
        start = dict(start_from.pinned_versions) if start_from else {}
        mode = BatchMode.FULL_REFRESH if full_refresh or start_from is None else BatchMode.INCREMENTAL
        self._check_inputs(pinned)
        if mode is BatchMode.INCREMENTAL and not any(
            self._changed_since(s, start, pinned) for s in self.kind.change_sources
        ):
            self.summary.start_versions = start
            self.summary.pinned_versions = pinned
            return None
        record = BatchRecord(
            view=self.view.name,
            batch_id=next_id,
            status=BatchStatus.PLANNED,
            mode=mode,
            start_versions=start,
            pinned_versions=pinned,
        )
        self.store.plan(record)
        return self._begin(record)

    def plan_repair(self, repair: RepairRange) -> BatchRecord:
        """A repair batch: the last committed batch's pins, and each change source's range."""
        self._enter(Phase.PLAN)
        history = self._history(self.view.name)
        last, committed = last_of(history), last_of(history, BatchStatus.COMMITTED)
        where = f"view '{self.view.name}'"
        if last is not None and last.status is BatchStatus.PLANNED and last.mode is not BatchMode.REPAIR:
            raise RepairError(
                f"batch {last.batch_id} was planned and never committed",
                where=where,
                fix="run the view once (it retries that batch), then repair",
            )
        if committed is None:
            raise RepairError(
                "the view has no committed batch, so there is no checkpoint to repair at",
                where=where,
                fix="run the view first; its first batch derives every key",
            )
        if last is not None and last.status is BatchStatus.PLANNED:
            self.store.commit(replace(last, status=BatchStatus.ABANDONED))
        # The sources as the checkpoint pinned them; the state tables as that batch left them
        # (its record pins their versions from before it wrote them).
        pinned = {s.name: committed.pinned_versions[s.name] for s in self.sources}
        pinned.update(self._state_versions())
        self._check_inputs(pinned)
        ranges = {s.name: repair.versions(self.spark, s, pinned[s.name]) for s in self.kind.change_sources}
        shown = ", ".join(f"{name} {a}..{b}" if a <= b else f"{name} none" for name, (a, b) in ranges.items())
        record = BatchRecord(
            view=self.view.name,
            batch_id=(last.batch_id if last else 0) + 1,
            status=BatchStatus.PLANNED,
            mode=BatchMode.REPAIR,
            start_versions={name: a - 1 for name, (a, _) in ranges.items()},
            pinned_versions=pinned,
            notes={
                "repair": f"{repair.describe()}: versions {shown}, re-derived at batch "
                f"{committed.batch_id}'s pins"
            },
        )
        self._repair_ends = {name: b for name, (_, b) in ranges.items()}
        self.store.plan(record)
        self.summary.notes.update(record.notes)
        return self._begin(record)

    def _begin(self, record: BatchRecord) -> BatchRecord:
        self.summary.batch_id = record.batch_id
        self.summary.mode = record.mode
        self.summary.start_versions = dict(record.start_versions)
        self.summary.pinned_versions = dict(record.pinned_versions)
        return record

    def _latest(self, source: Source) -> int:
        """The version to pin: a table's newest, or for another view's output the version its
        last committed batch left, so a view never reads a batch that is still writing (the
        output takes two commits) or whose checks failed."""
        if source.upstream is None:
            return latest_version(self.spark, source.path, role=self._where(source))
        committed = last_of(self._history(source.upstream), BatchStatus.COMMITTED)
        if committed is None:
            raise SourceError(
                f"it reads view '{source.upstream}', which has no committed batch yet",
                where=f"view '{self.view.name}'",
                fix=f"run view '{source.upstream}' first (a run of the whole pipeline orders views "
                "by dependency): lakejoin run SPEC",
            )
        version = committed_output_version(committed)
        return version if version >= 0 else latest_version(self.spark, source.path, role=self._where(source))

    def _changed_since(self, source: Source, start: dict[str, int], pinned: dict[str, int]) -> bool:
        """Can `source` hold changes between the last batch's pin and this one's? Commits that
        change no row (a VACUUM, an OPTIMIZE) do not count: without this, maintenance of a source
        costs every view that reads it a batch that reads an empty change feed (about 5 s a view
        at 15 M rows, docs/bench/analysis.md)."""
        if source.name not in start:
            return True
        return may_hold_changes(
            self.spark, source.path, start[source.name], pinned[source.name], role=self._where(source)
        )

    def _state_versions(self) -> dict[str, int]:
        """The current version of each of the view's state tables (-1: not created yet)."""
        from delta.tables import DeltaTable

        versions = {}
        for pin, path in self.kind.state_tables(self.routing_path).items():
            role = f"{self.kind.state_name} of '{self.view.name}'"
            exists = DeltaTable.isDeltaTable(self.spark, path)
            versions[pin] = latest_version(self.spark, path, role=role) if exists else -1
        return versions

    def _check_inputs(self, pinned: dict[str, int]) -> None:
        for source in self.sources:
            require_change_feed(self.spark, source.path, role=self._where(source))
        schemas = {
            s.name: column_types(self.spark, s.path, pinned[s.name], role=self._where(s))
            for s in self.sources
        }
        check_view_schemas(self.spec, self.view, schemas)
        self.kind.prepare(schemas)

    # --- 2..7 ------------------------------------------------------------------------------

    def execute(self, plan: BatchRecord, *, checks: bool) -> None:
        ctx = BatchContext(self.spark, self.spec, self.view, plan, self.routing_path)
        changes: dict[str, DataFrame] | None = None
        if plan.mode is not BatchMode.FULL_REFRESH:
            self._enter(Phase.CHANGES)
            if any(
                plan.pinned_versions.get(pin, -1) < 0 for pin in self.kind.state_tables(self.routing_path)
            ):
                raise BatchStateError(
                    f"the {self.kind.state_name} of view '{self.view.name}' is missing "
                    f"at {self.routing_path}",
                    where=f"view '{self.view.name}'",
                    fix="rebuild the view and its state with --full-refresh",
                )
            changes = {s.name: self._changes(s, plan) for s in self.kind.change_sources}
            self._enter(Phase.AFFECTED)

        try:
            rebuilt = self.kind.rebuild(ctx, changes)
        except KeyConflictError:
            # Nothing was written: let the next run plan afresh, on the fixed source data.
            self.store.commit(
                replace(plan, status=BatchStatus.ABANDONED, notes={"abandoned": "key conflict"})
            )
            raise
        if rebuilt.affected is not None:
            self.summary.affected_keys = rebuilt.affected.count()
        self._enter(Phase.RECOMPUTE)
        recomputed = rebuilt.rows.localCheckpoint()
        self.summary.recomputed_rows = recomputed.count()
        if rebuilt.affected is None:
            self.summary.affected_keys = self.summary.recomputed_rows

        self._enter(Phase.WRITE)
        self._write_output(plan, recomputed, rebuilt.affected)
        failpoint("after_output_merge")
        if plan.mode is not BatchMode.REPAIR:  # state is already at the pins a repair shares
            app_id = f"lakejoin.{self.spec.name}.{self.view.name}.routing"
            with idempotent(self.spark, app_id, plan.batch_id):
                self.kind.write_state(ctx)
        self.summary.kind_metrics.update(self.kind.metrics())
        self.summary.notes.update(ctx.notes)

        self._enter(Phase.CHECK)
        if checks:
            output = self.spark.read.format("delta").load(self.view.path)
            self.summary.report = quality.check_batch(
                self.spec,
                self.view,
                plan,
                self.kind.validations(ctx, recomputed, output),
                output=output,
                metrics=self.summary.metrics(),
            ).report_path

        self._enter(Phase.COMMIT)
        self.summary.outcome = BatchOutcome.COMMITTED
        metrics = self.summary.metrics()
        if not self.summary.output_applied:
            self.summary.notes["output"] = "already written by an earlier attempt"
        self.store.commit(
            replace(plan, status=BatchStatus.COMMITTED, metrics=metrics, notes=self.summary.notes)
        )
        self.summary.phase_seconds[Phase.COMMIT.value] = time.monotonic() - self._clock

    def _changes(self, source: Source, plan: BatchRecord) -> DataFrame:
        """The net change of every key of `source` in (start, pinned]; fails on a null key."""
        from pyspark.sql import functions as F

        first = plan.start_versions.get(source.name, -1) + 1
        last = plan.pinned_versions[source.name]
        where = self._where(source)
        if first > last:
            self.summary.changed_keys[source.name] = 0
            return no_changes(snapshot(self.spark, source.path, last))
        try:
            if plan.mode is BatchMode.REPAIR:
                end = self._repair_ends[source.name]
                rows = repair_changes(self.spark, source, first, end, last).localCheckpoint()
            else:
                feed = read_change_feed(self.spark, source.path, first, last)
                rows = net_changes(feed, source.key).localCheckpoint()
        except Exception as exc:  # Delta raises JVM errors; keep only the ones we can explain
            raise translate_read_error(exc, role=where, path=source.path, first=first, last=last) from exc
        counts = rows.agg(F.count(F.lit(1)).alias("n"), F.count(source.key).alias("keyed")).first()
        assert counts is not None
        if counts["n"] != counts["keyed"]:
            raise NullKeyError(
                f"changes between versions {first} and {last} hold a row whose key '{source.key}' is null",
                where=where,
                fix=f"give every row a '{source.key}' in the source, or filter null keys out upstream",
            )
        self.summary.changed_keys[source.name] = int(counts["n"])
        return rows

    def _write_output(self, plan: BatchRecord, recomputed: DataFrame, affected: DataFrame | None) -> None:
        where = f"view '{self.view.name}' output ({self.view.path})"
        keys = list(self.kind.output_key)
        ensure_output(self.spark, self.view.path, recomputed.schema, keys)
        drift = schema_drift(self.spark, self.view.path, recomputed.schema)
        if drift and affected is not None:
            raise drift_error(drift, where=where)
        app_id = f"lakejoin.{self.spec.name}.{self.view.name}.output"
        with idempotent(self.spark, app_id, plan.batch_id):
            if drift:
                counts = replace_output(self.view.path, recomputed)
                self.summary.notes["output"] = f"rewritten for a schema change: {drift}"
            elif affected is None:
                counts = merge_full(self.spark, self.view.path, recomputed, keys)
            else:
                counts = merge_affected(self.spark, self.view.path, recomputed, affected, keys)
        self.summary.output_applied = counts.applied
        self.summary.inserted, self.summary.updated, self.summary.deleted = (
            counts.inserted,
            counts.updated,
            counts.deleted,
        )
        if counts.applied:
            self.summary.unchanged_skipped = self.summary.recomputed_rows - counts.inserted - counts.updated
        self.summary.output_version = latest_version(self.spark, self.view.path, role=where)
