"""One batch of one view (DESIGN §2, version 2), top to bottom, as typed steps: plan
(`BatchPlan`) -> inputs (`Inputs`: the changes) -> derive (`Derived`: affected keys and
recompute) -> health (`Counted`) -> check -> write (`Committed`) -> audit (`Audited`) -> log.
Each step takes the results before it and returns an immutable one; `Phase` times them in that
order. The batch is its output's commit: before it, nothing of the batch is visible; after it,
the batch happened, and the log row that follows is an index.

>>> summary = run_view(spark, spec, "display_products")     # doctest: +SKIP
>>> summary.outcome, summary.affected_keys                   # doctest: +SKIP
(<BatchOutcome.COMMITTED: 'committed'>, 3)
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakejoin.delta import lookups
from lakejoin.delta.identity import Identities, TableLog
from lakejoin.delta.key_ranges import KeyRange, collected, materialised
from lakejoin.delta.log import BatchLog
from lakejoin.delta.lookups import as_spark
from lakejoin.delta.markers import failpoint
from lakejoin.delta.plans import BatchPlan, Skip
from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus
from lakejoin.engine.audit import AuditResult, audit, difference_error, slicing
from lakejoin.engine.changes import source_changes
from lakejoin.engine.health import (
    FlaggedUpdate,
    Prior,
    beside,
    change_counts,
    count_batch,
    counted_changes,
    prior,
)
from lakejoin.engine.kinds import view_logic
from lakejoin.engine.lineage import BatchLineage
from lakejoin.engine.next_batch import Planner
from lakejoin.engine.plan import input_columns, latest_pin, plan_batch, plan_repair
from lakejoin.engine.repair import one_asked
from lakejoin.engine.write import write_flagged, write_output, write_state
from lakejoin.errors import (
    BatchStateError,
    CommittedElsewhereError,
    KeyConflictError,
    QualityCheckError,
)
from lakejoin.quality import checks as quality
from lakejoin.quality.audit_plan import CUTS, DIFFERENCES, EVERY_KEY, SLICE, SLICES
from lakejoin.quality.health import Health, breaches
from lakejoin.quality.health_checks import validation as health_validation
from lakejoin.quality.validations import Validation
from lakejoin.sink.entry import Written
from lakejoin.sink.facts import SessionSettings
from lakejoin.sink.strategy import may_upsert, write_note
from lakejoin.sink.writers import HeldRows
from lakejoin.spec.definition import fingerprint
from lakejoin.spec.layout import health_path, state_path
from lakejoin.spec.model import PipelineSpec, View
from lakejoin.views.base import Rebuilt, ViewKindLogic
from lakejoin.views.context import BatchContext, Derivation
from lakejoin.views.health_flags import HEALTH_PIN, KEEP, plain, plain_rows

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from lakejoin.engine.repair import RepairRange


class Phase(enum.Enum):
    PLAN = "plan"
    CHANGES = "changes"
    AFFECTED = "affected keys"
    RECOMPUTE = "recompute"
    HEALTH = "health"
    CHECK = "check"
    WRITE = "write"
    AUDIT = "audit"
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
    start_versions: dict[str, int] = field(default_factory=dict)
    pinned_versions: dict[str, int] = field(default_factory=dict)
    changed_keys: dict[str, int] = field(default_factory=dict)
    change_reads: dict[str, str] = field(default_factory=dict)  # per source: who read its changes
    affected_keys: int = 0
    recomputed_rows: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged_skipped: int = 0
    output_applied: bool = True
    output_version: int | None = None
    report: str | None = None
    reason: str | None = None  # why a skipped batch had nothing to do
    phase_seconds: dict[str, float] = field(default_factory=dict)
    kind_metrics: dict[str, int] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    identities: Identities = field(default_factory=dict, repr=False)  # which table each pin is of
    write: str | None = None  # the strategy that wrote the output (sink/strategy.Strategy's value)

    def figures(self) -> dict:
        """What an Airflow task keeps of the batch as its XCom (and spark-submit prints as JSON);
        `write` when the batch wrote its output."""
        figures = {
            "view": self.view,
            "outcome": self.outcome.value,
            "batch_id": self.batch_id,
            "pinned_versions": self.pinned_versions,
            "metrics": self.metrics(),
        }
        if self.write is not None:
            figures["write"] = self.write
        return figures

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
logger = logging.getLogger(__name__)


def batch_log(spec: PipelineSpec) -> BatchLog:
    return BatchLog.of(spec)


class _Clock:
    """Seconds per phase, and the caller's progress callback."""

    def __init__(self, summary: BatchSummary, on_step: StepCallback | None) -> None:
        self.summary, self.on_step = summary, on_step or (lambda phase: None)
        self.phase: Phase | None = None
        self.since = time.monotonic()

    def enter(self, phase: Phase | None) -> None:
        now = time.monotonic()
        if self.phase is not None:
            self.summary.phase_seconds[self.phase.value] = now - self.since
        self.phase, self.since = phase, now
        if phase is not None:
            self.on_step(phase)


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
    kind, log = view_logic(spec, view), batch_log(spec)
    summary = BatchSummary(view=view.name, outcome=BatchOutcome.SKIPPED)
    clock = _Clock(summary, on_step)
    one_asked(full_refresh, repair, where=f"view '{view_name}'")

    # 1. plan (delta-rs: a view with nothing new ends here, without a Spark job)
    clock.enter(Phase.PLAN)
    planned = (
        plan_batch(spec, view, kind, log, full_refresh=full_refresh)
        if repair is None
        else plan_repair(spec, view, kind, log, repair)
    )
    if isinstance(planned, Skip):
        summary.start_versions, summary.pinned_versions = planned.start_versions, planned.pinned_versions
        summary.reason = planned.reason
        clock.enter(None)
        return summary
    plan = planned
    # What the batch is about to do and why, as `lakejoin plan` says it, before its first Spark
    # job (the Airflow task's log): what the plan decided and read, nothing read again.
    if logger.isEnabledFor(logging.INFO):
        logger.info("plan: %s", Planner(spec, view, kind, [], {}, plan).next_batch(estimates=False).line())
    summary.batch_id, summary.mode = plan.batch_id, plan.mode
    summary.start_versions, summary.pinned_versions = dict(plan.start_versions), dict(plan.pinned_versions)
    summary.notes.update(plan.notes)
    lineage = BatchLineage.of(spark, spec, view, plan)
    lineage.start()
    try:
        _run_planned(spark, spec, view, kind, log, plan, summary, clock, lineage, checks=checks)
    except CommittedElsewhereError as exc:
        # Another run of the view committed this batch (same id, same run id in lineage, whose
        # events that run sends): the batch is in once, and this run has nothing new to do.
        summary.outcome, summary.reason = (
            BatchOutcome.SKIPPED,
            f"nothing new (another run committed batch {plan.batch_id})",
        )
        summary.notes["output"] = exc.what
        clock.enter(None)
        return summary
    except BaseException as exc:
        lineage.fail(exc)
        raise
    lineage.complete(summary)
    if summary.report is not None and summary.outcome is BatchOutcome.COMMITTED:
        quality.finish_report(spec, view, summary.report, summary.metrics(), write=summary.write)
    return summary


