"""Which path a batch's keyed write takes (choice.py writes it): a pure rule over the batch's
key count and a few facts of the table and the session, asked lazily and in a fixed order, so a
fact no branch needs is never looked up (a delta-rs read of the table's log, a Spark conf)."""

from __future__ import annotations

from enum import Enum
from typing import Protocol

# Above this many keys a batch takes one MERGE: its rows are too many to broadcast from a
# driver with Spark's default memory, and a shuffle of the table is then the cheaper join anyway.
SPLIT_MERGE_MAX_KEYS = 500_000


class WritePath(Enum):
    """How a batch is written (see choice.merge_by_key)."""

    DRIVER_MERGE = "the driver's MERGE (delta-rs)"
    DELETE_CHANGED = "delete the changed keys, append their rows"
    FEW_KEYS_MERGE = "one Spark MERGE of few keys, listed in its condition where they can be"
    ONE_MERGE = "one Spark MERGE"
    SPLIT = "the split write: a MERGE of the held keys, an append of the new"
    NO_COMMIT = "nothing: a state table with no key to change"


class WriteFacts(Protocol):
    """What the rule asks of the table and the session, each only when a branch needs it."""

    def one_merge_max_keys(self) -> int: ...

    def driver_max_keys(self) -> int: ...

    def driver_enabled(self) -> bool: ...

    def driver_writable(self) -> bool:
        """Whether delta-rs may MERGE the batch into the table."""
        ...

    def delete_changed_suits(self) -> bool:
        """Whether delete_changed.py's write suits the batch and the table."""
        ...


def choose_write(keys: int, *, full: bool, state: bool, facts: WriteFacts) -> WritePath:
    """The path of a write of `keys` keys: of a full refresh's differences (`full`), into a
    state table (`state`, whose write is one commit) or into an output.

    The driver's MERGE takes an incremental batch of at most its maximum keys, when on and the
    table is one delta-rs writes; delete-changed an output's batch of more keys than one MERGE
    takes, when it suits; then `merge_or_split`."""
    small = not full and 0 < keys <= facts.one_merge_max_keys()
    few = not full and 0 < keys <= facts.driver_max_keys()
    if few and facts.driver_enabled() and facts.driver_writable():
        return WritePath.DRIVER_MERGE
    if not state and not full and not small and facts.delete_changed_suits():
        return WritePath.DELETE_CHANGED
    return merge_or_split(keys, small=small, state=state)


def merge_or_split(keys: int, *, small: bool, state: bool) -> WritePath:
    """The path of a write neither the driver's MERGE nor delete-changed takes (also the one a
    delete-changed write that declined falls back to, `small` and `state` false).

    A state table is written by one MERGE whatever its size: a kept state costs at most one
    commit a batch (issue 23), and it is the only state lakejoin keeps (rekey's index, one row
    per master), a table smaller than the outputs the split write is for; with no key, by none."""
    if state and keys == 0:
        return WritePath.NO_COMMIT
    if small:
        return WritePath.FEW_KEYS_MERGE
    if keys > SPLIT_MERGE_MAX_KEYS or state:
        return WritePath.ONE_MERGE
    return WritePath.SPLIT
