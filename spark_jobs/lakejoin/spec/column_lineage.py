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


# Each kind's rule is its module's `lineage` (spec/kinds/<kind>.py, its registry entry's;
# engine/lineage.py calls it): the lineage of each of `output_columns` (the view's output, in
# order) from the inputs' columns (`schemas`: each input's columns at the batch's pins, as the
# plan read them). An output column no rule accounts for has no origin (an empty tuple), never a
# guessed one. The rules share what follows.


def lineage_of(fields: dict[str, tuple[Origin, ...]], matched: Sequence[Origin]) -> ColumnLineage:
    """The lineage of `fields`, matched on each of `matched` once, in its order."""
    return ColumnLineage(fields=fields, matched_on=tuple(dict.fromkeys(matched)))


def origins(source: str, columns: Sequence[str], subtype: str) -> tuple[Origin, ...]:
    """Each of `columns` of `source`, made into an output column (or matched on) as `subtype` says."""
    return tuple(Origin(source, c, subtype) for c in columns)


def joined_fields(
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
