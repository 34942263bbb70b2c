"""What `lakejoin explain` answers: the explained row, the batch that wrote it, the input rows
that made it (spec/explained.py), the changes that reached it or the reason it is not there, and
its stable JSON document (`--json`). cli/explain.py reads; the view kinds read their inputs
(views/<kind>.py `explain`).

>>> jsonable({"day": datetime.date(2026, 11, 2), "price": decimal.Decimal("1.50"), "at": (b"ok",)})
{'day': '2026-11-02', 'price': '1.50', 'at': ['b2s=']}
"""

from __future__ import annotations

import base64
import datetime
import decimal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakejoin.spec.explained import BatchInfo, Choice, InputRow, Reason, Role

FORMAT = 1  # the JSON document's version: a field keeps its meaning within one version


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