@dataclass(frozen=True)
class Inputs:
    """Step 2: each change source's net changes since the last batch (lazy frames, or local
    relations read on the driver), how many keys changed and their ranges, who read each range
    when not the batch itself, and join health's counts of the changes."""

    changes: dict[str, DataFrame]
    changed_keys: dict[str, int]
    ranges: dict[str, KeyRange]
    reads: dict[str, tuple[str, str]]  # source -> (read by, why)
    health_changes: dict[str, tuple[int, int]]


@dataclass(frozen=True)
class Derived:
    """Steps 3-4: the kind's rebuild and its rows, made once. `flagged` carries join health's
    per-row flags (the rows themselves when none are counted); `recomputed` is what the checks
    and the write take; `held`, the rows on the driver when the batch's keys are few; `seen`,
    what the job that made them observed; `before`, the affected keys' flags before the batch."""

    rebuilt: Rebuilt
    flagged: DataFrame
    recomputed: DataFrame
    rows: int
    seen: dict[str, Any]
    held: HeldRows | None
    before: Prior | None
    notes: dict[str, str]


@dataclass(frozen=True)
class Counted:
    """Join health after the batch (step 4b): its metrics and the notes of the limits it
    breaks, the flagged keys' update step 6 writes, and the limits as a validation (step 5)."""

    metrics: dict[str, int]
    notes: dict[str, str]
    waiting: FlaggedUpdate
    limits: Validation | None
    rows: int  # the rows the view keeps of those recomputed


