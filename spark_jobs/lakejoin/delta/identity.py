"""Which table a pin is of (DESIGN §2: inputs are pinned by identity, not only by version).

A version number alone does not say which table it is of: a table dropped and written again
at the same path starts again at version 0 under a new table id, and a log rewritten behind
Delta's back can put another commit at a pinned version. So a batch pins each input as (table
id, version, that version's commit), and the next plan checks all three before it reads a
change feed from there. The output's own history, after the version its last batch committed,
may hold only lakejoin's batch commits and commits that change no row.

Everything here reads Delta's log with delta-rs (`metadata().id`, `history()` through
delta/history.py): no JVM, and only the commits since the pin, which the plan's change check
reads anyway.

>>> TableIdentity("5f0c...", "WRITE@1796194735338").as_json()  # doctest: +SKIP
['5f0c...', 'WRITE@1796194735338']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakejoin.delta.history import numbered_history
from lakejoin.delta.sources import NO_DATA_OPERATIONS

if TYPE_CHECKING:
    from deltalake import DeltaTable

# Commits that change no row of a table beside NO_DATA_OPERATIONS: its properties, constraints,
# protocol and column metadata (Delta's commitInfo operation names, Spark's and delta-rs's).
NO_ROW_OPERATIONS = NO_DATA_OPERATIONS | frozenset(
    {
        "SET TBLPROPERTIES",
        "UNSET TBLPROPERTIES",
        "ADD CONSTRAINT",
        "DROP CONSTRAINT",
        "UPGRADE PROTOCOL",
        "ADD FEATURE",
        "CHANGE COLUMN",
        "ADD COLUMNS",
        "UPDATE COLUMN METADATA",
        "REORG",
        "CREATE CHECKPOINT",
    }
)


@dataclass(frozen=True)
class TableIdentity:
    """A pinned table: its Delta table id (`metaData.id`) and its pinned commit, as
    `<operation>@<commit timestamp, ms>` ("" when the log no longer holds it)."""

    table_id: str
    commit: str

    def as_json(self) -> list[str]:
        return [self.table_id, self.commit]

    @classmethod
    def from_json(cls, value: Any) -> TableIdentity | None:
        if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, str) for v in value):
            return cls(value[0], value[1])
        return None


Identities = dict[str, TableIdentity]


def identities_json(identities: Mapping[str, TableIdentity]) -> dict[str, list[str]]:
    return {name: identity.as_json() for name, identity in sorted(identities.items())}


def identities_from(value: Any) -> Identities:
    """Identities as `identities_json` wrote them; anything else is left out (a pin without
    its identity is not checked: batches recorded before lakejoin kept them)."""
    found: Identities = {}
    for name, item in (value or {}).items() if isinstance(value, dict) else ():
        identity = TableIdentity.from_json(item)
        if identity is not None:
            found[str(name)] = identity
    return found


def fingerprint(commit: Mapping[str, Any]) -> str:
    """What tells one commit from another written at the same version of the same table."""
    return f"{commit.get('operation', '')}@{commit.get('timestamp', '')}"


class TableLog:
    """The newest state of one table's Delta log, as delta-rs reads it: its id and version,
    and its commits newest first, read once a page at a time and kept."""

    def __init__(self, table: DeltaTable) -> None:
        self.table = table
        self.table_id = str(table.metadata().id)
        self.version = int(table.version())
        self._commits: list[dict[str, Any]] = []
        self._complete = False

    @classmethod
    def at(cls, path: str) -> TableLog | None:
        from deltalake import DeltaTable

        return cls(DeltaTable(path)) if DeltaTable.is_deltatable(path) else None

    def commits_after(self, version: int) -> list[dict[str, Any]] | None:
        """The commits of versions (version, newest], newest first; None when log cleanup left
        part of them out."""
        self._read_to(version + 1)
        found = [c for c in self._commits if int(c["version"]) > version]
        return found if len(found) == self.version - version else None

    def commit(self, version: int) -> dict[str, Any] | None:
        """The commit of `version` (None: not in what log cleanup left)."""
        self._read_to(version)
        return next((c for c in self._commits if int(c["version"]) == version), None)

    def identity(self, version: int) -> TableIdentity:
        found = self.commit(version) if 0 <= version <= self.version else None
        return TableIdentity(self.table_id, fingerprint(found) if found is not None else "")

    def _read_to(self, version: int) -> None:
        need = self.version - version + 1
        if self._complete or len(self._commits) >= need:
            return
        # numbered from the table's own versions, this log's version the newest kept
        self._commits, self._complete = numbered_history(self.table, max(need, 16), upto=self.version)


def replaced(
    name: str,
    log: TableLog | None,
    version: int,
    recorded: TableIdentity | None,
    *,
    read_by: str = "the last batch",
) -> str | None:
    """Why the table a batch (`read_by`, in words) pinned at `version` as `recorded` is not the
    table `log` reads now, or None when it is (or when nothing was recorded to tell)."""
    if recorded is None:
        return None
    if log is None:
        return f"{name} is gone (no Delta table at its path; it was version {version})"
    if log.table_id != recorded.table_id:
        return (
            f"{name} was dropped and written again at its path (table id {recorded.table_id} -> "
            f"{log.table_id}; {read_by} read it at version {version}, it is now at {log.version})"
        )
    if log.version < version:
        return f"{name} went back to version {log.version}, below the version {version} {read_by} read"
    now = log.commit(version)
    if recorded.commit and now is not None and fingerprint(now) != recorded.commit:
        return (
            f"the commit at version {version} of {name} is not the one {read_by} read "
            f"({recorded.commit} -> {fingerprint(now)}): its log was rewritten"
        )
    return None


def foreign_commits(log: TableLog, after: int, ours: Callable[[dict[str, Any]], bool]) -> list[str] | None:
    """The commits after `after` that changed rows and that `ours` does not claim, as
    `<operation> (version n)`, oldest first (a commit that changes no row, such as OPTIMIZE,
    is none); None when log cleanup left part of them out."""
    commits = log.commits_after(after)
    if commits is None:
        return None
    return [
        f"{c.get('operation', '?')} (version {c['version']})"
        for c in reversed(commits)
        if not ours(c) and str(c.get("operation", "")) not in NO_ROW_OPERATIONS
    ]
