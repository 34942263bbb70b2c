"""Names and values as SQL text reads them, in one place: delta-rs's predicates and DataFusion's
queries (double quotes: driver lookups, routing, the driver MERGE), and Spark's column references
(backticks: `F.col`, a string in `select`, a MERGE's conditions and set clauses). A name Delta
accepts, `geo.lat` or one holding a quote, is one column in both.

>>> quoted('a"b')
'"a""b"'
>>> spark_quoted("geo.lat"), spark_quoted("we`ird")
('`geo.lat`', '`we``ird`')
>>> literal("O'Brien"), literal(7)
("'O''Brien'", '7')
>>> print(key_in(("tenant", "id"), [("acme", 1), ("o'neil", 2)]))
("tenant", "id") IN (('acme', 1), ('o''neil', 2))
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column


def quoted(name: str) -> str:
    """A SQL identifier as delta-rs and DataFusion read it whole: in double quotes, each double
    quote in it doubled."""
    return '"' + name.replace('"', '""') + '"'


def spark_quoted(name: str) -> str:
    """A column name as Spark reads it whole: in backticks, each backtick in it doubled. Unquoted,
    Spark reads `geo.lat` as the field `lat` of a struct `geo`, and refuses a lone backtick."""
    return "`" + name.replace("`", "``") + "`"


def spark_column(name: str, of: str | None = None) -> Column:
    """The column `name` (`spark_quoted`), of the frame aliased `of` when given."""
    from pyspark.sql import functions as F

    return F.col(spark_quoted(name) if of is None else f"{of}.{spark_quoted(name)}")


def spark_columns(names: Sequence[str]) -> list[Column]:
    """`spark_column` of each name, in order: a `select` of these columns."""
    return [spark_column(c) for c in names]


def literal(value: Any) -> str:
    """A SQL literal of a key value (an integer, decimal, date, timestamp, binary or string),
    typed as its column is."""
    if isinstance(value, decimal.Decimal):
        # Typed: DataFusion reads a bare 12345678901234567.89 as a Float64, which no decimal(38, 2)
        # row of that value equals (issue 51).
        _, digits, exponent = value.as_tuple()
        scale = max(0, -int(exponent))
        precision = max(len(digits) + max(0, int(exponent)), scale, 1)
        return f"CAST('{value:f}' AS DECIMAL({precision}, {scale}))"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, datetime.datetime):  # a date too: first
        return f"TIMESTAMP '{value.isoformat()}'"
    if isinstance(value, datetime.date):
        return f"DATE '{value.isoformat()}'"
    return tuple_literal(value)


def tuple_literal(value: Any) -> str:
    """A literal DataFusion takes in a tuple, which holds no typed literal (DATE '...', a CAST):
    a date or a timestamp as its text, which DataFusion reads as the column's type. A decimal
    has none (`key_in` matches it part by part)."""
    if isinstance(value, datetime.date):
        return f"'{value.isoformat()}'"
    if isinstance(value, bytes):
        return f"X'{value.hex()}'"
    if isinstance(value, (int, decimal.Decimal)):
        return literal(value)
    return "'" + str(value).replace("'", "''") + "'"


def key_in(key: Sequence[str], values: Sequence[tuple[Any, ...]]) -> str:
    """`key IN (values)`: a list of values for a key of one column, a tuple IN-list for a key of
    several (never a concatenation of the parts, which would match `a` + `bc` to `ab` + `c`)."""
    if len(key) == 1:
        return f"{quoted(key[0])} IN ({', '.join(literal(k[0]) for k in values)})"
    if any(isinstance(v, decimal.Decimal) for k in values for v in k):
        # DataFusion takes only bare literals in a tuple, not a decimal's CAST: each key's parts
        # are matched one by one (lookups of many keys take no decimal key, `literal_keys`).
        matches = [[f"{quoted(c)} = {literal(v)}" for c, v in zip(key, k, strict=True)] for k in values]
        return "(" + " OR ".join("(" + " AND ".join(parts) + ")" for parts in matches) + ")"
    tuples = ", ".join("(" + ", ".join(tuple_literal(v) for v in k) + ")" for k in values)
    return f"({', '.join(quoted(c) for c in key)}) IN ({tuples})"