@dataclass(frozen=True)
class Committed:
    """Step 6: the pins the batch committed (its state tables' and flagged keys' included),
    which table each is of, what the output write did (`output`) and the version of its batch
    commit (`output_version`)."""

    pins: dict[str, int]
    identities: Identities
    output: Written
    output_version: int


def _run_planned(
    spark: SparkSession,
    spec: PipelineSpec,
    view: View,
    kind: ViewKindLogic,
    log: BatchLog,
    plan: BatchPlan,
    summary: BatchSummary,
    clock: _Clock,
    lineage: BatchLineage,
    *,
    checks: bool,
) -> None:
    """Steps 2-7 of a planned batch, each taking the results before it; they fill `summary`
    (and tell `lineage` the rows' columns and the checks)."""
    ctx = BatchContext(spark, spec, view, plan, state_path(spec, view), plan.schemas)
    inputs = None
    if plan.mode is not BatchMode.FULL_REFRESH:
        clock.enter(Phase.CHANGES)
        inputs = read_inputs(ctx, kind)
        _take_inputs(summary, inputs)
        unchanged = nothing_changed(plan, summary.changed_keys)
        if unchanged is not None:  # rows written back as they were: nothing new, no output commit
            summary.reason = unchanged
            clock.enter(None)
            _log_unchanged(log, plan, summary)
            return
    settings = SessionSettings(spark)  # read once a batch: by its derivation and by its write
    ctx = ctx.deriving(derivation(spark, kind, plan, settings), **found_by(inputs))
    clock.enter(Phase.AFFECTED)
    try:
        derived = derive(ctx, kind, inputs, lambda: clock.enter(Phase.RECOMPUTE))
    except KeyConflictError as exc:
        _abandon(log, plan, summary, f"key conflict: {exc.what}")
        raise
    lineage.output_columns = list(derived.recomputed.dtypes)  # the frame's schema: no job
    summary.recomputed_rows = derived.rows
    summary.kind_metrics.update(derived.rebuilt.metrics)
    summary.notes.update(derived.notes)
    counted = None
    if derived.before is not None:
        clock.enter(Phase.HEALTH)
        counted = count_health(ctx, kind, derived)
        summary.recomputed_rows = counted.rows
        summary.kind_metrics.update(counted.metrics)
        summary.notes.update(counted.notes)
    clock.enter(Phase.CHECK)
    if checks:
        _check(ctx, kind, derived, counted, summary, lineage, log)
    clock.enter(Phase.WRITE)
    committed = write(ctx, kind, derived, counted, settings)
    _take_write(summary, derived, committed)
    audited = None
    if plan.audit_slice is not None and checks:
        clock.enter(Phase.AUDIT)
        audited = audit_batch(ctx, kind, committed.output_version)
        summary.kind_metrics.update(audited.metrics)
        summary.notes["audit"] = audited.note
    # 7. log: an index of the committed batch, for people and the Airflow skip check
    clock.enter(Phase.COMMIT)
    summary.outcome = BatchOutcome.COMMITTED
    clock.enter(None)
    _log_committed(log, plan, summary)
    if audited is not None and audited.found.differences:
        raise difference_error(spec, view, audited.found, f"the audit of batch {plan.batch_id}")


