"""Step 1 of a batch (DESIGN §2): plan it from the Delta logs alone, with delta-rs, no Spark.

The plan reads the view's last batch from its output's own log, pins the current version of
every input (an upstream view: the version its last batch committed), and decides whether
there is anything to do. Nothing is written, but a batch log that is behind its outputs is
caught up. A view with nothing new costs a few log reads and starts no Spark job.

>>> plan_batch(spec, view, kind, log)                       # doctest: +SKIP
Skip(reason='no new versions since batch 7: merchants@4, products@9', ...)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lakejoin.delta.change_feed import logged_change_rows
from lakejoin.delta.identity import Identities, TableLog, foreign_commits, replaced
from lakejoin.delta.log import BatchLog
from lakejoin.delta.markers import (
    FINAL,
    BatchMarker,
    app_id,
    find_commit,
    operation_metrics,
    output_batches,
)
from lakejoin.delta.plans import BatchPlan, Skip, ViewBatches
from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus, last_of
from lakejoin.delta.sources import history_may_hold_changes
from lakejoin.delta.sql_text import spark_quoted
from lakejoin.delta.type_names import column_types
from lakejoin.errors import (
    BatchStateError,
    ChangeFeedMissingError,
    DefinitionChangedError,
    InputReplacedError,
    RepairError,
    SourceError,
    UpstreamNotCommittedError,
)
from lakejoin.quality.audit_plan import next_slice, round_start
from lakejoin.spec.definition import (
    Definition,
    comparable,
    differences,
    fingerprint,
    same,
    view_definition,
)
from lakejoin.spec.layout import health_path, state_path
from lakejoin.spec.model import OnDefinitionChange, OnInputReplaced, PipelineSpec, Source, View
from lakejoin.spec.schema_checks import check_view_schemas
from lakejoin.views.health_flags import HEALTH_PIN

if TYPE_CHECKING:
    from lakejoin.engine.repair import RepairRange
    from lakejoin.views.base import ViewKindLogic


def _where(view: View, source: Source) -> str:
    return f"view '{view.name}', source '{source.name}' ({source.path})"


def view_batches(spec: PipelineSpec, view: View, log: BatchLog, *, need_pins: bool = True) -> ViewBatches:
    """Read where the view's batches stand, and catch the batch log up with its output. Without
    `need_pins` (a full refresh reads no earlier batch), a last batch whose pins are lost is no
    error: it counts for the next batch id only; nor is a batch an older lakejoin left half
    written, which only a full refresh gets past (`_older_half_written`)."""
    app = app_id(spec.name, view.name)
    output = output_batches(view.path, app)
    history = log.history(view.name)
    logged = last_of(history, BatchStatus.COMMITTED)
    ids = [r.batch_id for r in history]
    committed: BatchRecord | None = None  # no batch ever committed into this output
    newest = output.last_committed
    half = output.half_written_by_older
    if half is not None:
        if need_pins:
            raise _older_half_written(spec, view, half)
        ids.append(half)
        # What the full refresh records it started from: the batch commit before the half batch.
        before = find_commit(view.path, lambda m: m.part == FINAL)
        committed = _record(view.name, *before) if before else None
    elif newest is not None:
        ids.append(newest)
        if logged is None or logged.batch_id < newest:
            committed = _catch_up(spec, view, newest, need_pins=need_pins)
            if committed is not None:
                log.append(committed)
        elif logged.batch_id > newest:
            raise BatchStateError(
                f"the batch log says batch {logged.batch_id} committed, the output's own log says "
                f"batch {newest}: the output was restored or replaced behind lakejoin's back",
                where=f"view '{view.name}' output ({view.path})",
                fix="rebuild the view with --full-refresh",
            )
        else:
            committed = logged
    unchanged = read_on(history, committed)
    next_id = max(ids, default=0) + 1
    slice_ = next_slice(history, view.audit, next_id)
    return ViewBatches(committed, next_id, unchanged, slice_, round_start(history, slice_))


def _older_half_written(spec: PipelineSpec, view: View, batch_id: int) -> BatchStateError:
    """The error for an output whose newest batch a lakejoin before issue 37 left half written
    (delta/markers.py): the first of its two output commits landed, its batch commit did not."""
    return BatchStateError(
        f"batch {batch_id} is half written into the output: an older lakejoin, which wrote some "
        "batches in two output commits (protocol version 2 before issue 37), made its first commit "
        "and stopped before the second; this version writes every batch in one commit and no "
        "longer finishes such a batch",
        where=f"view '{view.name}' output ({view.path})",
        fix="rebuild the view with --full-refresh (it needs no earlier batch and writes only the "
        f"rows that differ): lakejoin run {spec.file} --view {view.name} --full-refresh",
    )


def read_on(history: list[BatchRecord], committed: BatchRecord | None) -> BatchRecord | None:
    """The last of the batches after `committed` that read their changes and found none of
    content (`BatchStatus.UNCHANGED`: rows written back as they were, engine/batch.py), each
    starting where the one before it ended: the next batch reads its changes from its pins, not
    again from `committed`'s. None when there is no such batch.

    The batch log is an index, not the truth, and this is all it saves: without the row (lost,
    or the output restored to another batch, whose pins the row does not start from), the next
    batch reads those versions again and finds nothing in them again."""
    if committed is None:
        return None
    pins, last = committed.pinned_versions, None
    for record in history:
        if (
            record.status is BatchStatus.UNCHANGED
            and record.batch_id > committed.batch_id
            and record.start_versions == pins
        ):
            pins, last = record.pinned_versions, record
    return last


def _catch_up(spec: PipelineSpec, view: View, batch_id: int, *, need_pins: bool) -> BatchRecord | None:
    found = find_commit(view.path, lambda m: m.part == FINAL and m.batch_id == batch_id)
    if found is None and not need_pins:
        return None
    if found is None:
        raise BatchStateError(
            f"batch {batch_id} committed into the output, but neither the batch log nor what "
            "log cleanup left of the output's log records the versions it read",
            where=f"view '{view.name}' output ({view.path})",
            fix="rebuild the view with --full-refresh (it needs no earlier batch)",
        )
    return _record(view.name, *found)


def _record(view: str, version: int, marker: BatchMarker, commit: dict[str, Any]) -> BatchRecord:
    """A batch log row rebuilt from the output's batch commit."""
    metrics = operation_metrics(commit)
    return BatchRecord(
        view=view,
        batch_id=marker.batch_id,
        status=BatchStatus.COMMITTED,
        mode=marker.mode,
        start_versions=marker.start_versions,
        pinned_versions=marker.pinned_versions,
        metrics={k: metrics[k] for k in ("numOutputRows", "numTargetRowsUpdated") if k in metrics},
        notes={"log": "rebuilt from the output's commit"},
        output_version=version,
        definition=fingerprint(marker.definition) if marker.definition is not None else None,
        identities=dict(marker.identities),
        write=marker.write,
    )


