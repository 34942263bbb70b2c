"""The rows of a step's result as plain, comparable Python values."""

from __future__ import annotations

from typing import Any


def plain(value: Any) -> Any:
    """A Spark value with its Rows as tuples (struct fields in order) and its arrays as lists."""
    if isinstance(value, tuple):  # a Row is a tuple
        return tuple(plain(v) for v in value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def rows(frame: Any, *columns: str) -> list[tuple]:
    """The rows of `frame` (its `columns`, or all) as plain tuples, in a fixed order."""
    chosen = frame.select(*columns) if columns else frame
    return ordered(plain(tuple(r)) for r in chosen.collect())


def ordered(expected: Any) -> list[tuple]:
    """Rows in the order `rows` gives them, to compare a table of expected rows with."""
    return sorted(expected, key=repr)