def read_inputs(ctx: BatchContext, kind: ViewKindLogic) -> Inputs:
    """2. changes: each change source's net changes in the plan's range, with join health's
    counts of them taken in the job that materialises them (or on the driver, for a range read
    there). The keys of a range read on the driver are remembered with it: no job collects them."""
    _require_state(ctx, kind)
    plan = ctx.plan
    inputs = Inputs({}, {}, {}, {}, {})
    for s in kind.change_sources:
        counted: dict[str, Any] = {}
        read = source_changes(
            ctx.spark,
            s,
            plan,
            where=ctx.where(s, plan.pinned_versions[s.name]),
            pinned=ctx.snapshot,
            also=change_counts(kind, s.name),
            seen=counted,
        )
        inputs.changes[s.name], inputs.changed_keys[s.name] = read.rows, read.count
        inputs.ranges[s.name] = read.bounds
        if read.keys is not None:
            ctx.know_keys(read.rows, s.key, read.keys)
        if read.read_by:
            inputs.reads[s.name] = (read.read_by, read.why)
        inputs.health_changes.update(counted_changes(kind, counted))
    return inputs


def _take_inputs(summary: BatchSummary, inputs: Inputs) -> None:
    summary.changed_keys.update(inputs.changed_keys)
    for name, (by, why) in inputs.reads.items():
        summary.change_reads[name] = by
        summary.notes[f"changes {name}"] = f"read by {by}: {why}"


def found_by(inputs: Inputs | None) -> dict[str, Any]:
    """What the change step found, as the context's `changed`, `changed_range` and
    `health_changes` (none in a full refresh)."""
    if inputs is None:
        return {}
    return {
        "changed": inputs.changed_keys,
        "changed_range": inputs.ranges,
        "health_changes": inputs.health_changes,
    }


def derivation(
    spark: SparkSession, kind: ViewKindLogic, plan: BatchPlan, settings: SessionSettings | None = None
) -> Derivation:
    """How the batch derives its rows. The affected keys' rows at the previous pins are, by the
    contract, the output's: derived from what the batch reads, the write need not read them
    (sink/key_upsert.py), when the upsert may write the batch (strategy.may_upsert, asked of the
    batch's `settings`, which its write then takes). Not in a repair, which mends an output that
    may not be what its inputs give. Rows flagged with their join health when the kind counts any."""
    incremental = plan.mode is BatchMode.INCREMENTAL and not plan.rewrite
    may = may_upsert(settings or SessionSettings(spark), incremental=incremental)
    return Derivation(previous=may, health=bool(kind.health_measures))


def derive(
    ctx: BatchContext, kind: ViewKindLogic, inputs: Inputs | None, recomputing: Callable[[], None]
) -> Derived:
    """3-4. affected keys and recompute (the view kind's own rule; `recomputing` marks the
    second), its rows flagged with their join health and counted in the job that makes them
    (views/health_flags.py): collected once on the driver for a batch of few keys, checked and
    written from there; materialised by Spark otherwise."""
    rebuilt = kind.rebuild(ctx, inputs.changes if inputs is not None else None)
    recomputing()
    rows, before = rebuilt.rows, None
    also: list[Column] = []
    if ctx.derivation.health:  # the affected keys' flags before the batch, beside the new ones
        before = prior(ctx, kind, rebuilt, health_path(ctx.spec, ctx.view))
        rows, also = beside(ctx, kind, rows, before)
    seen: dict[str, Any] = {}
    notes = dict(ctx.notes)
    keys = _few_keys(ctx, kind, rebuilt)
    if keys is None:
        flagged, count, _ = materialised(rows, also=also, seen=seen)
        return Derived(rebuilt, flagged, plain(flagged), count, seen, None, before, notes)
    table = collected(rows, also=also, seen=seen)
    held = HeldRows(plain_rows(table), keys)
    count = int(seen["n"])
    notes["recomputed rows"] = (
        f"{count} collected once on the driver (a batch of few keys): the checks and the write "
        "take them from there"
    )
    flagged = as_spark(ctx.spark, table, rows.schema)
    recomputed = as_spark(ctx.spark, held.rows, plain(rows).schema)
    return Derived(rebuilt, flagged, recomputed, count, seen, held, before, notes)


