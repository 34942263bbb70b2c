"""The input rows behind one key of a view, read at a batch's pins with delta-rs (no JVM), one
reader per view kind: fk_join's left row and the right row its fk names, list_join's left row
and each element's right row, enrich's fact and each dimension's row, rekey's master rows and
the rule that kept one. Each also names the keys whose change-feed rows lead to the row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lakejoin.cli.explain_model import BatchInfo, Choice, InputRow, Reason, Role
from lakejoin.cli.explain_rules import (
    deleted_at,
    list_elements,
    rekey_choice,
    why_not_derived,
    why_not_joined,
)
from lakejoin.delta import lookups
from lakejoin.engine.write import state_path
from lakejoin.errors import BatchStateError, SourceError
from lakejoin.spec.model import Duplicates, EnrichMode, JoinHow, Key, PipelineSpec, Source, View, ViewKind
from lakejoin.views.context import STATE
from lakejoin.views.rekey import SINCE, Resolution, resolution

Feed = tuple[Source, Role, Key, list[tuple[Any, ...]]]  # an input's keys whose changes lead to the row


@dataclass(frozen=True)
class Reading:
    """What a view kind's inputs say of one key at a batch's pins."""

    inputs: list[InputRow]
    feeds: list[Feed]
    reason: Reason | None = None
    choice: Choice | None = None


def read_rows(
    path: str, version: int, key: Key, values: list[tuple[Any, ...]], what: str
) -> list[dict[str, Any]]:
    """The rows of `values` at `version` of the table at `path`, as dicts."""
    try:
        rows = lookups.read_keys(path, version, key, values) if lookups.literal_keys(values) else None
    except Exception as exc:  # noqa: BLE001 - delta-rs: a version vacuumed, a log cleaned up
        raise SourceError(
            f"version {version} of {path} cannot be read ({exc})",
            where=what,
            fix="VACUUM or log cleanup removed it: explain a newer output version (--at), or rebuild "
            "the view with --full-refresh so its batches pin versions the tables still hold",
        ) from None
    if rows is None:
        raise SourceError(
            f"delta-rs cannot look keys up in {path} as Spark reads it (column mapping, a reader "
            "feature delta-rs lacks, or a key that is neither a whole number, a string nor a date)",
            where=what,
            fix="read the rows with Spark: spark.read.format('delta').option('versionAsOf', V).load(path)",
        )
    return rows.to_pylist()


def pin(batch: BatchInfo, source: Source) -> int:
    if source.name not in batch.pinned_versions:
        raise BatchStateError(
            f"batch {batch.batch_id} did not read '{source.name}': the view's definition changed since",
            where=f"output version {batch.output_version}",
            fix="run the view (a changed definition refreshes it), then explain again",
        )
    return batch.pinned_versions[source.name]


def _looked_up(
    source: Source,
    role: Role,
    batch: BatchInfo,
    value: tuple[Any, ...],
    *,
    how: JoinHow | None = None,
    history: bool = False,
) -> InputRow:
    """The row of `source` keyed by `value` at the batch's pin; with `history`, a missing row's
    delete is looked for in the source's change feed (None when it cannot be read)."""
    version = pin(batch, source)
    if None in value:
        return InputRow(role, source.name, version, None, None, how=how)
    rows = read_rows(source.path, version, source.key, [value], f"source '{source.name}'")
    gone = _deleted_at(source, value, version) if history and not rows else None
    key = dict(zip(source.key, value, strict=True))
    return InputRow(role, source.name, version, key, rows[0] if rows else None, how=how, deleted_at=gone)


def _deleted_at(source: Source, value: tuple[Any, ...], version: int) -> int | None:
    """The version of `source` up to `version` that deleted the row of `value`, from its change
    feed (None: it was never deleted, or the feed cannot be read: not knowing since when is no
    error)."""
    try:
        return deleted_at(lookups.read_key_changes(source.path, 0, version, source.key, [value]))
    except Exception:  # noqa: BLE001 - delta-rs: change files vacuumed, a log cleaned up
        return None


def _driving(
    source: Source, role: Role, batch: BatchInfo, values: tuple[Any, ...], absent: bool
) -> tuple[list[InputRow], list[Feed]]:
    """The row a joining kind starts from (the left row, the fact) and the feed of its key."""
    return [_looked_up(source, role, batch, values, history=absent)], [(source, role, source.key, [values])]


def _fk_join(
    spec: PipelineSpec, view: View, values: tuple[Any, ...], batch: BatchInfo, absent: bool, notes: list[str]
) -> Reading:
    join = view.fk_join
    left, right = spec.sources[join.left], spec.sources[join.right]
    inputs, feeds = _driving(left, Role.LEFT, batch, values, absent)
    if inputs[0].row is not None:
        fk = tuple(inputs[0].row[c] for c in join.fk)
        inputs.append(_looked_up(right, Role.RIGHT, batch, fk, how=join.how, history=absent))
        feeds.append((right, Role.RIGHT, right.key, [fk]))
    return Reading(inputs, feeds, why_not_joined(inputs) if absent else None)


