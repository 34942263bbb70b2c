"""Which write takes a batch's keyed rows: pure rules over what the batch knows and a few facts
of the session and of the table. `choose_output` chooses an output batch's write among the
closed set of `Strategy`: the table rewritten, the one-commit upsert (key_upsert.py), or, by
`choose` over the batch's key count (`SinkFacts`), a MERGE (sink/entry.write_state writes a
state table's rows by `choose` alone, after its own rewrite and fill). `may_upsert` says,
before the batch derives its rows, whether the upsert may write it. Each fact is asked only
when a branch needs it, and in a fixed order, cheap to dear: what the batch knows, the
session's settings (a Spark conf read), the table's log (a delta-rs read), the key count (a
Spark job when not counted yet); so a fact no branch needs is never looked up (sink/facts.py
gathers them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol


class Strategy(Enum):
    """How a batch's keyed rows are written; each is one commit, or none."""

    REWRITE = "rewrite"  # the table set to the recompute: overwritten (new schema), or filled laid out by key
    UPSERT = "upsert"  # lakejoin's one-commit upsert, which reads only the key column (key_upsert.py)
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


class OutputSettings(Settings, Protocol):
    """The session's write settings an output's write asks besides (Spark conf, no job)."""

    @property
    def upsert(self) -> bool:
        """Whether the one-commit upsert may write an output's batch (key_upsert.ENABLED)."""
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


class OutputLog(TableLog, Protocol):
    """The output's facts its write asks of the Delta log besides (delta-rs, no JVM)."""

    @property
    def files(self) -> int:
        """How many data files the table holds (none: created, never written)."""
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


@dataclass(frozen=True)
class OutputFacts:
    """What the choice of an output batch's write knows before any of its keys is counted:
    whether it writes a full refresh (`full`), the schema change the table's log shows
    (`drift`), why the plan rewrites the output under a full refresh (`rewrite`: its key
    changed), the keys an incremental batch counted in the job that derived them (`counted`,
    None: not counted), the session's `settings` and the table's log; and what the writes tried
    first learnt: the upsert declined (`upsert_declined`, why), the driver's MERGE failed
    (`driver_failed`). Nothing was written in either case."""

    full: bool
    drift: str | None
    rewrite: str | None
    counted: int | None
    settings: OutputSettings
    table: OutputLog
    upsert_declined: str | None = None
    driver_failed: bool = False


def choose_output(f: OutputFacts, keys: Callable[[], int]) -> Strategy:
    """The write of an output's batch. The table is rewritten for a schema change, or under a
    full refresh for a changed key (the declared policy: readers see every row deleted and
    inserted once), and filled, laid out by key, when it holds no data file yet. The one-commit
    upsert writes the rest when on, unless it declined or the driver's MERGE writes the batch
    first (`_driver_first`). Otherwise `choose` picks the MERGE by the batch's key count,
    `keys()` (asked here only: for a full write it is the differences' count, a Spark job).
    A driver's MERGE that failed leaves the batch to Spark's MERGE, never to the upsert.

    >>> choose_output(OutputFacts(True, "a column added", None, None, ..., ...), keys=...)  # doctest: +SKIP
    <Strategy.REWRITE: 'rewrite'>
    """
    s = f.settings
    if f.drift is not None or (f.full and f.rewrite is not None):
        return Strategy.REWRITE
    if f.full and s.key_ranges and f.table.files == 0:
        return Strategy.REWRITE
    if s.upsert and f.upsert_declined is None and not _driver_first(f):
        return Strategy.UPSERT
    batch = SinkFacts(Target.OUTPUT, f.full, keys(), s, f.table, driver_failed=f.driver_failed)
    return choose(batch)


def write_note(strategy: Strategy, tried: Sequence[tuple[Strategy, str]] = ()) -> str:
    """The batch summary's note of its output write: the strategy's name, and those that gave
    the batch up first ("spark_merge (after upsert)"; each one's why is in the summary's
    "output" note, or the log).

    >>> write_note(Strategy.SPARK_MERGE, [(Strategy.UPSERT, "row ids")])
    'spark_merge (after upsert)'
    """
    if not tried:
        return strategy.value
    return f"{strategy.value} (after {', '.join(s.value for s, _ in tried)})"


def may_upsert(settings: OutputSettings, *, incremental: bool) -> bool:
    """Whether an output's batch may be written by the one-commit upsert from the affected
    keys' rows at the previous pins, so its view kind derives them (views/base.Rebuilt):
    an incremental batch, the upsert on. One settings object answers this before the batch
    derives and `choose_output` at its write, so both read the switch once."""
    return incremental and settings.upsert


def _driver_first(f: OutputFacts) -> bool:
    """Whether the driver's MERGE writes the batch before the upsert is tried: a full write into
    a table of at most the driver's maximum keys in rows (`driver_sized`), or an incremental
    batch whose counted keys `choose` gives the driver. Whether the driver failed is not asked:
    the upsert was passed over for the MERGE that failed."""
    if f.full:
        return driver_sized(f.settings, f.table)
    if f.counted is None:
        return False
    return choose(SinkFacts(Target.OUTPUT, False, f.counted, f.settings, f.table)) is Strategy.DRIVER_MERGE