def count_health(ctx: BatchContext, kind: ViewKindLogic, derived: Derived) -> Counted:
    """4b. the view's join health after this batch; a limit it breaks is a note."""
    assert derived.before is not None
    view, plan = ctx.view, ctx.plan
    last = Health.from_metrics(plan.last_metrics)
    health, waiting = count_batch(
        ctx, kind, derived.rebuilt, derived.flagged, derived.seen, last, derived.before
    )
    notes = {f"health {b.limit.measure}": b.text() for b in breaches(view.health, health)}
    limits = health_validation(view.health, health)
    return Counted(health.metrics(), notes, waiting, limits, int(derived.seen[KEEP]))


def _check(
    ctx: BatchContext,
    kind: ViewKindLogic,
    derived: Derived,
    counted: Counted | None,
    summary: BatchSummary,
    lineage: BatchLineage,
    log: BatchLog,
) -> None:
    """5. check: a failing blocking check stops the batch before anything is written (its page
    is written, and the batch logged as abandoned)."""
    limits = [counted.limits] if counted is not None and counted.limits is not None else []
    try:
        report = quality.check_batch(
            ctx.spec,
            ctx.view,
            ctx.plan,
            [*kind.validations(ctx, derived.recomputed, derived.rebuilt), *limits],
            rows=derived.recomputed,
            held=derived.held.rows if derived.held is not None else None,
            size=summary.recomputed_rows,
            metrics=summary.metrics(),
        )
    except QualityCheckError as exc:
        _abandon(log, ctx.plan, summary, f"checks failed: {exc.what}")
        raise
    summary.report, lineage.checks = report.report_path, report.checks


def write(
    ctx: BatchContext,
    kind: ViewKindLogic,
    derived: Derived,
    counted: Counted | None,
    settings: SessionSettings | None = None,
) -> Committed:
    """6. write: the state tables, then the flagged keys, then the output, whose last commit is
    the batch's commit (`settings`: the batch's write settings, its derivation's)."""
    spec, view, plan = ctx.spec, ctx.view, ctx.plan
    pins = dict(plan.pinned_versions)
    if plan.mode is not BatchMode.REPAIR:  # a repair re-derives rows at the state's own pins
        failpoint("before_state_write")
        pins.update(write_state(ctx, kind, derived.rebuilt))
        failpoint("after_state_write")
    if counted is not None:  # the flagged keys, pinned with the batch like a state table
        version = write_flagged(counted.waiting, spec, view, plan.batch_id)
        if version is not None:
            pins[HEALTH_PIN] = version
    identities = {**plan.identities, **written_identities(spec, view, kind, plan, pins)}
    output = write_output(
        ctx.spark,
        spec,
        view,
        kind,
        plan,
        pins,
        derived.recomputed,
        derived.rebuilt,
        identities,
        derived.held,
        settings,
    )
    failpoint("after_output_commit")
    assert output.counts.version is not None
    return Committed(pins, identities, output, output.counts.version)


def _take_write(summary: BatchSummary, derived: Derived, committed: Committed) -> None:
    counts = committed.output.counts
    summary.identities, summary.pinned_versions = committed.identities, committed.pins
    summary.output_version = committed.output_version
    # The write's source holds one row per affected key: it counted them in its own job.
    summary.affected_keys = counts.keys if derived.rebuilt.affected is not None else summary.recomputed_rows
    summary.inserted, summary.updated, summary.deleted = counts.inserted, counts.updated, counts.deleted
    summary.unchanged_skipped = max(summary.recomputed_rows - counts.inserted - counts.updated, 0)
    if committed.output.note:
        summary.notes["output"] = committed.output.note
    written = committed.output
    summary.write = written.strategy.value
    # The strategy is a column of the summary and the log; a note says only that one gave the
    # batch up first (why is in the "output" note).
    if written.tried:
        summary.notes["write"] = write_note(written.strategy, written.tried)


