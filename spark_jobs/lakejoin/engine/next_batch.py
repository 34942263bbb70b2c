"""What the next batch of each view would do, and why, before it runs (`lakejoin plan`, the
reports plugin's plan page, and the log line a batch writes before its first Spark job): from
the Delta logs, their commits' operation metrics and their file statistics alone (delta-rs), no
JVM and no data read.

Every decision it reports is the run's own function, given what the logs say:
- nothing new, incremental, full refresh, repair, or a refusal with its fix: `plan_batch` /
  `plan_repair` (engine/plan.py), which every batch calls first;
- a full recompute for a fan-out: `views/fanout.recomputes_in_full`, with the reach estimated
  (the batch counts it; `FanOut.how` says how the estimate was made);
- the write: `sink/strategy.choose_output`, with the key count estimated from the change rows
  and lakejoin's default write settings (a session may set others: spark.lakejoin.*).
The estimates (the fan-out's reach, the write, the time) live in engine/estimates.py; this
module gathers what they take and labels them as such. tests/scenarios/test_plan.py compares
each plan with what the following run did, for every kind.

>>> plans = plan_views(spec)                                  # doctest: +SKIP
>>> plans["display_products"].line()                          # doctest: +SKIP
'display_products: incremental, batch 8: new versions: merchants 4..5 (2 change rows); ...'
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakejoin.delta.identity import TableLog
from lakejoin.delta.log import BatchLog
from lakejoin.delta.plans import BatchPlan, Skip
from lakejoin.delta.records import BatchMode, BatchRecord
from lakejoin.engine.estimates import (
    DefaultSettings,
    FanOut,
    TimeEstimate,
    fanout_estimate,
    time_estimate,
    write_estimate,
)
from lakejoin.engine.kinds import view_logic
from lakejoin.engine.plan import logged_changes, plan_batch, plan_repair
from lakejoin.errors import LakejoinError, UpstreamNotCommittedError
from lakejoin.sink.strategy import OutputSettings
from lakejoin.spec.model import PipelineSpec, Source, View
from lakejoin.views.fanout import FanOutRule

if TYPE_CHECKING:
    from lakejoin.engine.repair import RepairRange
    from lakejoin.views.base import ViewKindLogic


class Action(enum.Enum):
    """What the next batch of a view does."""

    NOTHING_NEW = "nothing new"  # no Spark job: the run skips the view
    INCREMENTAL = "incremental"  # the changed keys' rows recomputed
    FULL_RECOMPUTE = "full recompute"  # an incremental batch whose changes fan out: every key recomputed
    FULL_REFRESH = "full refresh"  # every key recomputed at the new versions
    REPAIR = "repair"  # a range's keys re-derived at the last batch's pins
    REFUSED = "refused"  # the run stops before any Spark job, with the fix
    SKIPPED = "skipped"  # a view it reads is refused: a run skips this one


@dataclass(frozen=True)
class InputRange:
    """What the batch reads of one input: versions `first`..`last` of its changes (`first` >
    `last`: none), or its snapshot at `last` (`changes` False: a full recompute, or an input
    whose changes the kind does not read), with the change rows the commits' metrics count
    (None: a commit's metrics cannot say, or the range is not known yet); `upstream`: the view
    that writes it, and `waits_for`, what that view's own next batch does first."""

    source: str
    first: int
    last: int
    changes: bool
    change_rows: int | None
    upstream: str | None = None
    waits_for: str | None = None

    def text(self) -> str:
        if self.waits_for is not None:
            return f"{self.source} after view {self.upstream}'s batch ({self.waits_for})"
        if not self.changes:
            return f"{self.source}@{self.last}"
        if self.first > self.last:
            return f"{self.source} none"
        rows = "change rows unknown" if self.change_rows is None else f"{self.change_rows} change rows"
        return f"{self.source} {self.first}..{self.last} ({rows})"


@dataclass(frozen=True)
class NextBatch:
    """What the next batch of `view` does and why, and what it reads and writes."""

    view: str
    kind: str
    action: Action
    reason: str
    batch_id: int | None = None
    inputs: tuple[InputRange, ...] = ()
    fanout: FanOut | None = None
    write: str | None = None
    estimate: TimeEstimate | None = None
    fix: str | None = None  # a refusal's fix
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def has_work(self) -> bool:
        return self.action not in (Action.NOTHING_NEW, Action.REFUSED, Action.SKIPPED)

    def line(self) -> str:
        """The plan on one line (the Airflow task's log, the CLI's --view)."""
        parts = [f"{self.view}: {self.action.value}"]
        if self.batch_id is not None and self.has_work:
            parts[0] += f", batch {self.batch_id}"
        parts.append(self.reason)
        if self.inputs and self.has_work:
            parts.append("reads " + ", ".join(i.text() for i in self.inputs))
        if self.fanout is not None:
            parts.append(f"fan-out {self.fanout.text()}")
        if self.write is not None:
            parts.append(f"write {self.write}")
        if self.estimate is not None:
            parts.append(self.estimate.text())
        if self.fix:
            parts.append(f"fix: {self.fix}")
        return "; ".join(parts)

    def document(self) -> dict[str, Any]:
        """The plan as `lakejoin plan --json` prints it (cli/plan.schema.json)."""
        return {
            "view": self.view,
            "kind": self.kind,
            "action": self.action.value,
            "reason": self.reason,
            "batch_id": self.batch_id,
            "inputs": [
                {
                    "source": i.source,
                    "first": i.first,
                    "last": i.last,
                    "changes": i.changes,
                    "change_rows": i.change_rows,
                    "upstream": i.upstream,
                    "waits_for": i.waits_for,
                }
                for i in self.inputs
            ],
            "fanout": None
            if self.fanout is None
            else {
                "reached": self.fanout.reached,
                "rows": self.fanout.rows,
                "share": round(self.fanout.share, 6),
                "threshold": self.fanout.threshold,
                "min_rows": self.fanout.min_rows,
                "full_recompute": self.fanout.full,
                "estimated_by": self.fanout.how,
            },
            "write": self.write,
            "estimate": None
            if self.estimate is None
            else {
                "seconds": round(self.estimate.seconds, 3),
                "from_batches": list(self.estimate.batches),
                "how": self.estimate.how,
            },
            "fix": self.fix,
            "notes": dict(self.notes),
        }


def plan_views(
    spec: PipelineSpec,
    views: Collection[str] | None = None,
    *,
    full_refresh: bool = False,
    repair: RepairRange | None = None,
    log: BatchLog | None = None,
) -> dict[str, NextBatch]:
    """The next batch of each view in `views` (default: all), in dependency order, as `lakejoin
    run` of the same views would take it (`full_refresh`, `repair`: as it is asked). A view
    that reads another of them is planned after it: when that one has work, this one reads
    what it commits. A view not among `views` is read as its last batch left it, as the run
    reads it. Nothing is written: the batch log is read only."""
    from lakejoin.engine.repair import one_asked

    one_asked(full_refresh, repair, where="the plan's options")
    log = log or BatchLog.of(spec, read_only=True)
    shown = [v for v in spec.view_order() if not views or v in views]
    histories = log.histories(shown)
    plans: dict[str, NextBatch] = {}
    for name in shown:
        upstream = {u: plans[u] for u in spec.upstream_views(name) if u in plans}
        plans[name] = next_batch(
            spec,
            spec.views[name],
            log,
            histories.get(name, []),
            upstream,
            full_refresh=full_refresh,
            repair=repair,
        )
    return plans


def next_batch(
    spec: PipelineSpec,
    view: View,
    log: BatchLog,
    history: list[BatchRecord],
    upstream: Mapping[str, NextBatch],
    *,
    full_refresh: bool = False,
    repair: RepairRange | None = None,
) -> NextBatch:
    """The next batch of `view` (`history`: its batch log rows; `upstream`: the plans of the
    views it reads that run before it in the same run)."""
    kind = view_logic(spec, view)
    failing = [u for u, p in upstream.items() if p.action in (Action.REFUSED, Action.SKIPPED)]
    if failing:  # as run_pipeline does: a view that reads a failed view is skipped
        reason = "it reads " + ", ".join(f"view {u}" for u in failing) + ", whose batch would not run"
        return NextBatch(view.name, view.kind.value, Action.SKIPPED, reason)
    # A repair reads each input up to the view's own last pins, never what an upstream view's
    # repair commits in the same run: it waits for no one.
    pending = {u: p for u, p in upstream.items() if p.has_work and repair is None}
    try:
        planned = (
            plan_repair(spec, view, kind, log, repair)
            if repair is not None
            else plan_batch(spec, view, kind, log, full_refresh=full_refresh)
        )
    except UpstreamNotCommittedError as exc:
        if pending:  # its first batch follows the upstream's
            reason = "its first batch, after " + ", ".join(f"view {u}'s" for u in pending)
            return NextBatch(view.name, view.kind.value, Action.FULL_REFRESH, reason)
        return NextBatch(view.name, view.kind.value, Action.REFUSED, exc.what, fix=exc.fix or None)
    except LakejoinError as exc:
        return NextBatch(view.name, view.kind.value, Action.REFUSED, exc.what, fix=exc.fix or None)
    try:
        return Planner(spec, view, kind, history, pending, planned).next_batch()
    except Exception as exc:  # noqa: BLE001 - an estimate the logs cannot give (delta-rs): said, not raised
        what = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        fix = "check the view's inputs and output (`lakejoin status`); `lakejoin run` says what it finds"
        reason = f"the plan could not read what it needs ({what})"
        return NextBatch(view.name, view.kind.value, Action.REFUSED, reason, fix=fix)


class Planner:
    """One view's next batch from its plan (`planned`), with the estimates the logs allow."""

    def __init__(
        self,
        spec: PipelineSpec,
        view: View,
        kind: ViewKindLogic,
        history: list[BatchRecord],
        pending: Mapping[str, NextBatch],
        planned: BatchPlan | Skip,
        settings: OutputSettings | None = None,
    ) -> None:
        self.spec, self.view, self.kind = spec, view, kind
        self.history, self.pending, self.planned = history, pending, planned
        self.settings = settings or DefaultSettings()
        self._logs: dict[str, TableLog | None] = {}  # each input's log, read once

    def next_batch(self, *, estimates: bool = True) -> NextBatch:
        """The plan; without `estimates` (the line a batch logs before its Spark jobs), only what
        its plan decided and read: no fan-out, write or time, which the batch then decides and
        reports itself, and no log read twice."""
        p = self.planned
        name, kind = self.view.name, self.view.kind.value
        if isinstance(p, Skip):
            if not self.pending:
                return NextBatch(name, kind, Action.NOTHING_NEW, p.reason, inputs=self.inputs(None))
            reason = "nothing new of its own; " + self._waits()
            return NextBatch(name, kind, Action.INCREMENTAL, reason, inputs=self.inputs(None))
        reads_changes = p.mode in (BatchMode.INCREMENTAL, BatchMode.REPAIR)
        fanout = self.fanout(p) if reads_changes and estimates else None
        action = {
            BatchMode.INCREMENTAL: Action.INCREMENTAL,
            BatchMode.FULL_REFRESH: Action.FULL_REFRESH,
            BatchMode.REPAIR: Action.REPAIR,
        }[p.mode]
        if fanout is not None and fanout.full and action is Action.INCREMENTAL:
            action = Action.FULL_RECOMPUTE
        reason = self.reason(p)
        if self.pending:
            reason += "; " + self._waits()
        return NextBatch(
            name,
            kind,
            action,
            reason,
            batch_id=p.batch_id,
            inputs=self.inputs(p, reread=estimates),
            fanout=fanout,
            write=self.write(p, action, fanout) if estimates else None,
            estimate=self.estimate(p, action) if estimates else None,
            notes=dict(p.notes),
        )

    def _waits(self) -> str:
        return "waits for " + ", ".join(f"view {u} ({n.action.value})" for u, n in self.pending.items())

    def reason(self, p: BatchPlan) -> str:
        for why in ("repair", "replaced", "definition"):
            if why in p.notes:
                return p.notes[why]
        if p.mode is BatchMode.FULL_REFRESH:
            return "asked (--full-refresh)" if p.start_versions else "the view's first batch"
        moved = [
            f"{s.name} {p.start_versions.get(s.name, -1) + 1}..{p.pinned_versions[s.name]}"
            for s in self.kind.change_sources
            if p.start_versions.get(s.name, -1) != p.pinned_versions[s.name]
        ]
        return "new versions: " + ", ".join(moved) if moved else "new versions"

    def inputs(self, p: BatchPlan | None, *, reread: bool = True) -> tuple[InputRange, ...]:
        planned = self.planned
        start, pinned = planned.start_versions, planned.pinned_versions
        reads_changes = p is not None and p.mode is not BatchMode.FULL_REFRESH
        change_sources = {s.name for s in self.kind.change_sources}
        ranges = []
        for source in self.kind.sources:
            first, last = start.get(source.name, -1) + 1, pinned[source.name]
            if p is not None and p.mode is BatchMode.REPAIR:
                last = p.repair_ends.get(source.name, last)
            changes = reads_changes and source.name in change_sources
            known = p is not None and source.name in p.change_rows
            rows = self.change_rows(source) if changes and (reread or known) else None
            if p is None:  # nothing new: the range is empty
                changes, rows = True, 0
            waits = self.pending.get(source.upstream) if source.upstream else None
            ranges.append(
                InputRange(
                    source.name,
                    first,
                    last,
                    changes,
                    rows,
                    upstream=source.upstream,
                    waits_for=waits.action.value if waits is not None else None,
                )
            )
        return tuple(ranges)

    def change_rows(self, source: Source, *, updated_once: bool = False) -> int | None:
        """The change rows of `source` in the batch's range, from the commits' metrics."""
        p = self.planned
        after, upto = p.start_versions.get(source.name, -1), p.pinned_versions[source.name]
        if isinstance(p, BatchPlan) and p.mode is BatchMode.REPAIR:
            upto = p.repair_ends.get(source.name, upto)
        if not updated_once and isinstance(p, BatchPlan) and source.name in p.change_rows:
            return p.change_rows[source.name]
        return logged_changes(self._log(source.path), after, upto, updated_once=updated_once)

    def _log(self, path: str) -> TableLog | None:
        if path not in self._logs:
            self._logs[path] = TableLog.at(path)
        return self._logs[path]

    # --- the estimates (engine/estimates.py), from what the plan read -----------------------

    def fanout(self, p: BatchPlan) -> FanOut | None:
        """The fan-out rule of the kind (None: it has none, or no one-side row changed), on the
        reach estimated from the changed one-side rows (`fanout_estimate`)."""
        rule: FanOutRule | None = self.kind.fanout
        if rule is None:
            return None
        changed = [self.change_rows(one, updated_once=True) for one in rule.ones]
        waiting = [o.upstream for o in rule.ones if o.upstream is not None and o.upstream in self.pending]
        return fanout_estimate(rule, changed, waiting, p.pinned_versions, self.history)

    def write(self, p: BatchPlan, action: Action, fanout: FanOut | None) -> str:
        """The output's write strategy (`write_estimate`), with the batch's keys estimated from
        the driving input's change rows and the fan-out's reach."""
        full = action in (Action.FULL_REFRESH, Action.FULL_RECOMPUTE)
        counted = None
        if not full:
            counted = self.change_rows(self.kind.driving, updated_once=True) or 0
            counted += fanout.reached if fanout is not None else 0
        return write_estimate(self.view, p, self.history, self.settings, full=full, counted=counted)

    def estimate(self, p: BatchPlan, action: Action) -> TimeEstimate | None:
        """The time of the batch from the view's batches of the same action (`time_estimate`)."""
        size = sum(self.change_rows(s, updated_once=True) or 0 for s in self.kind.change_sources)
        alike = [r for r in self.history if _action_of(r) is action]
        own = action in (Action.INCREMENTAL, Action.REPAIR)
        return time_estimate(alike, size, action.value, own=own)


def _action_of(record: BatchRecord) -> Action:
    if record.mode is BatchMode.FULL_REFRESH:
        return Action.FULL_REFRESH
    if record.mode is BatchMode.REPAIR:
        return Action.REPAIR
    return Action.FULL_RECOMPUTE if record.metrics.get("full_recompute") else Action.INCREMENTAL