def committed_version(spec: PipelineSpec, upstream: str, log: BatchLog, *, reader: str) -> int:
    """The output version of an upstream view's last committed batch: what a reader pins, so it
    never reads a batch that is still writing or whose checks failed."""
    batches = view_batches(spec, spec.views[upstream], log)
    if batches.committed is None or batches.committed.output_version < 0:
        raise UpstreamNotCommittedError(
            f"it reads view '{upstream}', which has no committed batch yet",
            where=f"view '{reader}'",
            fix=f"run view '{upstream}' first (a run of the whole pipeline orders views "
            "by dependency): lakejoin run SPEC",
        )
    return batches.committed.output_version


def latest_pin(
    spec: PipelineSpec, view: View, source: Source, log: BatchLog, table: TableLog | None = None
) -> int:
    """The version of `source` a batch of `view` pins now (`table`: its log, already read)."""
    if source.upstream is not None:
        return committed_version(spec, source.upstream, log, reader=view.name)
    table = table or TableLog.at(source.path)
    if table is None:
        raise SourceError(
            f"no Delta table at {source.path}",
            where=_where(view, source),
            fix="check the path in the spec, or create the table with Delta before running",
        )
    return table.version


def may_hold_changes(path: str, after: int, upto: int, table: TableLog | None = None) -> bool:
    """Can versions (after, upto] of the table at `path` (`table`: its log, already read) hold
    change rows? Only when every commit in them changes no row (NO_DATA_OPERATIONS) can they
    not; when the history cannot say, they can."""
    if upto <= after:
        return upto < after
    table = table or TableLog.at(path)
    if table is None:
        return True

    def newest(limit: int) -> list[tuple[int, str]]:
        commits = table.commits_after(max(table.version - limit, -1)) or []
        return [(int(c["version"]), str(c["operation"])) for c in commits]

    return history_may_hold_changes(newest, after, upto)


