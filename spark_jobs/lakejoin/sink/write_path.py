"""Which path a batch's keyed write takes when the one-commit upsert (key_upsert.py) does not
write it (choice.py writes it): a pure rule over the batch's key count and a few facts of the
table and the session, asked lazily and in a fixed order, so a fact no branch needs is never
looked up (a delta-rs read of the table's log, a Spark conf)."""

from __future__ import annotations

from enum import Enum
from typing import Protocol


class WritePath(Enum):
    """How a batch is written (see choice.merge_by_key)."""

    DRIVER_MERGE = "the driver's MERGE (delta-rs)"
    FEW_KEYS_MERGE = "one Spark MERGE of few keys, listed in its condition where they can be"
    ONE_MERGE = "one Spark MERGE"
    NO_COMMIT = "nothing: a state table with no key to change"


class WriteFacts(Protocol):
    """What the rule asks of the table and the session, each only when a branch needs it."""

    def one_merge_max_keys(self) -> int: ...

    def driver_max_keys(self) -> int: ...

    def driver_enabled(self) -> bool: ...

    def driver_writable(self) -> bool:
        """Whether delta-rs may MERGE the batch into the table."""
        ...


def choose_write(keys: int, *, full: bool, state: bool, facts: WriteFacts) -> WritePath:
    """The path of a write of `keys` keys: of a full refresh's differences (`full`), into a
    state table (`state`) or into an output. Every path is one commit.

    A state table with no key to change takes no commit (a kept state costs at most one commit
    a batch, issue 23). The driver's MERGE takes a batch of at most its maximum keys (an
    incremental batch's, the differences a full write found, or none: an output's batch commit
    alone), when on and the table is one delta-rs writes; Spark's MERGE takes the rest, with
    the keys listed in its condition when they are few and the write is incremental."""
    if state and keys == 0:
        return WritePath.NO_COMMIT
    small = not full and 0 < keys <= facts.one_merge_max_keys()
    # An output's batch of no key still commits (its txn and pins): delta-rs's empty commit.
    few = 0 <= keys <= facts.driver_max_keys()
    if few and facts.driver_enabled() and facts.driver_writable():
        return WritePath.DRIVER_MERGE
    return WritePath.FEW_KEYS_MERGE if small else WritePath.ONE_MERGE
