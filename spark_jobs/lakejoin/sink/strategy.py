"""Which write takes a batch's keyed rows when the one-commit upsert (key_upsert.py) does not
write them (choice.merge_by_key writes them): a pure rule over `SinkFacts`, the batch's key
count and a few facts of the session and of the table. Each fact is asked only when a branch
needs it, and in a fixed order, cheap to dear: what the batch knows, the session's settings (a
Spark conf read), the table's log (a delta-rs read); so a fact no branch needs is never looked
up (sink/facts.py gathers them)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol


class Strategy(Enum):
    """How a batch's keyed rows are written; each is one commit, or none."""

    DRIVER_MERGE = "driver_merge"  # delta-rs's MERGE from the driver, no Spark job (driver_merge.py)
    SPARK_MERGE = "spark_merge"  # Delta's public MERGE, the keys listed when few (spark_merge.py)
    NO_COMMIT = "no_commit"  # a state table with no key to change


class Target(Enum):
    """The table a batch writes: a view's output (whose commit is the batch commit) or one of
    the state tables the view keeps."""

    OUTPUT = "output"
    STATE = "state"


class Settings(Protocol):
    """The session's write settings (Spark conf, no job)."""

    @property
    def listed_max_keys(self) -> int:
        """Up to how many keys a Spark MERGE lists in its condition."""
        ...

    @property
    def driver(self) -> bool:
        """Whether the driver's MERGE may write a batch."""
        ...

    @property
    def driver_max_keys(self) -> int:
        """Up to how many keys a batch is written by the driver's MERGE."""
        ...

    @property
    def driver_max_rows(self) -> int:
        """Up to how many rows a table the driver's MERGE writes holds."""
        ...

    @property
    def key_ranges(self) -> bool:
        """Whether tables are laid out by key and written by key (delta/key_ranges.py)."""
        ...


class TableLog(Protocol):
    """The table's facts the rule asks of its Delta log (delta-rs, no JVM)."""

    @property
    def driver_writes(self) -> bool:
        """Whether delta-rs may MERGE the batch's columns into the table (its protocol and
        schema, driver_merge.py)."""
        ...

    @property
    def rows(self) -> int:
        """How many rows the table's data files hold."""
        ...


@dataclass(frozen=True)
class SinkFacts:
    """What the choice of a batch's write knows: the table written (`target`), whether the
    batch writes a full refresh's differences (`full`), its key count (`keys`), the session's
    `settings` and the `table`'s log; and whether the driver's MERGE already failed on this
    batch (`driver_failed`: delta-rs failed before its commit, so nothing was written)."""

    target: Target
    full: bool
    keys: int
    settings: Settings
    table: TableLog
    driver_failed: bool = False


def choose(f: SinkFacts) -> Strategy:
    """The write of a batch. A state table with no key to change takes no commit (a kept state
    costs at most one commit a batch, issue 23). The driver's MERGE takes a batch of at most its
    maximum keys (an incremental batch's, the differences a full write found, or none: an
    output's batch commit alone), when on and the table is one delta-rs writes; Spark's MERGE
    takes the rest.

    >>> choose(SinkFacts(Target.STATE, full=False, keys=0, settings=..., table=...))  # doctest: +SKIP
    <Strategy.NO_COMMIT: 'no_commit'>
    """
    if f.target is Target.STATE and f.keys == 0:
        return Strategy.NO_COMMIT
    # An output's batch of no key still commits (its txn and pins): delta-rs's empty commit.
    if f.keys <= f.settings.driver_max_keys and not f.driver_failed and _driver_usable(f.settings, f.table):
        return Strategy.DRIVER_MERGE
    return Strategy.SPARK_MERGE


def lists_keys(f: SinkFacts) -> bool:
    """Whether a Spark MERGE lists the batch's keys in its condition, so Delta reads only the
    files that hold them: an incremental batch of a few keys, with key ranges on."""
    return not f.full and 0 < f.keys <= f.settings.listed_max_keys and f.settings.key_ranges


def driver_sized(settings: Settings, table: TableLog) -> bool:
    """Whether a full write's differences are left to `choose` (whose driver's MERGE writes them
    when they are few), not to the one-commit upsert: the driver's MERGE is on and the table is
    one delta-rs writes holding at most the driver's maximum keys (so its differences are about
    that many at most)."""
    return _driver_usable(settings, table, sized_by_keys=True)


def _driver_usable(settings: Settings, table: TableLog, *, sized_by_keys: bool = False) -> bool:
    """Whether the driver's MERGE is on and may write into the table, which holds at most the
    driver's maximum rows (its maximum keys, `sized_by_keys`)."""
    if not settings.driver:
        return False
    most_rows = settings.driver_max_keys if sized_by_keys else settings.driver_max_rows
    return table.driver_writes and table.rows <= most_rows