def plan_batch(
    spec: PipelineSpec, view: View, kind: ViewKindLogic, log: BatchLog, *, full_refresh: bool = False
) -> BatchPlan | Skip:
    """The next batch of `view`, or why there is none. A view whose definition changed since its
    last batch (spec/definition.py) refreshes in full or stops, as its `on_definition_change` says."""
    batches = view_batches(spec, view, log, need_pins=not full_refresh)
    committed = batches.committed
    tables = {s.name: TableLog.at(s.path) for s in kind.sources}
    pinned = {s.name: latest_pin(spec, view, s, log, tables[s.name]) for s in kind.sources}
    identities = {name: t.identity(pinned[name]) for name, t in tables.items() if t is not None}
    start = dict(committed.pinned_versions) if committed else {}
    # The newest batch's fingerprint: a batch that found no change of content ran under the
    # definition of its day too, and is newer than the committed one.
    last = batches.unchanged or committed
    recorded = last.definition if last is not None and comparable(last.definition) else None
    if full_refresh or committed is None:
        return _planned(
            spec, view, kind, batches, BatchMode.FULL_REFRESH, start, pinned, recorded,
            asked=full_refresh, identities=identities,
        )  # fmt: skip
    assert last is not None
    since = f"batch {committed.batch_id}"
    if batches.unchanged is not None:  # the versions up to its pins hold no change of content
        start = dict(batches.unchanged.pinned_versions)
        since = f"batch {batches.unchanged.batch_id} (no change of content since batch {committed.batch_id})"
    kept = kept_tables(spec, view, kind, start)
    why = replaced_inputs(view, kind, tables, kept, start, last.identities, committed)
    if why:
        text = f"{'; '.join(why)}: every key recomputed at the new versions"
        if view.on_input_replaced is OnInputReplaced.FAIL:
            raise InputReplacedError(
                f"view '{view.name}' cannot read on from {since}: {'; '.join(why)}; reading the change "
                "feed from the recorded versions would give a partial or wrong change",
                where=f"{spec.file}:{view.line} (at 'views.{view.name}')" if view.line else spec.file,
                fix=f"recompute the view at the new versions: lakejoin run {spec.file} --view {view.name} "
                "--full-refresh (or set 'on_input_replaced: full_refresh' on the view to do so on its own)",
            )
        planned = _planned(
            spec, view, kind, batches, BatchMode.FULL_REFRESH, start, pinned, recorded, asked=True,
            identities=identities,
        )  # fmt: skip
        planned.notes["replaced"] = text
        return planned
    pinned.update({pin: start.get(pin, -1) for pin in kept})
    identities.update(
        {pin: t.identity(start[pin]) for pin, t in kept.items() if t is not None and pin in start}
    )
    moved = [s for s in kind.change_sources if start.get(s.name, -1) != pinned[s.name]]
    nothing_new = not any(
        s.name not in start or may_hold_changes(s.path, start[s.name], pinned[s.name], tables[s.name])
        for s in moved
    )
    # With nothing new no input's schema moved either: only the spec's part can have changed.
    edited = recorded is not None and not same(recorded, view_definition(spec, view, {}), columns=False)
    if nothing_new and not edited:
        read = ", ".join(f"{s.name}@{pinned[s.name]}" for s in kind.change_sources)
        reason = f"no new versions since {since}: {read}"
        if moved:
            shown = ", ".join(f"{s.name} {start[s.name]}->{pinned[s.name]}" for s in moved)
            reason = f"nothing new since {since}: only maintenance commits (VACUUM, OPTIMIZE) in {shown}"
        return Skip(reason, start, pinned)
    planned = _planned(
        spec, view, kind, batches, BatchMode.INCREMENTAL, start, pinned, recorded, asked=False,
        identities=identities,
    )  # fmt: skip
    if planned.mode is BatchMode.INCREMENTAL:
        planned.change_rows.update(
            {
                s.name: logged_changes(tables[s.name], start.get(s.name, -1), pinned[s.name])
                for s in kind.change_sources
            }
        )
    return planned


