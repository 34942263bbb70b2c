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
