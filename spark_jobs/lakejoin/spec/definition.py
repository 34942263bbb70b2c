"""A view's definition as it decides the view's rows: what each batch commit records, and what
the next plan compares with the spec of the day (engine/plan.py).

It holds the view's kind and every setting that changes its rows, each input's path and key, and
the columns (name -> type) the view takes from each input. It is built from the parsed spec, not
its YAML text, so a comment, the order of a mapping's keys, the schedule or a check's settings
change nothing; settings that change how a batch runs but never what it computes
(`fanout_threshold`, `fanout_min_rows`, `broadcast_limit_mb`) are left out.

>>> from lakejoin.spec.parse import load_spec
>>> spec = load_spec("pipelines/marketplace.yaml")
>>> old = view_definition(spec, spec.views["display_products"], {})
>>> new = {**old, "settings": {**old["settings"], "how": "inner"}}
>>> differences(old, new)
['how: left -> inner']
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lakejoin.spec.model import PipelineSpec, View
from lakejoin.spec.registry import KINDS

FORMAT = 1  # what a recorded definition holds; a record of another format is not compared
# Settings that change how a batch runs, never what it computes, over every kind.
PERFORMANCE = frozenset().union(*(kind.performance for kind in KINDS.values()))

Definition = dict[str, Any]


# A definition's fields that hold a key (spec/model.Key), over every kind.
KEY_FIELDS = frozenset().union(*(kind.key_fields for kind in KINDS.values()))


def recorded_key(key: tuple[str, ...]) -> str | list[str]:
    """A key as a definition records it: one column as its name (as before composite keys, so
    a single-column view's recorded definition is unchanged), several as a list."""
    return key[0] if len(key) == 1 else list(key)


def _plain(value: Any) -> Any:
    """A spec value as JSON would hold it: enums by value, tuples as lists, keys as
    `recorded_key` says, performance knobs out."""
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: recorded_key(getattr(value, f.name))
            if f.name in KEY_FIELDS
            else _plain(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.name not in PERFORMANCE
        }
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def listed_columns(view: View) -> dict[str, tuple[str, ...] | None]:
    """Each input's columns as the spec lists them (None: the view takes all of them), merged
    over the parts an input plays: all of them if one part takes all, else every part's list."""
    listed: dict[str, tuple[str, ...] | None] = {}
    for taken in view.definition.inputs():
        before = listed.get(taken.source, ())
        more = taken.listed
        listed[taken.source] = None if before is None or more is None else (*before, *more)
    return listed


def taken_columns(
    spec: PipelineSpec, view: View, schemas: Mapping[str, Mapping[str, str]]
) -> dict[str, list[list[str]]]:
    """The columns, as [name, type] pairs in the table's order (an output's columns follow it),
    the view takes from each input whose schema is known: all of them where the spec lists
    none, else the listed ones and the input's key."""
    taken: dict[str, list[list[str]]] = {}
    for name, listed in listed_columns(view).items():
        if name not in schemas:
            continue
        columns = schemas[name]
        wanted = None if listed is None else {*spec.sources[name].key, *listed}
        taken[name] = [[c, t] for c, t in columns.items() if wanted is None or c in wanted]
    return taken


def output_key(spec: PipelineSpec, view: View) -> list[str]:
    """The column(s) that identify an output row (what each kind's `output_key` says)."""
    return [*view.definition.output_key(lambda name: spec.sources[name].key)]


def _place(spec: PipelineSpec, path: str) -> str:
    """A table's path as recorded: relative to the pipeline's storage when inside it, so a
    lakehouse moved whole is the same definition."""
    try:
        return Path(path).relative_to(spec.storage).as_posix()
    except ValueError:
        return path


def view_definition(spec: PipelineSpec, view: View, schemas: Mapping[str, Mapping[str, str]]) -> Definition:
    """The view's definition at the input schemas given (name -> columns; an input missing from
    `schemas` records no columns)."""
    settings = _plain(view.definition)
    inputs = {
        name: {"path": _place(spec, spec.sources[name].path), "key": recorded_key(spec.sources[name].key)}
        for name in view.inputs
    }
    return {
        "format": FORMAT,
        "kind": view.kind.value,
        "settings": settings,
        "inputs": inputs,
        "output_key": output_key(spec, view),
        "columns": taken_columns(spec, view, schemas),
    }


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _spec_part(definition: Definition) -> Definition:
    return {k: v for k, v in definition.items() if k != "columns"}


def fingerprint(definition: Definition) -> str:
    """What the batch log keeps of a definition (the batch commit keeps it whole):
    `<format>:<digest of the spec's part>.<digest of the whole>`, so the plan can compare the
    spec's part alone, before it reads any schema."""
    return f"{definition.get('format')}:{_digest(_spec_part(definition))}.{_digest(definition)}"


def comparable(recorded: Definition | str | None) -> bool:
    """Can a recorded definition (whole, or its fingerprint) be compared with today's? (None:
    written before lakejoin recorded definitions; another format: by another lakejoin.)"""
    if isinstance(recorded, str):
        return recorded.startswith(f"{FORMAT}:")
    return isinstance(recorded, dict) and recorded.get("format") == FORMAT


def same(recorded: str, definition: Definition, *, columns: bool = True) -> bool:
    """Does a comparable fingerprint match `definition` (its spec's part alone, without `columns`)?"""
    spec_digest, whole_digest = recorded.split(":", 1)[1].split(".", 1)
    if columns:
        return whole_digest == _digest(definition)
    return spec_digest == _digest(_spec_part(definition))


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        out = {}
        for i, v in enumerate(value):
            out.update(_flat(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def _shown(name: str, value: Any) -> str:
    if value is None:  # a columns list left out takes all of the table's (a right or dimension: but its key)
        return "all" if name.endswith("columns") else "none"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def _column_differences(old: Mapping[str, list], new: Mapping[str, list]) -> list[str]:
    said: list[str] = []
    for table in sorted(set(old) | set(new)):
        if table not in old or table not in new:
            continue  # a new or dropped input: its settings say so
        before: dict[str, str] = {name: kind for name, kind in old[table]}
        after: dict[str, str] = {name: kind for name, kind in new[table]}
        for column in after:
            if column not in before:
                said.append(f"{table} gained column '{column}' ({after[column]})")
            elif before[column] != after[column]:
                said.append(f"{table}.{column} {before[column]} -> {after[column]}")
        said += [f"{table} lost column '{c}'" for c in before if c not in after]
        if before == after and list(before) != list(after):
            said.append(f"the columns of {table} are in another order: {', '.join(after)}")
    return said


def differences(old: Definition, new: Definition, *, columns: bool = True) -> list[str]:
    """What changed from `old` to `new`, one phrase a change (`how: left -> inner`), settings
    first; with `columns=False`, only the spec's part (the plan's check before it reads schemas)."""
    said: list[str] = []
    if old.get("kind") != new.get("kind"):
        said.append(f"kind: {old.get('kind')} -> {new.get('kind')}")
    parts = ("settings", "inputs", "output_key")
    before = _flat({part: old.get(part) for part in parts})
    after = _flat({part: new.get(part) for part in parts})
    for name in sorted(set(before) | set(after), key=lambda n: (not n.startswith("settings"), n)):
        if before.get(name, "absent") != after.get(name, "absent"):
            shown = name.removeprefix("settings.")
            said.append(f"{shown}: {_shown(name, before.get(name))} -> {_shown(name, after.get(name))}")
    if columns:
        said += _column_differences(old.get("columns", {}), new.get("columns", {}))
    return said