def logged_changes(
    table: TableLog | None, after: int, upto: int, *, updated_once: bool = False
) -> int | None:
    """The change rows of versions (after, upto] of a table (`table`: its log), from the
    commits' operation metrics (None: they cannot say; `updated_once`: the rows changed,
    delta/change_feed.logged_change_rows)."""
    if upto <= after:
        return 0
    commits = table.commits_after(after) if table is not None else None
    if commits is None:
        return None
    return logged_change_rows([c for c in commits if int(c["version"]) <= upto], updated_once=updated_once)


def kept_tables(
    spec: PipelineSpec, view: View, kind: ViewKindLogic, start: Mapping[str, int]
) -> dict[str, TableLog | None]:
    """The tables lakejoin keeps for the view and pins with its batches (its state tables, and
    join health's flagged keys once a batch wrote them), by pin, as their logs read now."""
    paths = dict(kind.state_tables(state_path(spec, view)))
    if kind.health_measures and HEALTH_PIN in start:  # the waiting rows the last batch left
        paths[HEALTH_PIN] = health_path(spec, view)
    return {pin: TableLog.at(path) for pin, path in paths.items()}


def replaced_inputs(
    view: View,
    kind: ViewKindLogic,
    tables: Mapping[str, TableLog | None],
    kept: Mapping[str, TableLog | None],
    start: Mapping[str, int],
    recorded: Identities,
    committed: BatchRecord,
    *,
    output: bool = True,
) -> list[str]:
    """Why the batch cannot read on from `start`, one phrase a table (empty: it can): a change
    source, a state table or the flagged keys that is not the table the last batch read
    (`recorded`), or an output whose history after the last batch holds a commit that changed
    rows and is not lakejoin's (a RESTORE, someone's DELETE, UPDATE or MERGE; not `output`:
    the inputs and state tables only). From the logs alone (delta-rs); a pin recorded without
    its identity (before session 55) is not checked."""
    why = [
        reason
        for name, table in [*((s.name, tables[s.name]) for s in kind.change_sources), *kept.items()]
        if name in start
        for reason in [
            replaced(
                f"'{name}'" if name in tables else f"the view's {_kept_name(kind, name)}",
                table,
                start[name],
                recorded.get(name),
            )
        ]  # fmt: skip
        if reason is not None
    ]
    if output and committed.output_version >= 0:
        table = TableLog.at(view.path)
        if table is not None and table.version < committed.output_version:
            why.append(
                f"the view's output went back to version {table.version}, below the version "
                f"{committed.output_version} its batch {committed.batch_id} committed"
            )
        elif table is not None:
            foreign = foreign_commits(
                table, committed.output_version, lambda c: BatchMarker.from_commit(c) is not None
            )
            if foreign:
                why.append(
                    f"the view's output was changed behind lakejoin's back after its batch "
                    f"{committed.batch_id} (version {committed.output_version}): {', '.join(foreign)}"
                )
    return why


def stale_pins(
    spec: PipelineSpec, view: View, kind: ViewKindLogic, committed: BatchRecord, *, output: bool
) -> list[str]:
    """Why `committed`'s pins no longer name what that batch read (empty: they do), for what
    derives at those pins outside a batch's own plan: a repair (`output`: and the output was
    not changed behind lakejoin's back since), an audit of the whole output (the inputs only:
    an edited output is what it looks for)."""
    pinned = dict(committed.pinned_versions)
    tables = {s.name: TableLog.at(s.path) for s in kind.sources}
    kept = kept_tables(spec, view, kind, pinned)
    return replaced_inputs(view, kind, tables, kept, pinned, committed.identities, committed, output=output)