@dataclass(frozen=True)
class Audited:
    """Step 6b: what the audit found, its batch-log metrics and its note."""

    found: AuditResult
    metrics: dict[str, int]
    note: str


def audit_batch(ctx: BatchContext, kind: ViewKindLogic, version: int) -> Audited:
    """6b. audit: the plan's slice of the keys (every key of a small output), re-derived at the
    pins, against what the batch just committed. A round is cut on the version its first batch
    (slice 0) committed: this one's, or a batch's before it."""
    plan, view = ctx.plan, ctx.view
    slice_ = plan.audit_slice
    assert slice_ is not None
    start = version if slice_ == 0 else plan.audit_round
    cut = slicing(view.path, start, kind.output_key, view.audit.slices)
    found = audit(ctx, kind, version, slice_, cut)
    metrics = {
        SLICE: slice_,
        DIFFERENCES: found.differences,
        SLICES: view.audit.slices,
        CUTS: cut.fingerprint() if found.slice is not None else EVERY_KEY,
    }
    return Audited(found, metrics, f"{found.scope}: {found.differences} key(s) differ from a recompute")


def _log_committed(log: BatchLog, plan: BatchPlan, summary: BatchSummary) -> None:
    """7. log: an index of the committed batch, for people and the Airflow skip check. The
    batch committed: a row not written is rebuilt from the output by the next plan."""
    try:
        log.append(_record(plan, summary, BatchStatus.COMMITTED))
    except Exception:
        logger.warning(
            "lakejoin: batch %s of %s committed, its log row was not written",
            plan.batch_id,
            plan.view,
            exc_info=True,
        )


def _few_keys(ctx: BatchContext, kind: ViewKindLogic, rebuilt: Rebuilt) -> list[tuple[Any, ...]] | None:
    """The affected keys of a batch of few keys (at most a driver lookup's), on the driver
    (collected when the kind did not find them there); None for a batch of many keys or of
    every key, whose rows Spark materialises. Each kind writes at most one row per affected key,
    so the rows a batch of few keys recomputes are few too."""
    if rebuilt.affected is None or not lookups.takes(rebuilt.affected_count, ctx.most_keys):
        return None
    return ctx.key_values(rebuilt.affected, tuple(kind.output_key), rebuilt.affected_count)


def written_identities(
    spec: PipelineSpec, view: View, kind: ViewKindLogic, plan: BatchPlan, pins: dict[str, int]
) -> Identities:
    """Which table each pin of a table the batch wrote is of (its state tables, the flagged
    keys), at the version the batch pins (delta-rs: the log it just wrote)."""
    paths = {**kind.state_tables(state_path(spec, view)), HEALTH_PIN: health_path(spec, view)}
    found: Identities = {}
    for pin, path in paths.items():
        if pin not in pins or (pin in plan.identities and plan.pinned_versions.get(pin) == pins[pin]):
            continue
        table = TableLog.at(path)
        if table is not None:
            found[pin] = table.identity(pins[pin])
    return found


def nothing_changed(plan: BatchPlan, changed_keys: dict[str, int]) -> str | None:
    """Why an incremental batch whose changes were read has nothing to do, or None when it has:
    no key of any change source changed content in its range (every new commit wrote rows back
    as they were, or wrote none), so its output and state would stay as they are. It ends there,
    as a view with nothing new does: no output commit, so readers of the output see no new
    version."""
    if plan.mode is not BatchMode.INCREMENTAL or any(changed_keys.values()):
        return None
    read = ", ".join(
        f"{name} {plan.start_versions.get(name, -1) + 1}..{plan.pinned_versions[name]}"
        for name in changed_keys
        if plan.start_versions.get(name, -1) < plan.pinned_versions[name]
    )
    return f"nothing new: no change of content in {read or 'the new versions'} (rows written as they were)"


