"""Each view kind's check against the columns of the tables it reads (name -> Spark type), at
the versions a batch pinned: `check_<kind>(spec, definition, base, schemas)`, `base` the view's
key in the spec (`views.<name>.<kind>`). spec/schema_checks.py calls them through the kind
registry (spec/registry.py), after the checks every kind shares.

Errors point at the spec line of the setting that does not fit, and say what to do.
"""

from __future__ import annotations

from collections.abc import Mapping

from lakejoin.spec.kind_parts import carried_columns
from lakejoin.spec.model import Enrich, FkJoin, Key, ListJoin, PipelineSpec, Rekey, Source, quoted, shown


def _check_columns(
    spec: PipelineSpec, key: str, chosen: tuple[str, ...] | None, table: str, columns: Mapping[str, str]
) -> None:
    for i, column in enumerate(chosen or ()):
        if column not in columns:
            raise spec.error(
                f"{key}[{i}]",
                f"column '{column}' is not in the {table}",
                f"use one of its columns: {', '.join(columns)}",
            )


def _check_fk(
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


def element_type(right: Source, right_columns: Mapping[str, str]) -> str:
    """The type a list_join's list elements must have: the right key's type, or for a key of
    several columns a struct of them, by name and in order (`struct<tenant_id:string,id:bigint>`)."""
    if len(right.key) == 1:
        return right_columns[right.key[0]]
    return "struct<" + ",".join(f"{c}:{right_columns[c]}" for c in right.key) + ">"


def check_fk_join(
    spec: PipelineSpec, join: FkJoin, base: str, schemas: Mapping[str, Mapping[str, str]]
) -> None:
    left, right = spec.sources[join.left], spec.sources[join.right]
    left_columns, right_columns = schemas[left.name], schemas[right.name]
    _check_fk(
        spec, f"{base}.fk", join.fk, f"left table '{left.name}'", left_columns, "right", right, right_columns
    )
    _check_columns(
        spec, f"{base}.right_columns", join.right_columns, f"right table '{right.name}'", right_columns
    )
    chosen = carried_columns(join.right_columns, right_columns, right.key)
    clashes = sorted(set(left_columns) & {join.right_prefix + c for c in chosen})
    if clashes:
        raise spec.error(
            f"{base}.right_columns" if join.right_columns else base,
            f"right columns {clashes} clash with left columns of the same name",
            "set 'right_prefix: <prefix>_' or choose other right_columns",
        )


def check_list_join(
    spec: PipelineSpec, join: ListJoin, base: str, schemas: Mapping[str, Mapping[str, str]]
) -> None:
    left, right = spec.sources[join.left], spec.sources[join.right]
    left_columns, right_columns = schemas[left.name], schemas[right.name]
    if join.list not in left_columns:
        raise spec.error(
            f"{base}.list",
            f"list column '{join.list}' is not in the left table '{left.name}'",
            f"use one of its columns: {', '.join(left_columns)}",
        )
    found = left_columns[join.list]
    wanted = f"array<{element_type(right, right_columns)}>"
    if not found.startswith("array<"):
        raise spec.error(
            f"{base}.list",
            f"list column '{join.list}' of the left table '{left.name}' is {found}, not an array",
            f"store the element keys as an {wanted} (for example with split() or array())",
        )
    if found != wanted:
        raise spec.error(
            f"{base}.list",
            f"list column '{join.list}' is {found} but the right key '{right.name}.{shown(right.key)}' "
            f"is {element_type(right, right_columns)}",
            f"make the list an {wanted} in the source table"
            + (
                " (each element a struct of the right key's columns, by name and in order)"
                if len(right.key) > 1
                else ""
            ),
        )
    if join.list in left.key:
        raise spec.error(f"{base}.list", "the list column cannot be the left key", "name the list column")
    _check_columns(
        spec, f"{base}.right_columns", join.right_columns, f"right table '{right.name}'", right_columns
    )
    if join.into != join.list and join.into in left_columns:
        raise spec.error(
            f"{base}.into",
            f"'{join.into}' is already a column of the left table '{left.name}'",
            "choose another name for the joined list",
        )


def check_rekey(
    spec: PipelineSpec, rekey: Rekey, base: str, schemas: Mapping[str, Mapping[str, str]]
) -> None:
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
    _check_columns(spec, f"{base}.columns", rekey.columns, f"master table '{master.name}'", columns)


def check_enrich(
    spec: PipelineSpec, enrich: Enrich, base: str, schemas: Mapping[str, Mapping[str, str]]
) -> None:
    fact = spec.sources[enrich.fact]
    fact_columns = schemas[fact.name]
    taken = {c: f"the fact table '{fact.name}'" for c in fact_columns}
    for i, dimension in enumerate(enrich.dimensions):
        at = f"{base}.dimensions[{i}]"
        table = spec.sources[dimension.table]
        columns = schemas[table.name]
        fact_table = f"fact table '{fact.name}'"
        _check_fk(spec, f"{at}.fk", dimension.fk, fact_table, fact_columns, "dimension", table, columns)
        _check_columns(spec, f"{at}.columns", dimension.columns, f"dimension table '{table.name}'", columns)
        for column in carried_columns(dimension.columns, columns, table.key):
            name = dimension.prefix + column
            if name in taken:
                raise spec.error(
                    f"{at}.prefix" if dimension.prefix else at,
                    f"column '{name}' of dimension '{table.name}' clashes with a column of {taken[name]}",
                    "give the dimension a 'prefix: <name>_' of its own, or choose other columns",
                )
            taken[name] = f"dimension '{table.name}'"
