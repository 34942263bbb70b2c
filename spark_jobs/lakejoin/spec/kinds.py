"""The spec parser of each view kind: `parse_<kind>(reader, raw, key, known)` checks one view's
block (`views.<name>.<kind>`) and builds its definition, with errors that name the line and the
key. spec/parse.py calls them through the kind registry (spec/registry.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from lakejoin.spec.model import (
    FANOUT_MIN_ROWS,
    FANOUT_THRESHOLD,
    Dimension,
    Duplicates,
    Enrich,
    EnrichMode,
    FkJoin,
    JoinHow,
    ListJoin,
    OnConflict,
    Rekey,
    quoted,
)
from lakejoin.spec.yaml_lines import SpecReader, describe

FANOUT = ("fanout_threshold", "fanout_min_rows")  # the fan-out rule's settings (views/fanout.py)


@dataclass(frozen=True)
class Known:
    """The names a view may read: declared sources, and the other views."""

    sources: set[str]
    views: set[str]

    def choices(self, reader: SpecReader, key: str) -> str:
        names = ", ".join(sorted(self.sources))
        me = key.split(".")[1] if key.startswith("views.") else ""
        views = sorted(self.views - {me})
        return f"use one of: {names}" + (f", or one of the views: {', '.join(views)}" if views else "")


def _source_name(reader: SpecReader, raw: dict[str, Any], key: str, role: str, known: Known) -> str:
    name = reader.identifier(raw, key, role)
    assert name is not None
    if name not in known.sources and name not in known.views:
        raise reader.fail(
            f"{key}.{role}",
            f"unknown source '{name}'",
            f"declare it under 'sources:' or {known.choices(reader, key)}",
        )
    return name


def _choice(
    reader: SpecReader, raw: dict[str, Any], key: str, name: str, kind: type[enum.Enum], default: str
) -> Any:
    text = reader.text(raw, key, name, required=False) or default
    try:
        return kind(text)
    except ValueError:
        raise reader.fail(
            f"{key}.{name}", f"unknown {name} '{text}'", f"use one of: {', '.join(k.value for k in kind)}"
        ) from None


def _columns(reader: SpecReader, raw: dict[str, Any], key: str, name: str) -> tuple[str, ...] | None:
    columns_raw = raw.get(name)
    if columns_raw is None:
        return None
    if not isinstance(columns_raw, list) or not columns_raw:
        raise reader.fail(f"{key}.{name}", f"{name} must be a non-empty list of column names")
    for i, column in enumerate(columns_raw):
        if not isinstance(column, str):
            raise reader.fail(f"{key}.{name}[{i}]", f"expected a column name, found {describe(column)}")
        reader.check_identifier(column, f"{key}.{name}[{i}]")
    return tuple(columns_raw)


def parse_fk_join(reader: SpecReader, raw: Any, key: str, known: Known) -> FkJoin:
    raw = reader.mapping(raw, key)
    reader.only(raw, key, {"left", "right", "fk", "how", "right_columns", "right_prefix", *FANOUT})
    left = _source_name(reader, raw, key, "left", known)
    right = _source_name(reader, raw, key, "right", known)
    fk = reader.key_columns(raw, key, "fk")
    how = _how(reader, raw, key, default=JoinHow.INNER)
    columns = _columns(reader, raw, key, "right_columns")
    prefix = reader.text(raw, key, "right_prefix", required=False) or ""
    if prefix:
        reader.check_identifier(prefix, f"{key}.right_prefix")
    threshold, min_rows = _fanout(reader, raw, key)
    return FkJoin(left, right, fk, how, columns, prefix, threshold, min_rows)


def _how(reader: SpecReader, raw: dict[str, Any], key: str, *, default: JoinHow) -> JoinHow:
    how_text = reader.text(raw, key, "how", required=False) or default.value
    try:
        return JoinHow(how_text)
    except ValueError:
        raise reader.fail(
            f"{key}.how",
            f"unknown join type '{how_text}'",
            f"use one of: {', '.join(h.value for h in JoinHow)}",
        ) from None


def _number(
    reader: SpecReader, raw: dict[str, Any], key: str, name: str, default: float, *, most: float
) -> float:
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= most:
        raise reader.fail(
            f"{key}.{name}",
            f"'{name}' must be a number from 0 to {most:g}, found {value!r}",
            f"set it within that range (the default is {default:g}) or remove it",
        )
    return float(value)


def _fanout(reader: SpecReader, raw: dict[str, Any], key: str) -> tuple[float, int]:
    threshold = _number(reader, raw, key, "fanout_threshold", FANOUT_THRESHOLD, most=1.0)
    min_rows = raw.get("fanout_min_rows", FANOUT_MIN_ROWS)
    if isinstance(min_rows, bool) or not isinstance(min_rows, int) or min_rows < 0:
        raise reader.fail(
            f"{key}.fanout_min_rows",
            f"'fanout_min_rows' must be a whole number of rows, 0 or more, found {min_rows!r}",
            f"set it (the default is {FANOUT_MIN_ROWS:,}; 0 lets the share alone decide) or remove it",
        )
    return threshold, min_rows


def parse_enrich(reader: SpecReader, raw: Any, key: str, known: Known) -> Enrich:
    raw = reader.mapping(raw, key)
    reader.only(raw, key, {"fact", "mode", "dimensions", *FANOUT, "broadcast_limit_mb"})
    fact = _source_name(reader, raw, key, "fact", known)
    mode = _choice(reader, raw, key, "mode", EnrichMode, EnrichMode.LOOKUP.value)
    listed = raw.get("dimensions")
    if not isinstance(listed, list) or not listed:
        raise reader.fail(
            f"{key}.dimensions",
            "'dimensions' must be a non-empty list",
            "list the dimension tables, e.g. [{table: customers, fk: customer_id, prefix: customer_}] "
            "(an fk of several columns: fk: [tenant_id, customer_id], in the dimension key's order)",
        )
    dimensions: list[Dimension] = []
    for i, body in enumerate(listed):
        at = f"{key}.dimensions[{i}]"
        body = reader.mapping(body, at)
        reader.only(body, at, {"table", "fk", "how", "prefix", "columns"})
        table = _source_name(reader, body, at, "table", known)
        fk = reader.key_columns(body, at, "fk")
        if table == fact:
            raise reader.fail(f"{at}.table", f"'{table}' is the fact table", "enrich from another table")
        prefix = reader.text(body, at, "prefix", required=False) or ""
        if prefix:
            reader.check_identifier(prefix, f"{at}.prefix")
        dimension = Dimension(
            table,
            fk,
            _how(reader, body, at, default=JoinHow.LEFT),
            prefix,
            _columns(reader, body, at, "columns"),
        )
        if any((d.table, d.fk) == (dimension.table, dimension.fk) for d in dimensions):
            raise reader.fail(at, f"dimension '{table}' on fk {quoted(fk)} is listed twice", "list it once")
        dimensions.append(dimension)
    for name in FANOUT:
        if name in raw and mode is not EnrichMode.PROPAGATE:
            raise reader.fail(
                f"{key}.{name}",
                f"{name} applies only to 'mode: propagate' (lookup never rewrites facts)",
                "remove it, or set 'mode: propagate'",
            )
    threshold, min_rows = _fanout(reader, raw, key)
    limit = _number(reader, raw, key, "broadcast_limit_mb", 64.0, most=8192.0)
    return Enrich(fact, mode, tuple(dimensions), threshold, limit, min_rows)


def parse_list_join(reader: SpecReader, raw: Any, key: str, known: Known) -> ListJoin:
    raw = reader.mapping(raw, key)
    allowed = {"left", "list", "right", "into", "duplicates", "right_columns", *FANOUT}
    reader.only(raw, key, allowed)
    left = _source_name(reader, raw, key, "left", known)
    right = _source_name(reader, raw, key, "right", known)
    column = reader.identifier(raw, key, "list")
    into = reader.identifier(raw, key, "into")
    assert column and into
    duplicates = _choice(reader, raw, key, "duplicates", Duplicates, Duplicates.KEEP.value)
    columns = _columns(reader, raw, key, "right_columns")
    threshold, min_rows = _fanout(reader, raw, key)
    return ListJoin(left, column, right, into, duplicates, columns, threshold, min_rows)


def parse_rekey(reader: SpecReader, raw: Any, key: str, known: Known) -> Rekey:
    raw = reader.mapping(raw, key)
    reader.only(raw, key, {"source", "key", "columns", "unique", "on_conflict"})
    source = _source_name(reader, raw, key, "source", known)
    column = reader.key_columns(raw, key, "key")
    unique = raw.get("unique", True)
    if not isinstance(unique, bool):
        raise reader.fail(f"{key}.unique", f"'unique' must be true or false, found {describe(unique)}")
    if not unique and "on_conflict" in raw:
        raise reader.fail(
            f"{key}.on_conflict",
            "on_conflict applies only to a unique rekey: with 'unique: false' every "
            "(derived key, master key) pair is its own row, so nothing can conflict",
            "remove on_conflict, or set 'unique: true'",
        )
    on_conflict = _choice(reader, raw, key, "on_conflict", OnConflict, OnConflict.FAIL.value)
    return Rekey(source, column, _columns(reader, raw, key, "columns"), unique, on_conflict)
