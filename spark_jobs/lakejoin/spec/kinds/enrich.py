"""enrich: each fact joined with its dimensions' rows (spec/model.Enrich), looked up when the
fact's batch runs or propagated on a dimension change. Its parser, its check against the inputs'
columns, its column lineage and its registry entry (`DECLARED`, listed in spec/registry.py); its
batch logic is views/enrich.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from lakejoin.spec.column_lineage import JOIN, ColumnLineage, joined_fields, lineage_of, origins
from lakejoin.spec.kind import Kind, Measure
from lakejoin.spec.kind_parts import (
    FANOUT,
    FANOUT_FIELDS,
    FANOUT_LABELS,
    FANOUT_SETTINGS,
    Known,
    Schemas,
    bounded_number,
    carried_columns,
    check_columns,
    check_fk,
    choice,
    column_list,
    fanout_settings,
    join_how,
    source_name,
)
from lakejoin.spec.model import Dimension, Enrich, EnrichMode, JoinHow, PipelineSpec, quoted
from lakejoin.spec.settings import Setting, Settings, Shape
from lakejoin.spec.yaml_lines import SpecReader

DIMENSION = Settings(
    "a dimension table and the fact column(s) naming its key",
    (
        Setting("table", Shape.NAME, "the dimension table: a source or a view", required=True),
        Setting("fk", Shape.KEY, "the fact column(s) naming the dimension key, in its order", required=True),
        Setting(
            "how",
            Shape.CHOICE,
            "left: every fact, null-filled without its row; inner: only facts whose row exists",
            default=JoinHow.LEFT,
            choices=JoinHow,
        ),
        Setting("prefix", Shape.PREFIX, "put before each of its columns' names in the output"),
        Setting("columns", Shape.COLUMNS, "its columns to carry (default: all but its key)"),
    ),
)
SETTINGS = Settings(
    "a fact table enriched from dimension tables",
    (
        Setting(
            "fact", Shape.NAME, "the fact table: a source or a view; one output row per fact", required=True
        ),
        Setting(
            "mode",
            Shape.CHOICE,
            "lookup: a fact keeps the dimensions of its batch; propagate: a dimension change rewrites it",
            default=EnrichMode.LOOKUP,
            choices=EnrichMode,
        ),
        Setting(
            "dimensions",
            Shape.LIST,
            "the dimension tables, in the output's order",
            required=True,
            of=DIMENSION,
        ),
        *(replace(s, only_with=("mode", EnrichMode.PROPAGATE.value)) for s in FANOUT_FIELDS),
        Setting(
            "broadcast_limit_mb",
            Shape.NUMBER,
            "a dimension larger than this on disk (MB) is shuffled, not broadcast",
            default=64.0,
            least=0,
            most=8192.0,
        ),
    ),
)


def parse(reader: SpecReader, raw: Any, key: str, known: Known) -> Enrich:
    """A view's `enrich:` block (`key`), checked and built into its definition."""
    raw = reader.mapping(raw, key)
    reader.only(raw, key, SETTINGS.names())
    fact = source_name(reader, raw, key, "fact", known)
    mode = choice(reader, raw, key, SETTINGS["mode"])
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
        reader.only(body, at, DIMENSION.names())
        table = source_name(reader, body, at, "table", known)
        fk = reader.key_columns(body, at, "fk")
        if table == fact:
            raise reader.fail(f"{at}.table", f"'{table}' is the fact table", "enrich from another table")
        prefix = reader.text(body, at, "prefix", required=False) or ""
        if prefix:
            reader.check_identifier(prefix, f"{at}.prefix")
        dimension = Dimension(
            table,
            fk,
            join_how(reader, body, at, DIMENSION["how"]),
            prefix,
            column_list(reader, body, at, "columns"),
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
    threshold, min_rows = fanout_settings(reader, raw, key)
    limit = bounded_number(reader, raw, key, SETTINGS["broadcast_limit_mb"])
    return Enrich(fact, mode, tuple(dimensions), threshold, limit, min_rows)


def check_schemas(
    spec: PipelineSpec, enrich: Enrich, base: str, schemas: Mapping[str, Mapping[str, str]]
) -> None:
    """Check a enrich against the columns of the tables it reads; an error names the setting."""
    fact = spec.sources[enrich.fact]
    fact_columns = schemas[fact.name]
    taken = {c: f"the fact table '{fact.name}'" for c in fact_columns}
    for i, dimension in enumerate(enrich.dimensions):
        at = f"{base}.dimensions[{i}]"
        table = spec.sources[dimension.table]
        columns = schemas[table.name]
        fact_table = f"fact table '{fact.name}'"
        check_fk(spec, f"{at}.fk", dimension.fk, fact_table, fact_columns, "dimension", table, columns)
        check_columns(spec, f"{at}.columns", dimension.columns, f"dimension table '{table.name}'", columns)
        for column in carried_columns(dimension.columns, columns, table.key):
            name = dimension.prefix + column
            if name in taken:
                raise spec.error(
                    f"{at}.prefix" if dimension.prefix else at,
                    f"column '{name}' of dimension '{table.name}' clashes with a column of {taken[name]}",
                    "give the dimension a 'prefix: <name>_' of its own, or choose other columns",
                )
            taken[name] = f"dimension '{table.name}'"


def lineage(spec: PipelineSpec, d: Enrich, schemas: Schemas, output_columns: Sequence[str]) -> ColumnLineage:
    """The fact columns keep their names, each dimension's come with its prefix; each dimension's
    fk and key decide which rows meet."""
    dimensions = [(dim.table, schemas[dim.table], dim.prefix) for dim in d.dimensions]
    fields = joined_fields(output_columns, (d.fact, schemas[d.fact], ""), dimensions)
    matched = tuple(
        o
        for dim in d.dimensions
        for o in (*origins(d.fact, dim.fk, JOIN), *origins(dim.table, spec.sources[dim.table].key, JOIN))
    )
    return lineage_of(fields, matched)


DECLARED = Kind(
    parse,
    check_schemas,
    "lakejoin.views.enrich:EnrichView",
    FANOUT_LABELS,
    measures=(Measure("missing_dimension", "facts whose row of some dimension is missing"),),
    waiting="the oldest fact still without a dimension row",
    waits="missing_dimension",
    lineage=lineage,
    performance=FANOUT_SETTINGS | {"broadcast_limit_mb"},
    key_fields=frozenset({"fk"}),  # each dimension's
    validations=("changed_rows",),
    settings=SETTINGS,
)