def _list_join(
    spec: PipelineSpec, view: View, values: tuple[Any, ...], batch: BatchInfo, absent: bool, notes: list[str]
) -> Reading:
    join = view.list_join
    left, right = spec.sources[join.left], spec.sources[join.right]
    inputs, feeds = _driving(left, Role.LEFT, batch, values, absent)
    if inputs[0].row is not None:
        elements = list_elements(inputs[0].row[join.list], right.key, drop=join.duplicates is Duplicates.DROP)
        wanted = list(dict.fromkeys(e for e in elements if e is not None and None not in e))
        version = pin(batch, right)
        rows = read_rows(right.path, version, right.key, wanted, f"source '{right.name}'") if wanted else []
        found = {tuple(r[c] for c in right.key): r for r in rows}
        inputs += [
            InputRow(
                Role.ELEMENT,
                right.name,
                version,
                None if e is None or None in e else dict(zip(right.key, e, strict=True)),
                found.get(e) if e is not None else None,
                how=JoinHow.LEFT,
                position=i,
            )
            for i, e in enumerate(elements)
        ]
        feeds.append((right, Role.ELEMENT, right.key, wanted))
    return Reading(inputs, feeds, why_not_joined(inputs) if absent else None)


def _enrich(
    spec: PipelineSpec, view: View, values: tuple[Any, ...], batch: BatchInfo, absent: bool, notes: list[str]
) -> Reading:
    enrich = view.enrich
    fact = spec.sources[enrich.fact]
    inputs, feeds = _driving(fact, Role.FACT, batch, values, absent)
    if inputs[0].row is not None:
        for d in enrich.dimensions:
            table, fk = spec.sources[d.table], tuple(inputs[0].row[c] for c in d.fk)
            inputs.append(_looked_up(table, Role.DIMENSION, batch, fk, how=d.how, history=absent))
            feeds.append((table, Role.DIMENSION, table.key, [fk]))
    lookup = enrich.mode is EnrichMode.LOOKUP
    return Reading(inputs, feeds, why_not_joined(inputs, lookup=lookup) if absent else None)


def _rekey(
    spec: PipelineSpec, view: View, values: tuple[Any, ...], batch: BatchInfo, absent: bool, notes: list[str]
) -> Reading:
    """The master rows holding the derived key at the pin and the rule that kept one (or all);
    for a key not in the view, the masters that held it, from the master's change feed (a
    `unique: false` view's key names its master)."""
    rekey = view.rekey
    master = spec.sources[rekey.source]
    v, k = rekey.key, master.key
    derived, version = values[: len(v)], pin(batch, master)
    rows = read_rows(master.path, version, v, [derived], f"source '{master.name}'")
    if not rekey.unique:
        rows = [r for r in rows if tuple(r[c] for c in k) == values[len(v) :]]
    holders = [InputRow(Role.MASTER, master.name, version, {c: r[c] for c in k}, r) for r in rows]
    feeds: list[Feed] = [(master, Role.MASTER, v, [derived])]
    if absent:
        former = [values[len(v) :]]
        if rekey.unique:
            try:
                changes = lookups.read_key_changes(master.path, 0, version, v, [derived])
            except Exception as exc:  # noqa: BLE001 - delta-rs: change files vacuumed
                changes = []
                notes.append(
                    f"the change feed of {master.name} up to version {version} cannot be read ({exc})"
                )
            former = list(dict.fromkeys(tuple(r[c] for c in k) for r in changes))
        claimants = holders or [_looked_up(master, Role.MASTER, batch, m, history=True) for m in former]
        return Reading(claimants, feeds, why_not_derived(v, claimants, claimed=bool(holders)))
    rule = resolution(rekey.unique, rekey.on_conflict)
    since = _last_changes(spec, view, batch, k, [tuple(h.row[c] for c in k) for h in holders if h.row])
    claims = [(h.key or {}, since.get(tuple((h.key or {}).values()))) for h in holders]
    chosen, text = rekey_choice(rule, claims)
    return Reading(
        holders, feeds, choice=Choice(rule, chosen, claims if rule is Resolution.LATEST else [], text)
    )


def _last_changes(
    spec: PipelineSpec, view: View, batch: BatchInfo, key: Key, masters: list[tuple[Any, ...]]
) -> dict[tuple[Any, ...], int]:
    """Each master's commit version of its last change of content, from the rekey's index at
    the batch's pin (empty when it has none, or delta-rs cannot read it)."""
    version = batch.pinned_versions.get(STATE, -1)
    if version < 0 or len(masters) < 2:
        return {}
    rows = lookups.read_keys(state_path(spec, view), version, key, masters, [*key, SINCE])
    return {} if rows is None else {tuple(r[c] for c in key): int(r[SINCE]) for r in rows.to_pylist()}


READERS: dict[ViewKind, Callable[..., Reading]] = {
    ViewKind.FK_JOIN: _fk_join,
    ViewKind.LIST_JOIN: _list_join,
    ViewKind.ENRICH: _enrich,
    ViewKind.REKEY: _rekey,
}
