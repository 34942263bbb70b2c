"""`lakejoin explain`'s answer as text for people (`--json` gives the same as a document)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from lakejoin.cli.explain_model import Explanation, changes_title, shown_range
from lakejoin.spec.explained import Absence, BatchInfo, InputRow, shown_key

if TYPE_CHECKING:
    from rich.console import Console


def render(console: Console, found: Explanation, spec_file: str) -> None:
    key = escape(shown_key(found.key))
    console.print(
        f"[bold]{found.view}[/] ({found.kind}) {key}, output version {found.output_version}", highlight=False
    )
    if found.row is not None:
        console.print(f"in the view: {escape(_row(found.row))}", highlight=False, soft_wrap=True)
    else:
        console.print("[yellow]not in the view[/]", highlight=False)
    if found.last_change is not None:
        done = {"insert": "inserted", "update": "updated", "delete": "deleted"}[
            found.last_change.change or ""
        ]
        console.print(f"last change: {done} by {_batch(found.last_change)}", highlight=False, soft_wrap=True)
    elif found.history_read and found.row is None:
        console.print("never in the view: its change feed holds no row of this key", highlight=False)
    pins = ", ".join(f"{s}@{v}" for s, v in sorted(found.read_at.pinned_versions.items()) if s[:1] != "_")
    console.print(f"inputs at the pins of batch {found.read_at.batch_id}: {pins}", highlight=False)
    console.print(_inputs(found.inputs))
    if found.choice is not None:
        console.print(f"rule: {escape(found.choice.text)}", highlight=False)
    changes = Table(title=changes_title(found), title_justify="left")
    for column in ("input", "version", "change", "row"):
        changes.add_column(column)
    for feed in found.changes:
        for r in feed.rows:
            data = {c: v for c, v in r.items() if c not in ("_change_type", "_commit_version")}
            changes.add_row(feed.source, str(r["_commit_version"]), r["_change_type"], escape(_row(data)))
        if not feed.rows:
            changes.add_row(feed.source, shown_range(feed), "-", feed.note or "no change")
    console.print(changes)
    if found.reason is not None:
        fix = ""
        if found.reason.code is Absence.DRIFT:
            fix = f": lakejoin run {spec_file} --view {found.view} --full-refresh"
        console.print(f"[yellow]why not:[/] {escape(found.reason.text)}{escape(fix)}", highlight=False)
    for note in found.notes:
        console.print(f"[dim]{escape(note)}[/]", highlight=False)


def _batch(batch: BatchInfo) -> str:
    if batch.batch_id is None:
        return f"a commit lakejoin did not mark (output version {batch.output_version}, {batch.committed_at})"
    notes = "; ".join(f"{topic} {note}" for topic, note in batch.notes.items())
    return (
        f"batch {batch.batch_id} ({batch.mode}), output version {batch.output_version}, committed "
        f"{batch.committed_at}" + (f" [dim]({escape(notes)})[/]" if notes else "")
    )


def _inputs(inputs: list[InputRow]) -> Table:
    table = Table(title="inputs", title_justify="left")
    for column in ("role", "table", "key", "row"):
        table.add_column(column)
    for i in inputs:
        role = i.role.value + (f" {i.position}" if i.position is not None else "")
        role += f" ({i.how.value})" if i.how is not None else ""
        row = escape(_row(i.row)) if i.row is not None else f"[red]missing[/]: {escape(i.missing())}"
        table.add_row(role, i.where, escape(shown_key(i.key)) if i.key else "-", row)
    return table


def _row(row: Mapping[str, Any]) -> str:
    return ", ".join(f"{c}={v!r}" for c, v in row.items())
