"""rekey: the master table keyed by another of its columns (spec/model.Rekey). Its parser, its
check against the master's columns, its column lineage and its registry entry (`DECLARED`,
listed in spec/registry.py); its batch logic is views/rekey.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lakejoin.spec.column_lineage import GROUP_BY, ColumnLineage, Origin, lineage_of, origins
from lakejoin.spec.kind import Kind, Measure
from lakejoin.spec.kind_parts import Known, Schemas, check_columns, choice, column_list, source_name
from lakejoin.spec.model import OnConflict, PipelineSpec, Rekey, quoted, shown
from lakejoin.spec.settings import Setting, Settings, Shape
from lakejoin.spec.yaml_lines import SpecReader, describe

SETTINGS = Settings(
    "the master table keyed by other columns of it",
    (
        Setting("source", Shape.NAME, "the master table: a source or a view", required=True),
        Setting("key", Shape.KEY, "the master column(s) that key the output", required=True),
        Setting("columns", Shape.COLUMNS, "the master columns to carry (default: all)"),
        Setting(
            "unique",
            Shape.FLAG,
            "true: one row per derived key; false: one per (derived key, master key)",
            default=True,
        ),
        Setting(
            "on_conflict",
            Shape.CHOICE,
            "two masters claim one derived key: fail the batch, or the latest change wins",
            default=OnConflict.FAIL,
            choices=OnConflict,
            only_with=("unique", True),
        ),
    ),
)


def parse(reader: SpecReader, raw: Any, key: str, known: Known) -> Rekey:
    """A view's `rekey:` block (`key`), checked and built into its definition."""
    raw = reader.mapping(raw, key)
    reader.only(raw, key, SETTINGS.names())
    source = source_name(reader, raw, key, "source", known)
    column = reader.key_columns(raw, key, "key")
    unique = raw.get("unique", SETTINGS["unique"].default)
    if not isinstance(unique, bool):
        raise reader.fail(f"{key}.unique", f"'unique' must be true or false, found {describe(unique)}")
    if not unique and "on_conflict" in raw:
        raise reader.fail(
            f"{key}.on_conflict",
            "on_conflict applies only to a unique rekey: with 'unique: false' every "
            "(derived key, master key) pair is its own row, so nothing can conflict",
            "remove on_conflict, or set 'unique: true'",
        )
    on_conflict = choice(reader, raw, key, SETTINGS["on_conflict"])
    return Rekey(source, column, column_list(reader, raw, key, "columns"), unique, on_conflict)


def check_schemas(
    spec: PipelineSpec, rekey: Rekey, base: str, schemas: Mapping[str, Mapping[str, str]]
) -> None:
    """Check a rekey against the columns of the tables it reads; an error names the setting."""
    master = spec.sources[rekey.source]
    columns = schemas[master.name]
    for i, column in enumerate(rekey.key):
        if column not in columns:
            raise spec.error(
                f"{base}.key[{i}]" if len(rekey.key) > 1 else f"{base}.key",
                f"rekey column '{column}' is not in the master table '{master.name}'",
                f"use one of its columns: {', '.join(columns)}",
            )
    if set(rekey.key) == set(master.key):
        raise spec.error(
            f"{base}.key",
            f"{quoted(rekey.key)} is already the key of '{master.name}'",
            "re-key by another column; the master key is kept in every derived row",
        )
    shared = [c for c in rekey.key if c in master.key]
    if shared and not rekey.unique:
        raise spec.error(
            f"{base}.key",
            f"the derived key {shown(rekey.key)} shares {', '.join(shared)} with the key of "
            f"'{master.name}' ({shown(master.key)}); with 'unique: false' a row is keyed by both",
            "re-key by columns outside the master key",
        )
    check_columns(spec, f"{base}.columns", rekey.columns, f"master table '{master.name}'", columns)


def lineage(spec: PipelineSpec, d: Rekey, schemas: Schemas, output_columns: Sequence[str]) -> ColumnLineage:
    """Every column is the master's, grouped by the derived key."""
    fields: dict[str, tuple[Origin, ...]] = {
        c: (Origin(d.source, c),) if c in schemas[d.source] else () for c in output_columns
    }
    return lineage_of(fields, origins(d.source, d.key, GROUP_BY))


DECLARED = Kind(
    parse,
    check_schemas,
    "lakejoin.views.rekey:RekeyView",
    {"conflicts": "conflicts", "null_keys_dropped": "null keys dropped"},
    measures=(
        # Counted from the master's changes alone: a master row with a null derived key is
        # dropped, so no output row can carry its flag.
        Measure(
            "null_keys",
            "master rows dropped for a null derived key",
            flagged=False,
            from_changes=lambda d: (d.source, d.key),
        ),
        Measure("conflicts", "derived keys claimed by more than one master"),
    ),
    waiting="the oldest conflict not yet resolved",
    # A conflict waits for its masters to part: `late` counts those resolved.
    waits="conflicts",
    lineage=lineage,
    state="rekey index",
    key_fields=frozenset({"key"}),
    validations=("changed_rows",),
    settings=SETTINGS,
)