def _log_unchanged(log: BatchLog, plan: BatchPlan, summary: BatchSummary) -> None:
    """Log a batch that found no change of content, so the next one reads on from its pins
    (plan.read_on). Only a saving: without the row the next batch reads the versions again."""
    summary.notes["unchanged"] = summary.reason or ""
    try:
        log.append(_record(plan, summary, BatchStatus.UNCHANGED))
    except Exception:
        logger.warning(
            "lakejoin: could not log unchanged batch %s of %s", plan.batch_id, plan.view, exc_info=True
        )


def _record(plan: BatchPlan, summary: BatchSummary, status: BatchStatus) -> BatchRecord:
    return BatchRecord(
        view=plan.view,
        batch_id=plan.batch_id,
        status=status,
        mode=plan.mode,
        start_versions=dict(plan.start_versions),
        pinned_versions=dict(summary.pinned_versions),
        metrics=summary.metrics(),
        notes=dict(summary.notes),
        output_version=summary.output_version if summary.output_version is not None else -1,
        definition=fingerprint(plan.definition) if plan.definition is not None else None,
        identities=dict(summary.identities or plan.identities),
        write=summary.write,
    )


def _abandon(log: BatchLog, plan: BatchPlan, summary: BatchSummary, why: str) -> None:
    """Log a batch that stopped before its output commit. Nothing of it was written, and the next
    run plans afresh under a new batch id (its report stays under this one). Logging is for
    people: a failure to log is a warning, never the error the caller sees."""
    summary.notes["abandoned"] = why
    try:
        log.append(_record(plan, summary, BatchStatus.ABANDONED))
    except Exception:
        logger.warning(
            "lakejoin: could not log abandoned batch %s of %s", plan.batch_id, plan.view, exc_info=True
        )


def _require_state(ctx: BatchContext, kind: ViewKindLogic) -> None:
    from deltalake import DeltaTable

    for pin, path in kind.state_tables(ctx.state_path).items():
        if ctx.plan.pinned_versions.get(pin, -1) < 0 or not DeltaTable.is_deltatable(path):
            raise BatchStateError(
                f"the {kind.state_name} of view '{ctx.view.name}' is missing at {path}",
                where=f"view '{ctx.view.name}'",
                fix="rebuild the view and its state with --full-refresh",
            )


def recompute_view(spark: SparkSession, spec: PipelineSpec, view_name: str) -> DataFrame:
    """The whole view recomputed from its inputs' current versions, as a lazy DataFrame.

    Nothing is written and no batch is logged: use it to inspect the Spark plan of a full
    recompute (`.explain()`), or to compare the output with a from-scratch result.

    >>> recompute_view(spark, spec, "enriched_purchases").explain()   # doctest: +SKIP
    """
    view = spec.views[view_name]
    kind, log = view_logic(spec, view), batch_log(spec)
    pinned = {s.name: _newest(spec, view, s, log) for s in kind.sources}
    schemas = input_columns(spec, view, kind, pinned)
    plan = BatchPlan(view_name, 0, BatchMode.FULL_REFRESH, {}, pinned)
    return kind.rebuild(BatchContext(spark, spec, view, plan, state_path(spec, view), schemas), None).rows


def _newest(spec: PipelineSpec, view: View, source, log: BatchLog) -> int:  # noqa: ANN001 - Source
    """Every input at its newest version, an upstream view's output included: a recompute reads
    what the tables hold, committed batch or not."""
    from deltalake import DeltaTable

    if source.upstream is None:
        return latest_pin(spec, view, source, log)
    return int(DeltaTable(source.path).version())


__all__ = ["BatchOutcome", "BatchSummary", "Phase", "batch_log", "recompute_view", "run_view"]
