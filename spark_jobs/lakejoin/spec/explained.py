"""What `lakejoin explain` answers, as data, and the rules it answers by: the input rows behind
one key of a view at a batch's pins, why a key is not in a view, and which master a rekey kept.
A view kind reads the rows (its `explain`, views/<kind>.py, with views/explained.py's shared
reads); the command line renders them (cli/explain_text.py, cli/explain_html.py) and adds the
changes that reached the key (cli/explain.py). Pure data and pure functions: no table, no JVM
(truth tables in tests/unit/test_explain_rules.py).

>>> print(InputRow(Role.RIGHT, "merchants", 4, {"merchant_id": "m9"}, None, deleted_at=3).missing())
no row with merchant_id='m9' at version 4, deleted at version 3
>>> why_not_joined([InputRow(Role.LEFT, "products", 4, {"product_id": "p9"}, None, deleted_at=3)]).code
<Absence.NO_LEFT_ROW: 'no_left_row'>
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lakejoin.spec.model import JoinHow, Key, PipelineSpec, Resolution, Source, View, shown


class Role(enum.Enum):
    """The part an input row plays in the explained row."""

    LEFT = "left"
    RIGHT = "right"
    ELEMENT = "element"  # one element of a list_join's list, joined on its own
    FACT = "fact"
    DIMENSION = "dimension"
    MASTER = "master"


class Absence(enum.Enum):
    """Why a key is not in the view, at the pins of the view's last batch."""

    NO_LEFT_ROW = "no_left_row"
    NO_FACT_ROW = "no_fact_row"
    NO_MASTER_ROW = "no_master_row"  # no master row holds the derived key
    NULL_FK = "null_fk"  # an inner join's fk holds a null: it matches nothing
    NO_RIGHT_ROW = "no_right_row"  # an inner join (or inner dimension) finds no row for the fk
    NULL_DERIVED_KEY = "null_derived_key"  # the master that held it now has a null derived key
    # enrich lookup: the fact was enriched by the batch that processed it, whose dimensions
    # left it out; later dimension changes do not re-enrich it.
    NOT_REENRICHED = "not_reenriched"
    DRIFT = "drift"  # the inputs give the key a row: the output is not what they derive


@dataclass(frozen=True)
class InputRow:
    """One input row read at a batch's pins: `key` is the key looked up (None: the fk holds a
    null, so nothing was looked up), `row` what the input held then (None: no row)."""

    role: Role
    source: str
    version: int
    key: dict[str, Any] | None
    row: dict[str, Any] | None
    how: JoinHow | None = None  # a right side's or a dimension's join
    position: int | None = None  # an element's place in its list
    deleted_at: int | None = None  # the input version that deleted the missing row, when known

    @property
    def where(self) -> str:
        return f"{self.source}@{self.version}"

    def missing(self) -> str:
        """Why there is no row, in words."""
        if self.key is None:
            return "the key it is looked up by holds a null: it matches nothing"
        gone = f", deleted at version {self.deleted_at}" if self.deleted_at is not None else ""
        return f"no row with {shown_key(self.key)} at version {self.version}{gone}"


@dataclass(frozen=True)
class Reason:
    code: Absence
    text: str


@dataclass(frozen=True)
class Choice:
    """How a rekey picked the master of a derived key: its resolution, the master key(s) kept,
    and each claiming master's last change of content (None: not known)."""

    resolution: Resolution
    chosen: list[dict[str, Any]]
    last_changes: list[tuple[dict[str, Any], int | None]]
    text: str


@dataclass(frozen=True)
class BatchInfo:
    """A batch as its output commit records it (`batch_id` None: a commit lakejoin did not
    mark), with the notes its batch log row adds; `change` what that commit did to the key."""

    batch_id: int | None
    mode: str | None
    output_version: int
    committed_at: str | None
    start_versions: dict[str, int]
    pinned_versions: dict[str, int]
    notes: dict[str, str] = field(default_factory=dict)
    change: str | None = None  # insert, update, delete
    repair_ends: dict[str, int] = field(default_factory=dict)  # a repair's range ends (markers.py)
    # Which table each pin is of, as (table id, pinned commit): delta/identity.py's TableIdentity.
    identities: dict[str, tuple[str, str]] = field(default_factory=dict)


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


Feed = tuple[Source, Role, Key, list[tuple[Any, ...]]]  # an input's keys whose changes lead to the row


@dataclass(frozen=True)
class Reading:
    """What a view kind's inputs say of one key at a batch's pins."""

    inputs: list[InputRow]
    feeds: list[Feed]
    reason: Reason | None = None
    choice: Choice | None = None


_MISSING = {
    Role.LEFT: Absence.NO_LEFT_ROW,
    Role.FACT: Absence.NO_FACT_ROW,
    Role.MASTER: Absence.NO_MASTER_ROW,
}


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


def shown_key(key: Mapping[str, Any]) -> str:
    """`product_id='p1'`, `(tenant, id)=('acme', 7)`."""
    if len(key) == 1:
        ((column, value),) = key.items()
        return f"{column}={value!r}"
    return f"{shown(tuple(key))}=({', '.join(repr(v) for v in key.values())})"
