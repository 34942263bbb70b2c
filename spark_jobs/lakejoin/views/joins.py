"""Joins that several view kinds build their recompute from (fk_join's right side, enrich's
dimensions). Apart from the kinds because no view kind imports another: what two of them share
lives here, below both.
"""

from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING

from lakejoin.spec.model import Columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_WANTED = "_lj_right_key"


def matching(left: DataFrame, columns: Columns, right: DataFrame, right_columns: Columns) -> Column:
    """The join condition `left.columns == right.right_columns`, column by column in order (a
    null in any column matches nothing)."""
    pairs = (left[a] == right[b] for a, b in zip(columns, right_columns, strict=True))
    return reduce(lambda a, b: a & b, pairs)


def wanted_names(width: int) -> list[str]:
    """The names a frame of wanted keys gives their columns (`_lj_right_key`, or `_lj_right_key_0`...)."""
    return [_WANTED] if width == 1 else [f"{_WANTED}_{i}" for i in range(width)]


def referenced_right_rows(
    right: DataFrame, left_rows: DataFrame, fk: Columns, right_key: Columns
) -> DataFrame:
    """The right rows that the given left rows reference (the only ones a recompute needs)."""
    from pyspark.sql import functions as F

    from lakejoin.delta.change_feed import null_key

    names = wanted_names(len(fk))
    wanted = (
        left_rows.select(*[F.col(c).alias(n) for c, n in zip(fk, names, strict=True)])
        .where(~null_key(names))
        .distinct()
    )
    return right.join(F.broadcast(wanted), matching(right, right_key, wanted, names), how="left_semi")


def previous_rows(rows: DataFrame, changes: DataFrame, key: Columns) -> DataFrame:
    """`rows` of a source at the pin as they were at the previous batch's pins: the rows of
    the keys that changed since (`changes`, the source's net change) are their rows before the
    change, or none where the key had no row; the others are as they are. The keys of `changes`
    must be among those `rows` was read for, or have no row at the pin."""
    from lakejoin.delta.change_feed import before_rows
    from lakejoin.delta.sql_text import spark_columns

    unchanged = rows.join(changes.select(*key), on=list(key), how="left_anti")
    return unchanged.unionByName(before_rows(changes).select(*spark_columns(rows.columns)))
