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
from lakejoin.errors import BatchStateError, SourceError
from lakejoin.spec.layout import state_path
from lakejoin.spec.model import Duplicates, EnrichMode, JoinHow, Key, PipelineSpec, Source, View, ViewKind
from lakejoin.views.context import STATE
from lakejoin.views.rekey import SINCE, Resolution, resolution

Feed = tuple[Source, Role, Key, list[tuple[Any, ...]]]  # an input's keys whose changes lead to the row
HISTORY_WINDOW = 8  # commits in the first window of a key's history, read newest first (key_history)


@dataclass(frozen=True)
class Ask:
    """One key of a view to explain at a batch's pins: `absent` when the view has no row for
    it, `history` the output's change rows of the key (None: they could not be read), `notes`
    what the answer adds of what could not be read."""

    spec: PipelineSpec
    view: View
    values: tuple[Any, ...]
    batch: BatchInfo
    absent: bool
    notes: list[str]
    history: list[dict[str, Any]] | None


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
    ask: Ask, source: Source, role: Role, value: tuple[Any, ...], *, how: JoinHow | None = None
) -> InputRow:
    """The row of `source` keyed by `value` at the batch's pin; for an absent key, a missing
    row's delete is looked for in the source's change feed."""
    version = pin(ask.batch, source)
    if None in value:
        return InputRow(role, source.name, version, None, None, how=how)
    rows = read_rows(source.path, version, source.key, [value], f"source '{source.name}'")
    gone = _deleted_at(source, value, version, ask.notes) if ask.absent and not rows else None
    key = dict(zip(source.key, value, strict=True))
    return InputRow(role, source.name, version, key, rows[0] if rows else None, how=how, deleted_at=gone)


def key_history(path: str, version: int, key: Key, values: tuple[Any, ...]) -> list[dict[str, Any]]:
    """The change rows of one key of the table at `path`, read backwards from `version` in
    windows of commits that grow fourfold, down to the newest window that holds any (empty: the
    key was never written). A key changed recently costs a read of the last few commits, not of
    the whole feed, and versions VACUUM removed are reached only for a key untouched since."""
    window, last = HISTORY_WINDOW, version
    while True:
        first = max(0, last - window + 1)
        rows = lookups.read_key_changes(path, first, last, key, [values])
        if rows or first == 0:
            return rows
        window, last = window * 4, first - 1


def _deleted_at(source: Source, value: tuple[Any, ...], version: int, notes: list[str]) -> int | None:
    """The version of `source` up to `version` that deleted the row of `value`, from its change
    feed read backwards (None: it was never deleted, or the feed cannot be read, which `notes`
    says: not knowing since when is no error)."""
    try:
        return deleted_at(key_history(source.path, version, source.key, value))
    except Exception as exc:  # noqa: BLE001 - delta-rs: change files vacuumed, a log cleaned up
        notes.append(f"when {source.name} lost the row {value!r} is not known: its change feed ({exc})")
        return None


def _driving(ask: Ask, source: Source, role: Role) -> tuple[list[InputRow], list[Feed]]:
    """The row a joining kind starts from (the left row, the fact) and the feed of its key."""
    return [_looked_up(ask, source, role, ask.values)], [(source, role, source.key, [ask.values])]


def _fk_join(ask: Ask) -> Reading:
    join = ask.view.fk_join
    left, right = ask.spec.sources[join.left], ask.spec.sources[join.right]
    inputs, feeds = _driving(ask, left, Role.LEFT)
    if inputs[0].row is not None:
        fk = tuple(inputs[0].row[c] for c in join.fk)
        inputs.append(_looked_up(ask, right, Role.RIGHT, fk, how=join.how))
        feeds.append((right, Role.RIGHT, right.key, [fk]))
    return Reading(inputs, feeds, why_not_joined(inputs) if ask.absent else None)


def _list_join(ask: Ask) -> Reading:
    join = ask.view.list_join
    left, right = ask.spec.sources[join.left], ask.spec.sources[join.right]
    inputs, feeds = _driving(ask, left, Role.LEFT)
    if inputs[0].row is not None:
        elements = list_elements(inputs[0].row[join.list], right.key, drop=join.duplicates is Duplicates.DROP)
        wanted = list(dict.fromkeys(e for e in elements if e is not None and None not in e))
        version = pin(ask.batch, right)
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
    return Reading(inputs, feeds, why_not_joined(inputs) if ask.absent else None)


