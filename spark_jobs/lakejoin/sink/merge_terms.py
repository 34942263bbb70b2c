"""What every way of writing a keyed table shares: the source's flag columns, the counts a write
reports, and the predicates that compare a source row with the table's row of the same key."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakejoin.delta.sql_text import spark_column

if TYPE_CHECKING:
    from pyspark.sql import Column

PRESENT = "_lj_present"
KEEP = "_lj_keep"  # a source row whose KEEP is false deletes its key


@dataclass(frozen=True)
class MergeCounts:
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    applied: bool = True
    version: int | None = None  # the batch commit's version, when the write carried one
    keys: int = 0  # the keys the write covered (an incremental batch: its affected keys)


def same_key(a: str, b: str, key: Sequence[str]) -> Column:
    """The rows of the frames aliased `a` and `b` hold the same key."""
    from pyspark.sql import functions as F

    on = F.lit(True)
    for column in key:
        on = on & (spark_column(column, a) == spark_column(column, b))
    return on


def values_differ(a: str, b: str, values: Sequence[str]) -> Column:
    """Any of `values` differs between the frames aliased `a` and `b` (null equals null)."""
    from pyspark.sql import functions as F

    differs = F.lit(False)
    for column in values:
        differs = differs | ~spark_column(column, a).eqNullSafe(spark_column(column, b))
    return differs


def any_of(column: Column, values: Sequence[Any]) -> Column:
    """`column` equals one of `values` (not empty), as equalities joined by OR in a balanced
    tree (a predicate Delta skips files on; the tree keeps the expression shallow)."""
    from pyspark.sql import functions as F

    if len(values) == 1:
        return column == F.lit(values[0])
    half = len(values) // 2
    return any_of(column, values[:half]) | any_of(column, values[half:])