def _kept_name(kind: ViewKindLogic, pin: str) -> str:
    return "flagged keys (join health)" if pin == HEALTH_PIN else kind.state_name


def named_changes(
    view: View, committed: BatchRecord, definition: Definition
) -> tuple[Definition | None, list[str]]:
    """The definition `committed` ran under (whole, from its batch commit in the output's log)
    and what changed from it to `definition`, one phrase a change; when that commit's
    definition is not there (log cleanup, or batches recorded only by their fingerprint),
    None and one phrase that says so."""
    found = find_commit(view.path, lambda m: m.part == FINAL and m.batch_id == committed.batch_id)
    before = found[1].definition if found is not None else None
    if before is not None and comparable(before):
        return before, differences(before, definition) or ["the columns its inputs give"]
    return None, [
        f"its definition (recorded only by fingerprint, {committed.definition}) differs from the spec's"
    ]


def _planned(
    spec: PipelineSpec,
    view: View,
    kind: ViewKindLogic,
    batches: ViewBatches,
    mode: BatchMode,
    start: dict[str, int],
    pinned: dict[str, int],
    recorded: str | None,
    *,
    asked: bool,
    identities: Identities,
) -> BatchPlan:
    """The batch, once the inputs' columns at the pins are read and checked against the spec: an
    incremental batch under a changed definition becomes a full refresh, or stops with the
    changes named (`on_definition_change`). `asked`: the caller already chose a full refresh."""
    schemas = input_columns(spec, view, kind, pinned)
    definition = view_definition(spec, view, schemas)
    before: Definition | None = None
    changed: list[str] = []
    if recorded is not None and not same(recorded, definition):
        assert batches.committed is not None
        before, changed = named_changes(view, batches.committed, definition)
    notes = {}
    if changed:
        assert batches.committed is not None
        since = batches.committed.batch_id
        notes["definition"] = f"definition changed since batch {since}: {'; '.join(changed)}"
        if not asked and view.on_definition_change is OnDefinitionChange.FAIL:
            raise DefinitionChangedError(
                f"the definition of view '{view.name}' changed since batch {since}: {'; '.join(changed)}; "
                "an incremental batch would mix rows of both definitions in the output",
                where=f"{spec.file}:{view.line} (at 'views.{view.name}')" if view.line else spec.file,
                fix=f"rebuild the view under the new definition: lakejoin run {spec.file} --view "
                f"{view.name} --full-refresh (or set 'on_definition_change: full_refresh' on the view "
                "to do so on its own), or undo the edit",
            )
        mode = BatchMode.FULL_REFRESH
    rewrite = None
    if changed and (before is None or before.get("output_key") != definition["output_key"]):
        # A MERGE on the new key would match several old rows per key: replace the rows instead
        # (and when the old key is not known, replace them to be safe).
        old = ", ".join(before.get("output_key") or ()) if before is not None else "not recorded"
        rewrite = f"the output's key changed ({old} -> {', '.join(definition['output_key'])})"
    return BatchPlan(
        view.name,
        batches.next_id,
        mode,
        start,
        pinned,
        notes=notes,
        definition=definition,
        schemas=schemas,
        rewrite=rewrite,
        audit_slice=batches.audit_slice if mode is BatchMode.INCREMENTAL else None,
        audit_round=batches.audit_round if mode is BatchMode.INCREMENTAL else None,
        last_metrics=dict(batches.committed.metrics) if batches.committed is not None else {},
        identities=identities,
    )


