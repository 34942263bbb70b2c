"""What `lakejoin explain` answers: the explained row, the batch that wrote it, the input rows
that made it, the changes that reached it or the reason it is not there, and its stable JSON
document (`--json`). cli/explain_rules.py decides; cli/explain.py reads.

>>> print(InputRow(Role.RIGHT, "merchants", 4, {"merchant_id": "m9"}, None, deleted_at=3).missing())
no row with merchant_id='m9' at version 4, deleted at version 3
"""

from __future__ import annotations

import base64
import datetime
import decimal
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lakejoin.spec.model import JoinHow, shown
from lakejoin.views.rekey import Resolution

FORMAT = 1  # the JSON document's version: a field keeps its meaning within one version


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


@dataclass(frozen=True)
class ChangeRows:
    """An input's change-feed rows in (start, pinned] of a batch, for the keys that lead to the
    explained row; `note` says why they could not be read."""

    source: str
    role: Role
    first: int
    last: int
    rows: list[dict[str, Any]]
    note: str = ""


@dataclass(frozen=True)
class Explanation:
    pipeline: str
    view: str
    kind: str
    key: dict[str, Any]
    output_path: str
    output_version: int
    row: dict[str, Any] | None
    history_read: bool  # the output's change feed of the key could be read (else `notes` say why)
    last_change: BatchInfo | None  # the batch that last inserted, updated or deleted the key
    read_at: BatchInfo  # the batch at whose pins the inputs were read
    inputs: list[InputRow]
    choice: Choice | None
    changes: list[ChangeRows]  # the change rows of batch `changes_of` that reached the key
    changes_of: int | None
    reason: Reason | None
    notes: list[str]

    def document(self) -> dict[str, Any]:
        """The stable JSON document of `lakejoin explain --json`."""
        return {
            "format": FORMAT,
            "pipeline": self.pipeline,
            "view": self.view,
            "kind": self.kind,
            "key": jsonable(self.key),
            "output": {"path": self.output_path, "version": self.output_version},
            "in_view": self.row is not None,
            "row": jsonable(self.row),
            "history_read": self.history_read,
            "last_change": _batch(self.last_change),
            "read_at": _batch(self.read_at),
            "inputs": [_input(i) for i in self.inputs],
            "rule": None if self.choice is None else _choice(self.choice),
            "changes_of_batch": self.changes_of,
            "changes": [
                {
                    "source": c.source,
                    "role": c.role.value,
                    "first_version": c.first,
                    "last_version": c.last,
                    "rows": jsonable(c.rows),
                    "note": c.note or None,
                }
                for c in self.changes
            ],
            "reason": None
            if self.reason is None
            else {"code": self.reason.code.value, "text": self.reason.text},
            "notes": self.notes,
        }


def _batch(batch: BatchInfo | None) -> dict[str, Any] | None:
    if batch is None:
        return None
    return {
        "batch_id": batch.batch_id,
        "mode": batch.mode,
        "output_version": batch.output_version,
        "committed_at": batch.committed_at,
        "change": batch.change,
        "start_versions": batch.start_versions,
        "pinned_versions": batch.pinned_versions,
        "repair_ends": batch.repair_ends,
        "notes": batch.notes,
    }


def _input(row: InputRow) -> dict[str, Any]:
    return {
        "role": row.role.value,
        "source": row.source,
        "version": row.version,
        "how": row.how.value if row.how else None,
        "position": row.position,
        "key": jsonable(row.key),
        "row": jsonable(row.row),
        "deleted_at": row.deleted_at,
    }


def _choice(choice: Choice) -> dict[str, Any]:
    return {
        "resolution": choice.resolution.value,
        "chosen": jsonable(choice.chosen),
        "last_changes": [{"key": jsonable(k), "version": v} for k, v in choice.last_changes],
        "text": choice.text,
    }


def jsonable(value: Any) -> Any:
    """`value` with what JSON has no type for as text: dates and times in ISO 8601, decimals
    exactly, bytes in base64."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


def shown_range(feed: ChangeRows) -> str:
    """`3..5`, or `-` for an input the batch read no new version of."""
    return f"{feed.first}..{feed.last}" if feed.first <= feed.last else "-"


def changes_title(found: Explanation) -> str:
    """The heading of the changes that reached the key, naming the batch they are from."""
    if found.changes_of is None:
        return "changes that reached it"
    return f"changes of batch {found.changes_of} that reached it"


def shown_key(key: Mapping[str, Any]) -> str:
    """`product_id='p1'`, `(tenant, id)=('acme', 7)`."""
    if len(key) == 1:
        ((column, value),) = key.items()
        return f"{column}={value!r}"
    return f"{shown(tuple(key))}=({', '.join(repr(v) for v in key.values())})"
