"""SQL text for delta-rs: its predicates and DataFusion's queries are SQL strings, so names and
key values are quoted here, in one place (driver lookups, routing, the driver MERGE).

>>> quoted('a"b')
'"a""b"'
>>> literal("O'Brien"), literal(7)
("'O''Brien'", '7')
>>> print(key_in(("tenant", "id"), [("acme", 1), ("o'neil", 2)]))
("tenant", "id") IN (('acme', 1), ('o''neil', 2))
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Sequence
from typing import Any


def quoted(name: str) -> str:
    """A SQL identifier, quoted."""
    return '"' + name.replace('"', '""') + '"'


def literal(value: Any) -> str:
    """A SQL literal of an integer, decimal, date or string key value."""
    if isinstance(value, (int, decimal.Decimal)):
        return str(value)
    if isinstance(value, datetime.date):
        return f"DATE '{value.isoformat()}'"
    return "'" + str(value).replace("'", "''") + "'"


def key_in(key: Sequence[str], values: Sequence[tuple[Any, ...]]) -> str:
    """`key IN (values)`: a list of values for a key of one column, a tuple IN-list for a key of
    several (never a concatenation of the parts, which would match `a` + `bc` to `ab` + `c`)."""
    if len(key) == 1:
        return f"{quoted(key[0])} IN ({', '.join(literal(k[0]) for k in values)})"
    tuples = ", ".join("(" + ", ".join(literal(v) for v in k) + ")" for k in values)
    return f"({', '.join(quoted(c) for c in key)}) IN ({tuples})"
