"""`lakejoin explain SPEC VIEW KEY...`: why one row of a view is what it is, or why the view has
no row for that key, from the Delta logs and tables alone (delta-rs: no JVM, no Spark job).

It follows the batch protocol (DESIGN §2). The output's change feed says which commit last
inserted, updated or deleted the key; that commit's marker (delta/markers.py) says which batch
it was and the input versions it read. The inputs' rows at those pins (delta/lookups.py) are
what made the row (each view kind's `explain`, views/<kind>.py), and their change feeds over the
batch's range, for the keys that lead to the row, are the changes that reached it. A key not in
the view is explained at the pins of the view's last batch, of which the output is a function,
by the rules of spec/explained.py.

>>> found = explain(load_spec("pipelines/marketplace.yaml"), "display_products", ["p1"])  # doctest: +SKIP
>>> found.read_at.batch_id, found.inputs[1].row["display_name"]  # doctest: +SKIP
(7, 'Acme')
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lakejoin.cli.explain_model import ChangeRows, Explanation
from lakejoin.cli.explain_rules import key_values
from lakejoin.cli.explain_text import render
from lakejoin.delta import lookups
from lakejoin.delta.history import numbered_history
from lakejoin.delta.identity import TableIdentity, TableLog, replaced
from lakejoin.delta.log import BatchLog
from lakejoin.delta.markers import FINAL, BatchMarker, find_commit
from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus
from lakejoin.engine.kinds import view_logic
from lakejoin.errors import BatchStateError, CommandError
from lakejoin.spec.definition import output_key
from lakejoin.spec.explained import Ask, BatchInfo, Feed, change_of
from lakejoin.spec.layout import state_path
from lakejoin.spec.model import PipelineSpec, View
from lakejoin.views.explained import key_history, read_rows

if TYPE_CHECKING:
    from rich.console import Console


def explain_command(
    console: Console, spec: PipelineSpec, view: str, texts: Sequence[str], *, at: int | None, as_json: bool
) -> int:
    found = explain(spec, view, texts, at=at)
    if as_json:
        print(json.dumps(found.document(), indent=2))
    else:
        render(console, found, spec.file)
    return 0


def explain(spec: PipelineSpec, name: str, texts: Sequence[str], *, at: int | None = None) -> Explanation:
    """Why the row of `name` keyed by `texts` (one value per key column, converted to its type)
    is what it is at output version `at` (default: the latest), or why there is none."""
    if name not in spec.views:
        raise spec.error("views", f"unknown view '{name}'", f"use one of: {', '.join(spec.views)}")
    view = spec.views[name]
    table = _output(spec, view, at)
    version = int(table.version())
    key = tuple(output_key(spec, view))
    types = {f.name: getattr(f.type, "type", str(f.type)) for f in table.schema().fields}
    values = key_values(name, key, types, texts)
    rows = read_rows(view.path, version, key, [values], f"view '{name}' output")
    row = rows[0] if rows else None
    logged = {r.batch_id: r for r in BatchLog.of(spec).history(name) if r.status is BatchStatus.COMMITTED}
    notes: list[str] = []
    try:
        history = key_history(view.path, version, key, values)
    except Exception as exc:  # noqa: BLE001 - delta-rs: change files vacuumed, a log cleaned up
        history = None
        notes.append(f"the output's change feed up to version {version} cannot be read ({exc})")
    last_change = _last_change(view, history, logged) if history else None
    read_at = last_change
    if row is None or read_at is None or read_at.batch_id is None:
        found = find_commit(view.path, lambda m: m.part == FINAL, at=version)
        if found is None:
            raise BatchStateError(
                f"no batch of view '{name}' committed up to output version {version}",
                where=f"view '{name}' output ({view.path})",
                fix=f"run the view first: lakejoin run {spec.file} --view {name}",
            )
        read_at = _batch(found[0], found[1], found[2], logged)
    # A key a batch deleted is explained at the pins of the newest batch (of which the output is
    # a function), and by the changes of the batch that deleted it.
    changed = last_change if last_change is not None and last_change.batch_id is not None else read_at
    logic = view_logic(spec, view)
    tables = {s.name: (s.name, s.path) for s in logic.sources}
    tables |= {
        pin: (f"the view's {logic.state_name}", path)
        for pin, path in logic.state_tables(state_path(spec, view)).items()
    }
    notes += _replaced(tables, [read_at, changed])
    ask = Ask(spec, view, values, read_at, row is None, notes, history)
    reader = logic.explain  # the view kind's: views/<kind>.py
    reading = reader(ask)
    feeds = reading.feeds
    if changed.output_version != read_at.output_version:
        # The keys that led to the row when it was deleted: those of that batch's pins (a
        # foreign key may have moved since). Only the feeds are wanted: read as for a row in the
        # view, so no input's delete is looked for again.
        try:
            feeds = reader(Ask(spec, view, values, changed, False, [], history)).feeds
        except BatchStateError as exc:
            notes.append(f"the inputs at batch {changed.batch_id}'s pins cannot be read ({exc.what})")
    return Explanation(
        pipeline=spec.name,
        view=name,
        kind=view.kind.value,
        key=dict(zip(key, values, strict=True)),
        output_path=view.path,
        output_version=version,
        row=row,
        history_read=history is not None,
        last_change=last_change,
        read_at=read_at,
        inputs=reading.inputs,
        choice=reading.choice,
        changes=_changes(feeds, changed, notes),
        changes_of=changed.batch_id,
        reason=reading.reason if row is None else None,
        notes=notes,
    )


def _output(spec: PipelineSpec, view: View, at: int | None) -> Any:
    """The view's output table as of version `at` (None: its latest), a delta-rs DeltaTable."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(view.path):
        raise BatchStateError(
            f"view '{view.name}' has no output at {view.path}: it never ran",
            where=f"view '{view.name}'",
            fix=f"run it first: lakejoin run {spec.file} --view {view.name}",
        )
    latest = int(DeltaTable(view.path).version())
    try:
        if at is not None and not 0 <= at <= latest:
            raise ValueError(f"versions run from 0 to {latest}")
        return DeltaTable(view.path, version=at)
    except Exception as exc:  # noqa: BLE001 - delta-rs: a version gone with log cleanup
        raise CommandError(
            f"the output of view '{view.name}' has no readable version {at} ({exc})",
            where=f"lakejoin explain --at {at}",
            fix=f"give a version the output's log still holds, at most {latest} (see lakejoin status)",
        ) from None


