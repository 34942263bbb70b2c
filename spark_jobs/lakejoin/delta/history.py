"""A Delta table's commits, each under its own version, read with delta-rs.

delta-rs (1.6) `DeltaTable.history(limit)` lists the newest commits the log holds *now*, but
numbers them down from the version the table object was loaded at. A commit made since the
object was loaded (another run's write of the same table) shifts every number by one: the
commit read as "version 1" is version 2's. Four runs of one pipeline started together hit it
(tests/e2e/test_recovery.py): a batch recorded the identity of another run's commit as its
own pin's, and the next plan found "its log was rewritten". Every history lakejoin reads goes
through `numbered_history`, which brings the table object to the newest version first and
reads again when a commit landed while it read.

>>> commits, complete = numbered_history(DeltaTable(path), 16, upto=7)  # doctest: +SKIP
>>> [c["version"] for c in commits]                                      # doctest: +SKIP
[7, 6, 5, 4, 3, 2, 1, 0]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakejoin.errors import ConcurrentBatchError

if TYPE_CHECKING:
    from deltalake import DeltaTable

# How often a history is read again while commits keep landing on the table as it is read.
READS = 5


def numbered_history(
    table: DeltaTable, limit: int | None = None, *, upto: int | None = None
) -> tuple[list[dict[str, Any]], bool]:
    """The commits of versions up to `upto` (default: the newest), newest first, at most `limit`
    of them (None: all the log holds), each with its own `version`; and whether they are all
    the log holds below the newest of them (fewer than `limit` were there). `table` is left
    loaded at the newest version (a table object with its files is not re-read: the update
    reads only the commits since)."""
    for _ in range(READS):
        table.update_incremental()
        newest = int(table.version())
        newer = max(newest - upto, 0) if upto is not None else 0
        asked = None if limit is None else limit + newer
        commits = table.history(asked)
        table.update_incremental()
        if int(table.version()) == newest:  # no commit landed while it read: the numbers hold
            kept = [c for c in commits if upto is None or int(c["version"]) <= upto]
            return kept, asked is None or len(commits) < asked
    raise ConcurrentBatchError(
        f"commits kept landing on {table.table_uri} while its history was read ({READS} times)",
        where=table.table_uri,
        fix="run again when the table's writers pause",
    )
