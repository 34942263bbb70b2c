"""SQL text for delta-rs: its predicates and DataFusion's queries are SQL strings, so names and
key values are quoted here, in one place (driver lookups, routing, the driver MERGE).

>>> quoted('a"b')
'"a""b"'
>>> literal("O'Brien"), literal(7)
("'O''Brien'", '7')
"""

from __future__ import annotations

import datetime
import decimal
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
