"""The parts several view kinds' spec rules share (spec/kinds/<kind>.py): the names a view may
read, the settings every join reads alike (a source, a join type, a column list, the fan-out
rule's), the checks of an fk and of a column list against an input's columns, and the columns a
joined input carries.

>>> carried_columns(None, ["merchant_id", "name", "logo"], ("merchant_id",))
['name', 'logo']
>>> carried_columns(("logo",), ["merchant_id", "name", "logo"], ("merchant_id",))
['logo']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lakejoin.spec.model import FANOUT_MIN_ROWS, FANOUT_THRESHOLD, JoinHow, Key, PipelineSpec, Source, shown
from lakejoin.spec.settings import Setting, Shape
from lakejoin.spec.yaml_lines import SpecReader, describe

Schemas = Mapping[str, Mapping[str, str]]  # each input's columns: name -> Spark type

# The fan-out rule's settings (views/fanout.py), in the kinds' settings that apply it.
FANOUT_THRESHOLD_SETTING = Setting(
    "fanout_threshold",
    Shape.NUMBER,
    "above this share of the rows that the other side's changes reach, a batch recomputes the view",
    default=FANOUT_THRESHOLD,
    least=0,
    most=1,
)
FANOUT_MIN_ROWS_SETTING = Setting(
    "fanout_min_rows",
    Shape.WHOLE,
    "a reach of at most this many rows is routed whatever its share (0: the share alone decides)",
    default=FANOUT_MIN_ROWS,
    least=0,
)
FANOUT_FIELDS = (FANOUT_THRESHOLD_SETTING, FANOUT_MIN_ROWS_SETTING)
FANOUT = tuple(s.name for s in FANOUT_FIELDS)
FANOUT_SETTINGS = frozenset(FANOUT)  # how a batch runs, never what it computes (spec/definition.py)

# The settings fk_join and list_join declare alike.
LEFT = Setting(
    "left", Shape.NAME, "the left table: a source or a view; one output row per left row", required=True
)
RIGHT = Setting("right", Shape.NAME, "the right table: a source or a view", required=True)
RIGHT_COLUMNS = Setting(
    "right_columns", Shape.COLUMNS, "the right columns to carry (default: all but its key)"
)


# The fan-out figures (views/fanout.py) of the kinds that can fall back to a full recompute.
FANOUT_LABELS = {
    "fanout_facts": "rows reached by the other side's changes",  # facts (enrich), left rows (the joins)
    "fanout_permille": "fan-out \u2030",
    "full_recompute": "full recompute",
}


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


def source_name(reader: SpecReader, raw: dict[str, Any], key: str, role: str, known: Known) -> str:
    name = reader.identifier(raw, key, role)
    assert name is not None
    if name not in known.sources and name not in known.views:
        raise reader.fail(
            f"{key}.{role}",
            f"unknown source '{name}'",
            f"declare it under 'sources:' or {known.choices(reader, key)}",
        )
    return name


def choice(reader: SpecReader, raw: dict[str, Any], key: str, setting: Setting) -> Any:
    """A CHOICE setting's enum member (its default when it is not set)."""
    kind = setting.choices
    assert kind is not None and isinstance(setting.default, kind)
    text = reader.text(raw, key, setting.name, required=False) or setting.default.value
    try:
        return kind(text)
    except ValueError:
        raise reader.fail(
            f"{key}.{setting.name}",
            f"unknown {setting.name} '{text}'",
            f"use one of: {', '.join(k.value for k in kind)}",
        ) from None


def column_list(reader: SpecReader, raw: dict[str, Any], key: str, name: str) -> tuple[str, ...] | None:
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


def join_how(reader: SpecReader, raw: dict[str, Any], key: str, setting: Setting) -> JoinHow:
    """A `how` setting (its default differs per kind)."""
    default = setting.default
    assert isinstance(default, JoinHow)
    how_text = reader.text(raw, key, "how", required=False) or default.value
    try:
        return JoinHow(how_text)
    except ValueError:
        raise reader.fail(
            f"{key}.how",
            f"unknown join type '{how_text}'",
            f"use one of: {', '.join(h.value for h in JoinHow)}",
        ) from None


def bounded_number(reader: SpecReader, raw: dict[str, Any], key: str, setting: Setting) -> float:
    """A NUMBER setting within its bounds (its default when it is not set)."""
    name, default, least, most = setting.name, setting.default, setting.least, setting.most
    assert least is not None and most is not None
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not least <= value <= most:
        raise reader.fail(
            f"{key}.{name}",
            f"'{name}' must be a number from {least:g} to {most:g}, found {value!r}",
            f"set it within that range (the default is {default:g}) or remove it",
        )
    return float(value)


def fanout_settings(reader: SpecReader, raw: dict[str, Any], key: str) -> tuple[float, int]:
    threshold = bounded_number(reader, raw, key, FANOUT_THRESHOLD_SETTING)
    setting = FANOUT_MIN_ROWS_SETTING
    min_rows = raw.get(setting.name, setting.default)
    if isinstance(min_rows, bool) or not isinstance(min_rows, int) or min_rows < (setting.least or 0):
        raise reader.fail(
            f"{key}.{setting.name}",
            f"'{setting.name}' must be a whole number of rows, 0 or more, found {min_rows!r}",
            f"set it (the default is {setting.default:,}; 0 lets the share alone decide) or remove it",
        )
    return threshold, min_rows


def check_columns(
    spec: PipelineSpec, key: str, chosen: tuple[str, ...] | None, table: str, columns: Mapping[str, str]
) -> None:
    for i, column in enumerate(chosen or ()):
        if column not in columns:
            raise spec.error(
                f"{key}[{i}]",
                f"column '{column}' is not in the {table}",
                f"use one of its columns: {', '.join(columns)}",
            )


def check_fk(
    spec: PipelineSpec,
    key: str,
    fk: Key,
    host: str,
    host_columns: Mapping[str, str],
    role: str,
    target: Source,
    target_columns: Mapping[str, str],
) -> None:
    """The fk names one column of its table for each column of the key it points at, in that
    key's order, each of that column's type."""
    if len(fk) != len(target.key):
        raise spec.error(
            key,
            f"fk {shown(fk)} has {len(fk)} column{'s' * (len(fk) > 1)} but the {role} key "
            f"'{target.name}.{shown(target.key)}' has {len(target.key)}",
            f"name one column of the {host} for each column of that key, in its order: "
            f"fk: [{', '.join(target.key)}]"
            if len(target.key) > 1
            else "name one column: fk: <column>",
        )
    for i, (column, target_column) in enumerate(zip(fk, target.key, strict=True)):
        at = f"{key}[{i}]" if len(fk) > 1 else key
        if column not in host_columns:
            raise spec.error(
                at,
                f"fk column '{column}' is not in the {host}",
                f"use one of its columns: {', '.join(host_columns)}",
            )
        if host_columns[column] != target_columns[target_column]:
            raise spec.error(
                at,
                f"fk '{column}' is {host_columns[column]} but the {role} key "
                f"'{target.name}.{target_column}' is {target_columns[target_column]}",
                "make both columns the same type in the source tables",
            )


def carried_columns(declared: tuple[str, ...] | None, columns: Iterable[str], key: Key) -> list[str]:
    """The columns of a joined input (a right table, a dimension) that the output carries: the
    declared ones, or all of `columns` but the input's key."""
    if declared:
        return list(declared)
    return [c for c in columns if c not in key]