def _last_change(view: View, rows: list[dict[str, Any]], logged: dict[int, BatchRecord]) -> BatchInfo:
    """The batch whose commit last inserted, updated or deleted a key, from the output's change
    rows of the key in commit order."""
    from deltalake import DeltaTable

    last = rows[-1]["_commit_version"]
    table = DeltaTable(view.path)
    commit = next(c for c in numbered_history(table, 1, upto=last)[0] if int(c["version"]) == last)
    change = change_of([r["_change_type"] for r in rows if r["_commit_version"] == last])
    return _batch(last, BatchMarker.from_commit(commit), commit, logged, change)


def _batch(
    version: int,
    marker: BatchMarker | None,
    commit: dict[str, Any],
    logged: dict[int, BatchRecord],
    change: str | None = None,
) -> BatchInfo:
    record = logged.get(marker.batch_id) if marker else None
    stamp = commit.get("timestamp")
    return BatchInfo(
        batch_id=marker.batch_id if marker else None,
        mode=marker.mode.value if marker else None,
        output_version=version,
        committed_at=datetime.fromtimestamp(stamp / 1000, UTC).isoformat(timespec="milliseconds")
        if stamp
        else None,
        start_versions=dict(marker.start_versions) if marker else {},
        pinned_versions=dict(marker.pinned_versions) if marker else {},
        notes=dict(record.notes) if record else {},
        change=change,
        repair_ends=dict(marker.repair_ends) if marker else {},
        identities={n: (i.table_id, i.commit) for n, i in marker.identities.items()} if marker else {},
    )


def _replaced(tables: Mapping[str, tuple[str, str]], batches: Sequence[BatchInfo]) -> list[str]:
    """Why a table that a batch read at its pins (`tables`: pin -> (name in words, path): the
    inputs and the view's state table) is not the table at its path now (dropped and written
    again, gone back, its log rewritten: delta/identity.py), one note per table and batch (the
    batch the rows are read at, and the one whose changes are listed): explain reads what is
    there now at the old versions. A pin recorded without its identity is not checked; each
    table's log is read once."""
    logs: dict[str, TableLog | None] = {}
    notes = []
    for batch in {b.output_version: b for b in batches if b.batch_id is not None}.values():
        for pin, (name, path) in tables.items():
            recorded = batch.identities.get(pin)
            if recorded is None or pin not in batch.pinned_versions:
                continue
            if path not in logs:
                logs[path] = TableLog.at(path)
            version, read_by = batch.pinned_versions[pin], f"batch {batch.batch_id}"
            why = replaced(name, logs[path], version, TableIdentity(*recorded), read_by=read_by)
            if why is not None:
                notes.append(
                    f"since {read_by}, {why}: the input rows and changes shown are read from the table "
                    f"at its path now, not the one {read_by} read; run the view (its next batch reads "
                    "the new table) and explain again"
                )
    return notes


def _changes(feeds: list[Feed], batch: BatchInfo, notes: list[str]) -> list[ChangeRows]:
    """Each input's change rows in the range the batch read, (start, pinned] (a repair's:
    (start, end of the repaired range]), for the keys that lead to the row, one entry per
    input. A full refresh read no changes: it derived every key from the inputs at its pins."""
    if batch.mode == BatchMode.FULL_REFRESH.value:
        notes.append(
            f"batch {batch.batch_id} was a full refresh: it read no changes, it derived every key "
            "from the inputs at its pins"
        )
        return []
    grouped: dict[str, Feed] = {}
    for source, role, key, values in feeds:
        wanted = grouped.setdefault(source.name, (source, role, key, []))[3]
        wanted += [v for v in dict.fromkeys(values) if None not in v and v not in wanted]
    out = []
    for source, role, key, values in grouped.values():
        if source.name not in batch.pinned_versions:
            notes.append(
                f"batch {batch.batch_id} did not read {source.name}: the view's definition changed since"
            )
            continue
        first = batch.start_versions.get(source.name, -1) + 1
        last = batch.pinned_versions[source.name]
        if first > last:  # the batch read no new version of it
            out.append(ChangeRows(source.name, role, first, last, [], f"no new version of {source.name}"))
            continue
        if batch.mode == BatchMode.REPAIR.value:
            if source.name in batch.repair_ends:
                last = batch.repair_ends[source.name]
            else:
                notes.append(
                    f"batch {batch.batch_id} is a repair whose marker does not record where its "
                    f"range of {source.name} ended (written before lakejoin recorded it): its changes are "
                    "listed up to its pin"
                )
        try:
            rows, note = lookups.read_key_changes(source.path, first, last, key, values), ""
        except Exception as exc:  # noqa: BLE001 - delta-rs: change files vacuumed, a log cleaned up
            rows, note = [], f"cannot be read: {exc}"
            notes.append(f"the change feed of {source.name} in versions {first}..{last} {note}")
        out.append(ChangeRows(source.name, role, first, last, rows, note))
    return out