def plan_repair(
    spec: PipelineSpec,
    view: View,
    kind: ViewKindLogic,
    log: BatchLog,
    repair: RepairRange,
) -> BatchPlan | Skip:
    """A repair batch: the last committed batch's pins, and each change source's range; a Skip
    when the range holds no version of any change source (the run skips the view, as for
    nothing new). Refused (InputReplacedError, whatever `on_input_replaced` says) when an input
    or a state table is not the table those pins read, or the output changed behind lakejoin's
    back since: a repair writes some keys and moves the view's last batch past the fault."""
    batches = view_batches(spec, view, log)
    where = f"view '{view.name}'"
    committed = batches.committed
    if committed is None:
        raise RepairError(
            "the view has no committed batch, so there is no checkpoint to repair at",
            where=where,
            fix="run the view first; its first batch derives every key",
        )
    pinned = dict(committed.pinned_versions)
    why = stale_pins(spec, view, kind, committed, output=True)
    if why:  # the pins name versions of tables that are not there, or an output not lakejoin's
        raise InputReplacedError(
            f"view '{view.name}' cannot repair at batch {committed.batch_id}'s pins: {'; '.join(why)}; "
            "a repair re-derives only its range's keys, from what those pins read, and would leave "
            "the rest as they are",
            where=f"{spec.file}:{view.line} (at 'views.{view.name}')" if view.line else where,
            fix=f"recompute the view at the new versions instead: lakejoin run {spec.file} --view "
            f"{view.name} --full-refresh (it re-derives every key and writes only the rows that differ)",
        )
    schemas = input_columns(spec, view, kind, pinned)
    definition = view_definition(spec, view, schemas)
    recorded = committed.definition
    if recorded is not None and comparable(recorded) and not same(recorded, definition):
        changed = named_changes(view, committed, definition)[1]
        raise RepairError(
            f"the view's definition changed since batch {committed.batch_id} ({'; '.join(changed)}): "
            "a repair re-derives keys under today's definition into an output of the old one",
            where=f"{spec.file}:{view.line} (at 'views.{view.name}')" if view.line else where,
            fix=f"rebuild the view under the new definition first: lakejoin run {spec.file} --view "
            f"{view.name} --full-refresh, then repair if you still need to",
        )
    ranges = {s.name: repair.versions(s, pinned[s.name]) for s in kind.change_sources}
    if all(a > b for a, b in ranges.values()):  # e.g. a version after every pin: nothing to re-derive
        held = ", ".join(f"{name}@{pinned[name]}" for name in ranges)
        reason = (
            f"nothing to repair: {repair.describe()} holds no version of its inputs up to "
            f"batch {committed.batch_id}'s pins ({held})"
        )
        return Skip(reason, dict(pinned), dict(pinned))
    shown = ", ".join(f"{name} {a}..{b}" if a <= b else f"{name} none" for name, (a, b) in ranges.items())
    note = f"{repair.describe()}: versions {shown}, re-derived at batch {committed.batch_id}'s pins"
    return BatchPlan(
        view.name,
        batches.next_id,
        BatchMode.REPAIR,
        {name: a - 1 for name, (a, _) in ranges.items()},
        pinned,
        notes={"repair": note},
        repair_ends={name: b for name, (_, b) in ranges.items()},
        definition=definition,
        schemas=schemas,
        identities=dict(committed.identities),
    )


def input_columns(
    spec: PipelineSpec, view: View, kind: ViewKindLogic, pinned: Mapping[str, int]
) -> dict[str, dict[str, str]]:
    """Check every input at its pinned version against the view (Change Data Feed on, the
    spec's columns and types), from the Delta logs; return each input's columns (name -> type),
    which the batch context hands to the view kind."""
    from deltalake import DeltaTable

    schemas: dict[str, dict[str, str]] = {}
    for source in kind.sources:
        try:
            table = DeltaTable(source.path, version=pinned[source.name])
        except Exception as exc:  # noqa: BLE001 - delta-rs: a version gone with log cleanup, a table gone
            raise SourceError(
                f"version {pinned[source.name]} of {source.path} cannot be read ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''})",
                where=_where(view, source),
                fix="rebuild the view from today's versions: lakejoin run SPEC --view VIEW --full-refresh",
            ) from exc
        configuration = table.metadata().configuration
        if str(configuration.get("delta.enableChangeDataFeed", "false")).lower() != "true":
            raise ChangeFeedMissingError(
                f"table {source.path} has no Change Data Feed, so its changes cannot be read incrementally",
                where=_where(view, source),
                fix=(
                    f"ALTER TABLE delta.{spark_quoted(source.path)} SET TBLPROPERTIES "
                    "(delta.enableChangeDataFeed = true), then run this view with --full-refresh once"
                ),
            )
        schemas[source.name] = column_types(json.loads(table.schema().to_json()))
    check_view_schemas(spec, view, schemas)
    return schemas
