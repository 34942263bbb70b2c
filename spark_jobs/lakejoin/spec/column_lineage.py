"""Which input columns each output column of a view comes from, read off the spec (issue 39).

OpenLineage's column lineage, without Spark: the spec says how a kind builds its rows, and the
output's column names say the rest (a prefix, a list's `into`). Each output column names the
input columns it is made of (`Origin`), DIRECT in OpenLineage's terms; the columns that only
decide which rows meet (the fk and the key it points at, a list's elements, a rekey's derived
key) are the view's INDIRECT inputs (`ColumnLineage.matched_on`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lakejoin.spec.kind_parts import carried_columns
from lakejoin.spec.model import Enrich, FkJoin, ListJoin, PipelineSpec, Rekey

# How an output column is made of its inputs (OpenLineage's DIRECT subtypes).
IDENTITY = "IDENTITY"  # the input's value as it is
TRANSFORMATION = "TRANSFORMATION"  # a value computed from it
AGGREGATION = "AGGREGATION"  # collected from several rows (a list's joined elements)

# Why an input column decides which rows an output holds (OpenLineage's INDIRECT subtypes).
JOIN = "JOIN"
GROUP_BY = "GROUP_BY"


@dataclass(frozen=True)
class Origin:
    """One input column an output column is made of."""

    source: str  # the spec's name of the input (a source, or a view read as one)
    column: str
    subtype: str = IDENTITY


@dataclass(frozen=True)
class ColumnLineage:
    fields: dict[str, tuple[Origin, ...]]  # each output column, in the output's order
    matched_on: tuple[Origin, ...]  # the columns that decide which rows meet (INDIRECT)


Schemas = Mapping[str, Mapping[str, str]]


# Each kind's rule (its registry entry's `lineage`, spec/registry.py; engine/lineage.py calls
# it): the lineage of each of `output_columns` (the view's output, in order) from the inputs'
# columns (`schemas`: each input's columns at the batch's pins, as the plan read them). An output
# column no rule accounts for has no origin (an empty tuple), never a guessed one.


def fk_join_lineage(
    spec: PipelineSpec, d: FkJoin, schemas: Schemas, output_columns: Sequence[str]
) -> ColumnLineage:
    """The left columns keep their names, the right ones come with the right prefix; the fk and
    the right key decide which rows meet."""
    fields = _joined(
        output_columns, (d.left, schemas[d.left], ""), [(d.right, schemas[d.right], d.right_prefix)]
    )
    right_key = spec.sources[d.right].key
    return _lineage(fields, (*_each(d.left, d.fk, JOIN), *_each(d.right, right_key, JOIN)))


def enrich_lineage(
    spec: PipelineSpec, d: Enrich, schemas: Schemas, output_columns: Sequence[str]
) -> ColumnLineage:
    """The fact columns keep their names, each dimension's come with its prefix; each dimension's
    fk and key decide which rows meet."""
    dimensions = [(dim.table, schemas[dim.table], dim.prefix) for dim in d.dimensions]
    fields = _joined(output_columns, (d.fact, schemas[d.fact], ""), dimensions)
    matched = tuple(
        o
        for dim in d.dimensions
        for o in (*_each(d.fact, dim.fk, JOIN), *_each(dim.table, spec.sources[dim.table].key, JOIN))
    )
    return _lineage(fields, matched)


def list_join_lineage(
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
                *_each(d.right, (*right.key, *taken), AGGREGATION),
            )
        else:
            fields[column] = (Origin(d.left, column),) if column in schemas[d.left] else ()
    return _lineage(fields, (Origin(d.left, d.list, JOIN), *_each(d.right, right.key, JOIN)))


def rekey_lineage(
    spec: PipelineSpec, d: Rekey, schemas: Schemas, output_columns: Sequence[str]
) -> ColumnLineage:
    """Every column is the master's, grouped by the derived key."""
    fields: dict[str, tuple[Origin, ...]] = {
        c: (Origin(d.source, c),) if c in schemas[d.source] else () for c in output_columns
    }
    return _lineage(fields, _each(d.source, d.key, GROUP_BY))


def _lineage(fields: dict[str, tuple[Origin, ...]], matched: Sequence[Origin]) -> ColumnLineage:
    return ColumnLineage(fields=fields, matched_on=tuple(dict.fromkeys(matched)))


def _each(source: str, columns: Sequence[str], subtype: str) -> tuple[Origin, ...]:
    return tuple(Origin(source, c, subtype) for c in columns)


def _joined(
    output_columns: Sequence[str],
    driving: tuple[str, Mapping[str, str], str],
    others: Sequence[tuple[str, Mapping[str, str], str]],
) -> dict[str, tuple[Origin, ...]]:
    """The driving table's columns keep their names; each other table's come with its prefix
    (the first whose prefixed column matches, as the spec's clash checks leave one)."""
    name, columns, _ = driving
    fields: dict[str, tuple[Origin, ...]] = {}
    for column in output_columns:
        if column in columns:
            fields[column] = (Origin(name, column),)
            continue
        fields[column] = next(
            (
                (Origin(table, column[len(prefix) :]),)
                for table, table_columns, prefix in others
                if column.startswith(prefix) and column[len(prefix) :] in table_columns
            ),
            (),
        )
    return fields