def _enrich(ask: Ask) -> Reading:
    """The fact and each dimension's row. In lookup mode a dimension's change reaches no
    enriched row (only a fact's change re-enriches it), so only the fact's feed is read."""
    enrich = ask.view.enrich
    fact = ask.spec.sources[enrich.fact]
    lookup = enrich.mode is EnrichMode.LOOKUP
    inputs, feeds = _driving(ask, fact, Role.FACT)
    if inputs[0].row is not None:
        for d in enrich.dimensions:
            table, fk = ask.spec.sources[d.table], tuple(inputs[0].row[c] for c in d.fk)
            inputs.append(_looked_up(ask, table, Role.DIMENSION, fk, how=d.how))
            if not lookup:
                feeds.append((table, Role.DIMENSION, table.key, [fk]))
    return Reading(inputs, feeds, why_not_joined(inputs, lookup=lookup) if ask.absent else None)


def _rekey(ask: Ask) -> Reading:
    """The master rows holding the derived key at the pin and the rule that kept one (or all);
    for a key not in the view, the masters that held it (from the output's history of the key,
    whose rows name their master)."""
    rekey = ask.view.rekey
    master = ask.spec.sources[rekey.source]
    v, k = rekey.key, master.key
    derived, version = ask.values[: len(v)], pin(ask.batch, master)
    claims = _claims(ask, derived)
    if claims is None:  # no index to read: the master itself, by a column its files are not sorted by
        rows = read_rows(master.path, version, v, [derived], f"source '{master.name}'")
        claims = {tuple(r[c] for c in k): None for r in rows}
    else:
        masters = list(claims)
        rows = read_rows(master.path, version, k, masters, f"source '{master.name}'") if masters else []
        rows = [r for r in rows if tuple(r[c] for c in v) == derived]  # else the index drifted
    if not rekey.unique:
        rows = [r for r in rows if tuple(r[c] for c in k) == ask.values[len(v) :]]
    holders = [InputRow(Role.MASTER, master.name, version, {c: r[c] for c in k}, r) for r in rows]
    # A batch's changes by the derived key: the masters that came to hold it and those that left
    # (`unique: false`: a row is its own master's alone, so by the master key as well).
    feeds: list[Feed] = [(master, Role.MASTER, v, [derived])]
    if not rekey.unique:
        feeds = [(master, Role.MASTER, (*v, *k), [ask.values])]
    if ask.absent:
        former = _former_masters(ask, k) if rekey.unique else [ask.values[len(v) :]]
        claimants = holders or [_looked_up(ask, master, Role.MASTER, m) for m in former]
        return Reading(claimants, feeds, why_not_derived(v, claimants, claimed=bool(holders)))
    rule = resolution(rekey.unique, rekey.on_conflict)
    found = [(h.key or {}, claims.get(tuple((h.key or {}).values()))) for h in holders]
    chosen, text = rekey_choice(rule, found)
    return Reading(
        holders, feeds, choice=Choice(rule, chosen, found if rule is Resolution.LATEST else [], text)
    )


def _claims(ask: Ask, derived: tuple[Any, ...]) -> dict[tuple[Any, ...], int | None] | None:
    """The master keys claiming `derived` and each one's commit version of its last change of
    content, from the rekey's index at the batch's pin: a Delta table clustered by the derived
    key, so the lookup reads the few files that hold it. None when there is no index at the pin
    or delta-rs cannot read it."""
    version = ask.batch.pinned_versions.get(STATE, -1)
    path = state_path(ask.spec, ask.view)
    k = ask.spec.sources[ask.view.rekey.source].key
    if version < 0 or not lookups.literal_keys([derived]):
        return None
    try:
        rows = lookups.read_keys(path, version, ask.view.rekey.key, [derived], [*k, SINCE])
    except Exception as exc:  # noqa: BLE001 - delta-rs: a version vacuumed, a log cleaned up
        ask.notes.append(f"the rekey index {path} cannot be read at version {version} ({exc})")
        return None
    if rows is None:
        return None
    return {tuple(r[c] for c in k): int(r[SINCE]) for r in rows.to_pylist()}


def _former_masters(ask: Ask, k: Key) -> list[tuple[Any, ...]]:
    """The masters whose rows the output held under the explained derived key, newest first,
    from the output's history of the key (its rows carry the master key)."""
    if ask.history is None:
        return []
    rows = [r for r in reversed(ask.history) if all(c in r for c in k)]
    return list(dict.fromkeys(tuple(r[c] for c in k) for r in rows))


READERS: dict[ViewKind, Callable[..., Reading]] = {
    ViewKind.FK_JOIN: _fk_join,
    ViewKind.LIST_JOIN: _list_join,
    ViewKind.ENRICH: _enrich,
    ViewKind.REKEY: _rekey,
}
