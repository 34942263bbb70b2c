"""Spark's names of a Delta table's column types (`StructField.dataType.simpleString()`: "bigint",
"array<struct<id:int>>"), from the table's schema as its log holds it (delta-rs), without
pyspark: the plan of a batch (engine/plan.py), and with it `lakejoin plan`, needs no JVM. The
names are part of each view's recorded definition (spec/definition.py), so they are Spark's to
the byte (tests/delta/test_type_names.py compares them with pyspark's own).

>>> column_types({"type": "struct", "fields": [{"name": "id", "type": "long"}]})
{'id': 'bigint'}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# Delta's (and Spark's JSON) name of an atomic type -> Spark's simpleString.
_ATOMIC = {
    "long": "bigint",
    "integer": "int",
    "short": "smallint",
    "byte": "tinyint",
    "decimal": "decimal(10,0)",
    "null": "void",
}
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)")


def type_name(kind: Any) -> str:
    """Spark's simpleString of one type in Delta's schema JSON (a name, or an array, map or
    struct object)."""
    if isinstance(kind, str):
        decimal = _DECIMAL.fullmatch(kind)
        if decimal:
            return f"decimal({decimal[1]},{decimal[2]})"
        return _ATOMIC.get(kind, kind)
    shape = kind.get("type")
    if shape == "array":
        return f"array<{type_name(kind['elementType'])}>"
    if shape == "map":
        return f"map<{type_name(kind['keyType'])},{type_name(kind['valueType'])}>"
    if shape == "struct":
        return "struct<" + ",".join(f"{f['name']}:{type_name(f['type'])}" for f in kind["fields"]) + ">"
    raise ValueError(f"unknown type in a Delta schema: {kind!r}")


def column_types(schema: Mapping[str, Any]) -> dict[str, str]:
    """Each top-level column of a Delta schema (its JSON, as a dict) with Spark's name of its type."""
    return {f["name"]: type_name(f["type"]) for f in schema["fields"]}
