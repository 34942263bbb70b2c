"""The settings each section of a spec accepts, declared once: their names, shapes, defaults,
bounds and a line saying what each is for. The tables are spec/sections.py's (the top level, a
source, `spark:`, a view's settings), spec/trust.py's (`health:`, `audit:`) and each kind's
`SETTINGS` (spec/kinds/<kind>.py). The parser takes its allowed keys, defaults and bounds from
them; spec/json_schema.py writes the spec's JSON Schema from the same tables, so an editor and
`lakejoin run` accept the same keys (tests/unit/test_spec_schema.py breaks each setting and
checks that both refuse it).

>>> section = Settings("a source table", (
...     Setting("path", Shape.TEXT, "where the table is", required=True),
...     Setting("key", Shape.KEY, "its key", required=True),
... ))
>>> sorted(section.names())
['key', 'path']
>>> section["path"].required
True
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


class Shape(enum.Enum):
    """What a setting's value looks like, as the parser reads it."""

    TEXT = "text"  # a string; a whole number is read as its digits
    NAME = "name"  # a name: letters, digits and '_', starting with a letter or '_'
    PREFIX = "prefix"  # a name, or empty (no prefix)
    KEY = "key"  # one column name, or a list of distinct ones in order
    COLUMNS = "columns"  # a non-empty list of column names
    CHOICE = "choice"  # one value of the enum `choices`
    NUMBER = "number"  # a number within the bounds
    WHOLE = "whole"  # a whole number within the bounds
    FLAG = "flag"  # true or false
    SECTION = "section"  # a mapping of the settings `of`
    LIST = "list"  # a non-empty list of mappings of the settings `of`
    NAMED = "named"  # a non-empty mapping of names to mappings of the settings `of`
    VIEWS = "views"  # NAMED, where each entry holds one kind's block (spec/registry.py) beside `of`
    HEALTH = "health"  # a limit per measure of the view's kind (spec/trust.py)


# Shapes whose empty value (`name:` with nothing after it) the parser reads as "not set".
EMPTY_IS_UNSET = frozenset(
    {Shape.TEXT, Shape.NAME, Shape.PREFIX, Shape.CHOICE, Shape.COLUMNS, Shape.SECTION, Shape.HEALTH}
)


@dataclass(frozen=True)
class Setting:
    """One key of a section. `only_with` (setting, value as the YAML writes it): it applies only
    while that setting of the same section has that value (its default counts); `excludes`: the
    section sets it or that one, not both; `also`: values that stand for the section as a whole
    (`audit: off`)."""

    name: str
    shape: Shape
    about: str  # one line: what it is for, as an editor shows it on hover
    required: bool = False
    default: Any = None  # an enum member for a CHOICE
    choices: type[enum.Enum] | None = None
    least: float | None = None  # the lowest value allowed
    above: float | None = None  # the value it must be above
    most: float | None = None  # the highest value allowed
    of: Settings | None = None
    only_with: tuple[str, Any] | None = None
    excludes: str | None = None
    also: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Settings:
    """A section's settings, in the order a reader meets them; `one_of`: at least one of these
    is set (a health limit's bounds)."""

    about: str
    fields: tuple[Setting, ...]
    one_of: tuple[str, ...] = ()

    def names(self) -> set[str]:
        return {s.name for s in self.fields}

    def __getitem__(self, name: str) -> Setting:
        return next(s for s in self.fields if s.name == name)

    def __iter__(self) -> Iterator[Setting]:
        return iter(self.fields)
