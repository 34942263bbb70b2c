"""The rules `lakejoin explain` answers by, as pure functions of the rows cli/explain.py read
(truth tables in tests/unit/test_explain_rules.py): a key's values from the command line, a
list_join's elements, what a commit did to a key, and why a key is not in a view.

>>> key_values("orders", ("order_id", "day"), {"order_id": "long", "day": "date"}, ["7", "2026-11-02"])
(7, datetime.date(2026, 11, 2))
>>> why_not_joined([InputRow(Role.LEFT, "products", 4, {"product_id": "p9"}, None, deleted_at=3)]).code
<Absence.NO_LEFT_ROW: 'no_left_row'>
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from lakejoin.cli.explain_model import Absence, InputRow, Reason, Role, shown_key
from lakejoin.errors import BatchStateError, CommandError
from lakejoin.spec.model import JoinHow, Key, shown
from lakejoin.views.rekey import Resolution

INTEGERS = {"byte", "short", "integer", "long"}
_MISSING = {
    Role.LEFT: Absence.NO_LEFT_ROW,
    Role.FACT: Absence.NO_FACT_ROW,
    Role.MASTER: Absence.NO_MASTER_ROW,
}


def key_values(view: str, key: Key, types: Mapping[str, str], texts: Sequence[str]) -> tuple[Any, ...]:
    """The values of `texts` for the columns of the view's `key`, each converted to its
    column's type (`types`, as the output's Delta schema names them)."""
    usage = f"lakejoin explain SPEC {view} " + " ".join(f"<{c}>" for c in key)
    if len(texts) != len(key):
        raise CommandError(
            f"view '{view}' is keyed by {shown(key)}: {len(key)} value(s) expected, one per key "
            f"column in that order; got {len(texts)}: {' '.join(repr(t) for t in texts)}",
            where="lakejoin explain",
            fix=f"give one value per key column: {usage}",
        )
    absent = [c for c in key if c not in types]
    if absent:
        raise BatchStateError(
            f"the output of view '{view}' has no column {shown(tuple(absent))} of the key {shown(key)} "
            "the spec gives it: the view's definition changed since that output version was written",
            where=f"view '{view}' output",
            fix=f"run the view (a changed key rebuilds it), or explain an output version written "
            f"under today's key: {usage} --at VERSION",
        )
    return tuple(_converted(view, c, types[c], t, usage) for c, t in zip(key, texts, strict=True))


def _converted(view: str, column: str, kind: str, text: str, usage: str) -> Any:
    where = f"lakejoin explain, view '{view}', key column '{column}' ({kind})"
    try:
        if kind in INTEGERS:
            return int(text)
        if kind == "date":
            return datetime.date.fromisoformat(text)
    except ValueError:
        wanted = "a whole number" if kind in INTEGERS else "a date as YYYY-MM-DD"
        raise CommandError(
            f"{text!r} is not of type {kind}", where=where, fix=f"give {wanted} for {column}: {usage}"
        ) from None
    if kind == "string":
        return text
    raise CommandError(
        f"explain looks keys up by whole numbers, strings and dates; '{column}' is a {kind}",
        where=where,
        fix="read the row with Spark or delta-rs (DeltaTable(path).to_pyarrow_table(filters=...))",
    )


def list_elements(listed: Sequence[Any] | None, key: Key, *, drop: bool) -> list[tuple[Any, ...] | None]:
    """A list_join list's element keys in list order (None: a null element), each as a tuple of
    the right key's columns (an element is the key's value, or a struct of its columns by
    name); `drop`: only each key's first occurrence, as `duplicates: drop` keeps."""
    keys: list[tuple[Any, ...] | None] = []
    for element in listed or []:
        if element is None:
            keys.append(None)
        else:
            keys.append(tuple(element[c] for c in key) if isinstance(element, Mapping) else (element,))
    return list(dict.fromkeys(keys)) if drop else keys


def change_of(kinds: Sequence[str]) -> str:
    """What one commit did to a key, from the `_change_type`s of its change rows for it: an
    overwrite deletes and inserts the key in one commit, which is an update of it."""
    if "update_postimage" in kinds or ("insert" in kinds and "delete" in kinds):
        return "update"
    return "insert" if "insert" in kinds else "delete"


