"""fk_join: `left ⋈ right ON left.fk = right.key`, one row per left key, inner or left.

Pure DataFrame code: reading and writing Delta happens in the runner.

>>> out = recompute(left_rows, right_rows, join, left_key="product_id", right_key="merchant_id",
...                 right_columns=["display_name"])      # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakejoin.spec import FkJoin

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

RIGHT_MATCH = "_lj_right_key"


def chosen_right_columns(join: FkJoin, right_columns: Sequence[str], right_key: str) -> list[str]:
    """The right columns the output carries: the declared ones, or all but the right key."""
    return list(join.right_columns) if join.right_columns else [c for c in right_columns if c != right_key]


def affected_keys(left_changed_keys: DataFrame, routed_keys: DataFrame, left_key: str) -> DataFrame:
    """Output keys a batch can change: left keys that changed, and left keys routed from
    changed right keys. A right change cannot reach any other row."""
    return left_changed_keys.select(left_key).union(routed_keys.select(left_key)).distinct()


def referenced_right_rows(right: DataFrame, left_rows: DataFrame, fk: str, right_key: str) -> DataFrame:
    """The right rows that the given left rows reference (the only ones a recompute needs)."""
    from pyspark.sql import functions as F

    wanted = left_rows.select(F.col(fk).alias(RIGHT_MATCH)).where(F.col(RIGHT_MATCH).isNotNull()).distinct()
    return right.join(F.broadcast(wanted), right[right_key] == wanted[RIGHT_MATCH], how="left_semi")


def recompute(
    left_rows: DataFrame,
    right_rows: DataFrame,
    join: FkJoin,
    *,
    right_key: str,
    right_columns: Sequence[str],
) -> DataFrame:
    """The output rows of the given left rows: left columns, then the prefixed right columns.

    Inner keeps a left row only when its fk is not null and matches a right key; left keeps
    every left row, with null right columns when the fk is null or unmatched. Matching is
    exact equality, so `a` never matches `ab`, and a null fk never matches anything.
    """
    from pyspark.sql import functions as F

    right = right_rows.select(
        F.col(right_key).alias(RIGHT_MATCH),
        *[F.col(c).alias(join.right_prefix + c) for c in right_columns],
    )
    joined = left_rows.join(right, left_rows[join.fk] == right[RIGHT_MATCH], how=join.how.value)
    return joined.select(
        *[left_rows[c] for c in left_rows.columns],
        *[F.col(join.right_prefix + c) for c in right_columns],
    )
