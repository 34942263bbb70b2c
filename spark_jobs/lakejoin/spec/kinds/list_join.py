"""list_join: each left row's list of right keys replaced by the right rows they name
(spec/model.ListJoin). Its parser, its check against the inputs' columns, its column lineage and
its registry entry (`DECLARED`, listed in spec/registry.py); its batch logic is views/list_join.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lakejoin.spec.column_lineage import (
    AGGREGATION,
    JOIN,
    TRANSFORMATION,
    ColumnLineage,
    Origin,
    lineage_of,
    origins,
)
from lakejoin.spec.kind import Kind, Measure
from lakejoin.spec.kind_parts import (
    FANOUT_FIELDS,
    FANOUT_LABELS,
    FANOUT_SETTINGS,
    LEFT,
    RIGHT,
    RIGHT_COLUMNS,
    Known,
    Schemas,
    carried_columns,
    check_columns,
    choice,
    column_list,
    fanout_settings,
    source_name,
)
from lakejoin.spec.model import Duplicates, ListJoin, PipelineSpec, Source, shown
from lakejoin.spec.settings import Setting, Settings, Shape
from lakejoin.spec.yaml_lines import SpecReader

SETTINGS = Settings(
    "each left row's list of right keys replaced by the right rows they name",
    (
        LEFT,
        Setting("list", Shape.NAME, "the left column holding the list of right keys", required=True),
        RIGHT,
        Setting("into", Shape.NAME, "the output column holding the joined list", required=True),
        Setting(
            "duplicates",
            Shape.CHOICE,
            "a key listed twice in one list: keep every occurrence, or drop all but the first",
            default=Duplicates.KEEP,
            choices=Duplicates,
        ),
        RIGHT_COLUMNS,
        *FANOUT_FIELDS,
    ),
)


def parse(reader: SpecReader, raw: Any, key: str, known: Known) -> ListJoin:
    """A view's `list_join:` block (`key`), checked and built into its definition."""
    raw = reader.mapping(raw, key)
    reader.only(raw, key, SETTINGS.names())
    left = source_name(reader, raw, key, "left", known)
    right = source_name(reader, raw, key, "right", known)
    column = reader.identifier(raw, key, "list")
    into = reader.identifier(raw, key, "into")
    assert column and into
    duplicates = choice(reader, raw, key, SETTINGS["duplicates"])
    columns = column_list(reader, raw, key, "right_columns")
    threshold, min_rows = fanout_settings(reader, raw, key)
    return ListJoin(left, column, right, into, duplicates, columns, threshold, min_rows)


def element_type(right: Source, right_columns: Mapping[str, str]) -> str:
    """The type a list_join's list elements must have: the right key's type, or for a key of
    several columns a struct of them, by name and in order (`struct<tenant_id:string,id:bigint>`)."""
    if len(right.key) == 1:
        return right_columns[right.key[0]]
    return "struct<" + ",".join(f"{c}:{right_columns[c]}" for c in right.key) + ">"


def check_schemas(
    spec: PipelineSpec, join: ListJoin, base: str, schemas: Mapping[str, Mapping[str, str]]
) -> None:
    """Check a list_join against the columns of the tables it reads; an error names the setting."""
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
    check_columns(
        spec, f"{base}.right_columns", join.right_columns, f"right table '{right.name}'", right_columns
    )
    if join.into != join.list and join.into in left_columns:
        raise spec.error(
            f"{base}.into",
            f"'{join.into}' is already a column of the left table '{left.name}'",
            "choose another name for the joined list",
        )


def lineage(
    spec: PipelineSpec, d: ListJoin, schemas: Schemas, output_columns: Sequence[str]
) -> ColumnLineage:
    """The joined list (`into`) is made of the list and the right rows' key and carried columns;
    the other columns are the left's; the list and the right key decide which rows meet."""
    right = spec.sources[d.right]
    taken = carried_columns(d.right_columns, schemas[d.right], right.key)
    fields: dict[str, tuple[Origin, ...]] = {}
    for column in output_columns:
        if column == d.into:
            fields[column] = (
                Origin(d.left, d.list, TRANSFORMATION),
                *origins(d.right, (*right.key, *taken), AGGREGATION),
            )
        else:
            fields[column] = (Origin(d.left, column),) if column in schemas[d.left] else ()
    return lineage_of(fields, (Origin(d.left, d.list, JOIN), *origins(d.right, right.key, JOIN)))


DECLARED = Kind(
    parse,
    check_schemas,
    "lakejoin.views.list_join:ListJoinView",
    {
        "composite_rows_rebuilt": "composite rows rebuilt",
        "left_rows_carried": "carried without re-join",
        **FANOUT_LABELS,
    },
    measures=(
        Measure("missing_elements", "list elements without a right row"),
        Measure("lists_with_missing", "left rows whose list has an element without a right row"),
    ),
    waiting="the oldest list still waiting for an element's right row",
    waits="lists_with_missing",
    lineage=lineage,
    performance=FANOUT_SETTINGS,
    validations=("changed_rows", "list_lengths"),
    settings=SETTINGS,
)
