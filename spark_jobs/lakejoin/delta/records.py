"""What a batch is, as people and the engine talk about it: its mode, its status, its record."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime

from lakejoin.delta.identity import TableIdentity


class BatchStatus(enum.Enum):
    COMMITTED = "committed"  # its output commit landed: the batch happened
    ABANDONED = "abandoned"  # it stopped before its output commit (failed checks, a key conflict)
    # It read its changes and found no change of content (rows written back as they were): no
    # output commit; the next batch reads on from its pins (engine/plan.read_from).
    UNCHANGED = "unchanged"


class BatchMode(enum.Enum):
    INCREMENTAL = "incremental"
    FULL_REFRESH = "full_refresh"
    REPAIR = "repair"  # re-derives the keys a past range touched, at the last committed pins


@dataclass(frozen=True)
class BatchRecord:
    """One batch of one view: the input versions it read (`start_versions`, exclusive) up to the
    versions it pinned, and, once it ran, its counts, notes and the output version it committed
    (`output_version`, -1 when it committed nothing), and the fingerprint of the view's
    definition it ran under (None for batches written before lakejoin recorded it)."""

    view: str
    batch_id: int
    status: BatchStatus
    mode: BatchMode
    start_versions: dict[str, int]
    pinned_versions: dict[str, int]
    recorded_at: datetime | None = None
    metrics: dict[str, int] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    output_version: int = -1
    # The fingerprint of the view's definition the batch ran under (spec/definition.fingerprint;
    # the batch commit keeps the definition whole).
    definition: str | None = None
    # Which table each pin is of (delta/identity.py); empty for batches logged before session 55.
    identities: dict[str, TableIdentity] = field(default_factory=dict)
    # The strategy that wrote the output (sink/strategy.Strategy's value); None for a batch that
    # wrote none, and for batches logged before issue 53.
    write: str | None = None


def last_of(records: list[BatchRecord], status: BatchStatus | None = None) -> BatchRecord | None:
    """The newest of a view's records (of those with `status`, when given)."""
    chosen = [r for r in records if status is None or r.status is status]
    return chosen[-1] if chosen else None
