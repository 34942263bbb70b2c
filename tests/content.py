"""The tests' model of "a change is a change of content" (docs/decisions.md, issue 36), in plain
Python: which commits of a change feed changed a key, and each key's last such change. The
oracles (tests/lakehouse.py) read it; tests/unit checks it as a truth table. It imports no
pyspark: change feed rows come in as dicts.

A commit changes a key when the key's row after the commit (its insert or post-image; none
after a delete that no insert replaces) differs from its row before (its pre-image or deleted
row; none before an insert). Commits are compared one at a time, never across the range.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

CDF = ("_change_type", "_commit_version", "_commit_timestamp")
AFTER = ("insert", "update_postimage")

Key = str | tuple[str, ...]  # a column name, or a spec's key (a tuple of one column or several)


def key_of(row: Mapping[str, Any], key: Key) -> Any:
    """A row's key value: the column's value for a key of one column, a tuple for several."""
    if isinstance(key, str):
        return row[key]
    return row[key[0]] if len(key) == 1 else tuple(row[c] for c in key)


def null_key(value: Any) -> bool:
    """Whether a key value (`key_of`) is null: a null in any of its columns."""
    return value is None or (isinstance(value, tuple) and any(v is None for v in value))


def commit_changes(feed: Iterable[Mapping[str, Any]], key: Key) -> dict[Any, list[tuple[int, dict | None]]]:
    """Each key's commits that changed its content, in version order: (version, its row after
    the commit, None when deleted)."""
    sides: dict[tuple[Any, int], dict[str, dict | None]] = {}
    for row in feed:
        data = {c: v for c, v in row.items() if c not in CDF}
        side = "after" if row["_change_type"] in AFTER else "before"
        sides.setdefault((key_of(row, key), int(row["_commit_version"])), {})[side] = data
    changes: dict[Any, list[tuple[int, dict | None]]] = {}
    for (k, version), commit in sorted(sides.items(), key=lambda item: (repr(item[0][0]), item[0][1])):
        after = commit.get("after")
        if commit.get("before") != after:
            changes.setdefault(k, []).append((version, after))
    return changes


def last_changes(feed: Iterable[Mapping[str, Any]], key: Key) -> dict[Any, tuple[int, dict | None]]:
    """Each key's last change of content: (version, its row then, None when deleted). A key whose
    commits all left it as it was is absent."""
    return {k: commits[-1] for k, commits in commit_changes(feed, key).items()}


def changed_keys(feed: Iterable[Mapping[str, Any]], key: Key, after: int, upto: int) -> set[Any]:
    """The keys some commit in versions (after, upto] changed the content of."""
    return {
        k
        for k, commits in commit_changes(feed, key).items()
        if any(after < version <= upto for version, _ in commits)
    }
