"""fk_join: each left row joined with the right row its fk names (spec/model.FkJoin). Its
parser, its check against the inputs' columns, its column lineage and its registry entry
(`DECLARED`, listed in spec/registry.py); its batch logic is views/fk_join.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lakejoin.spec.column_lineage import JOIN, ColumnLineage, joined_fields, lineage_of, origins
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
    check_fk,
    column_list,
    fanout_settings,
    join_how,
    source_name,
)
from lakejoin.spec.model import FkJoin, JoinHow, PipelineSpec
from lakejoin.spec.settings import Setting, Settings, Shape
from lakejoin.spec.yaml_lines import SpecReader

SETTINGS = Settings(
    "each left row joined with the right row its fk names",
    (
        LEFT,
        RIGHT,
        Setting("fk", Shape.KEY, "the left column(s) naming the right key, in its order", required=True),
        Setting(
            "how",
            Shape.CHOICE,
            "inner: only left rows whose right row exists; left: every left row, null-filled",
            default=JoinHow.INNER,
            choices=JoinHow,
        ),
        RIGHT_COLUMNS,
        Setting("right_prefix", Shape.PREFIX, "put before each right column's name in the output"),
        *FANOUT_FIELDS,
    ),
)


def parse(reader: SpecReader, raw: Any, key: str, known: Known) -> FkJoin:
    """A view's `fk_join:` block (`key`), checked and built into its definition."""
    raw = reader.mapping(raw, key)
    reader.only(raw, key, SETTINGS.names())
    left = source_name(reader, raw, key, "left", known)
    right = source_name(reader, raw, key, "right", known)
    fk = reader.key_columns(raw, key, "fk")
    how = join_how(reader, raw, key, SETTINGS["how"])
    columns = column_list(reader, raw, key, "right_columns")
    prefix = reader.text(raw, key, "right_prefix", required=False) or ""
    if prefix:
        reader.check_identifier(prefix, f"{key}.right_prefix")
    threshold, min_rows = fanout_settings(reader, raw, key)
    return FkJoin(left, right, fk, how, columns, prefix, threshold, min_rows)


def check_schemas(
    spec: PipelineSpec, join: FkJoin, base: str, schemas: Mapping[str, Mapping[str, str]]
) -> None:
    """Check a fk_join against the columns of the tables it reads; an error names the setting."""
    left, right = spec.sources[join.left], spec.sources[join.right]
    left_columns, right_columns = schemas[left.name], schemas[right.name]
    check_fk(
        spec, f"{base}.fk", join.fk, f"left table '{left.name}'", left_columns, "right", right, right_columns
    )
    check_columns(
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


def lineage(spec: PipelineSpec, d: FkJoin, schemas: Schemas, output_columns: Sequence[str]) -> ColumnLineage:
    """The left columns keep their names, the right ones come with the right prefix; the fk and
    the right key decide which rows meet."""
    fields = joined_fields(
        output_columns, (d.left, schemas[d.left], ""), [(d.right, schemas[d.right], d.right_prefix)]
    )
    right_key = spec.sources[d.right].key
    return lineage_of(fields, (*origins(d.left, d.fk, JOIN), *origins(d.right, right_key, JOIN)))


DECLARED = Kind(
    parse,
    check_schemas,
    "lakejoin.views.fk_join:FkJoinView",
    FANOUT_LABELS,
    measures=(
        Measure(
            "missing_right",
            "left rows whose fk finds no right row (null-filled, or held back by an inner join)",
        ),
        Measure("null_fk", "left rows whose fk holds a null", from_changes=lambda d: (d.left, d.fk)),
    ),
    waiting="the oldest left row still without its right row",
    waits="missing_right",
    lineage=lineage,
    performance=FANOUT_SETTINGS,
    key_fields=frozenset({"fk"}),
    validations=("changed_rows",),
    settings=SETTINGS,
)
