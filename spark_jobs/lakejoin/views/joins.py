"""Joins that several view kinds build their recompute from (fk_join's right side, enrich's
dimensions). Apart from the kinds because no view kind imports another: what two of them share
lives here, below both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_WANTED = "_lj_right_key"


def referenced_right_rows(right: DataFrame, left_rows: DataFrame, fk: str, right_key: str) -> DataFrame:
    """The right rows that the given left rows reference (the only ones a recompute needs)."""
    from pyspark.sql import functions as F

    wanted = left_rows.select(F.col(fk).alias(_WANTED)).where(F.col(_WANTED).isNotNull()).distinct()
    return right.join(F.broadcast(wanted), right[right_key] == wanted[_WANTED], how="left_semi")


def previous_rows(rows: DataFrame, changes: DataFrame, key: str) -> DataFrame:
    """`rows` of a source at the pin as they were at the previous batch's pins: the rows of
    the keys that changed since (`changes`, the source's net change) are their rows before the
    change, or none where the key had no row; the others are as they are. The keys of `changes`
    must be among those `rows` was read for, or have no row at the pin."""
    from lakejoin.delta.change_feed import before_rows

    unchanged = rows.join(changes.select(key), on=key, how="left_anti")
    return unchanged.unionByName(before_rows(changes).select(*rows.columns))