def deleted_at(changes: Sequence[Mapping[str, Any]]) -> int | None:
    """The commit version that deleted a key, from its change rows in commit order (None: its
    last change was none)."""
    if (
        changes
        and change_of(
            [c["_change_type"] for c in changes if c["_commit_version"] == changes[-1]["_commit_version"]]
        )
        == "delete"
    ):
        return int(changes[-1]["_commit_version"])
    return None


def why_not_joined(inputs: Sequence[InputRow], *, lookup: bool = False) -> Reason:
    """Why an fk_join, list_join or enrich has no row for a key, from its input rows at the
    pins (the driving row first, then the right rows or dimensions): no driving row; else the
    first inner join whose fk holds a null or finds no row; else the output is not what the
    inputs derive (`lookup`: an enrich that does not re-enrich a fact when a dimension
    changes)."""
    driving = inputs[0]
    if driving.row is None:
        return Reason(
            _MISSING[driving.role], f"no {driving.role.value} row: {driving.source} has {driving.missing()}"
        )
    for other in inputs[1:]:
        if other.how is not JoinHow.INNER or other.row is not None:
            continue
        code = Absence.NULL_FK if other.key is None else Absence.NO_RIGHT_ROW
        return Reason(code, f"{other.source} joins inner and {other.missing()}")
    if lookup:
        return Reason(
            Absence.NOT_REENRICHED,
            "enrich lookup: the fact is enriched by the batch that processes it, and that batch's "
            "inner dimensions left it out; dimension changes do not re-enrich it (a change of the "
            "fact does, or --full-refresh)",
        )
    return _drift()


def why_not_derived(derived: Key, claimants: Sequence[InputRow], *, claimed: bool) -> Reason:
    """Why a rekey has no row for a derived key, from the masters that held it (`claimants`, at
    the pin: the master of the key, or those whose change feed shows the derived key);
    `claimed`: a master holds it at the pin."""
    if claimed:
        return _drift()
    nulls = [m for m in claimants if m.row is not None and any(m.row[c] is None for c in derived)]
    if nulls:
        masters = ", ".join(shown_key(m.key or {}) for m in nulls)
        return Reason(
            Absence.NULL_DERIVED_KEY,
            f"master {masters} held it; at version {nulls[0].version} its {shown(derived)} is null, and "
            "a master row with a null derived key is dropped",
        )
    held = "; ".join(f"{shown_key(m.key or {})} {_now(m, derived)}" for m in claimants)
    return Reason(Absence.NO_MASTER_ROW, "no master row holds it" + (f" ({held})" if held else ""))


def _now(master: InputRow, derived: Key) -> str:
    """What became of a master that held a derived key."""
    if master.row is not None:
        return f"now holds {shown_key({c: master.row[c] for c in derived})}"
    gone = f" (deleted at version {master.deleted_at})" if master.deleted_at is not None else ""
    return f"has no row at version {master.version}{gone}"


def _drift() -> Reason:
    return Reason(
        Absence.DRIFT,
        "the inputs at these pins give this key a row, but the output has none: the output is not "
        "what its inputs derive; rebuild it with --full-refresh",
    )


def rekey_choice(
    resolution: Resolution, claims: Sequence[tuple[dict[str, Any], int | None]]
) -> tuple[list[dict[str, Any]], str]:
    """The master key(s) a rekey keeps for one derived key among its `claims` (each master's key
    and the commit version of its last change of content, None: not known), and why. (Under
    `on_conflict: fail` a committed batch's pins never hold two claims: the batch would have
    stopped.)"""
    if resolution is Resolution.EVERY_CLAIM:
        return [k for k, _ in claims], "unique: false keeps a row for every master holding the derived key"
    if not claims:
        return [], "no master holds the derived key at these pins: the output is not what its inputs derive"
    if len(claims) == 1:
        return [claims[0][0]], f"the only master holding the derived key (on_conflict: {resolution.value})"
    known = [(v, tuple(k.values()), k) for k, v in claims if v is not None]
    if len(known) < len(claims):
        return [], "on_conflict: latest, but the versions of the masters' last changes could not be read"
    version, _, chosen = max(known, key=lambda c: (c[0], c[1]))
    others = ", ".join(
        f"{shown_key(k)} at version {v}" for v, _, k in sorted(known, key=lambda c: c[0]) if k != chosen
    )
    return [chosen], (
        f"on_conflict: latest: {shown_key(chosen)} changed last (version {version}; on a tie the greatest "
        f"master key), over {others}"
    )
