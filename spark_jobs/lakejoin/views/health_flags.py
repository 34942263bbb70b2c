"""Join health's per-row flags (issue 40): while `ctx.derivation.health` is on, a kind's `rebuild`
returns its rows with one integer column per health measure (`_lj_h_<measure>`: 1 when the row
has the condition, or a count, such as a list's elements without a right row) and `_lj_h_keep`,
false for a row the view holds back (an inner join's left row without its right row). The
batch counts them in the job that materialises the rows, then drops them (`plain`): the rows
it writes are the kind's usual rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

HEALTH_PIN = "_health"  # the waiting rows' table's pin (engine/health.py)
PREFIX = "_lj_h_"
KEEP = "_lj_h_keep"


def flag(measure: str) -> str:
    return PREFIX + measure


def flagged(frame: DataFrame) -> bool:
    return KEEP in frame.columns


def plain(frame: DataFrame) -> DataFrame:
    """The rows the view holds, without the flags (the frame itself when it has none)."""
    from pyspark.sql import functions as F

    if not flagged(frame):
        return frame
    return frame.where(F.col(KEEP)).drop(*[c for c in frame.columns if c.startswith(PREFIX)])


def plain_rows(rows: Any) -> Any:
    """`plain` of rows on the driver (a pyarrow Table): the kept rows, without the flags."""
    if KEEP not in rows.column_names:
        return rows
    kept = rows.filter(rows.column(KEEP).fill_null(False))
    return kept.drop_columns([c for c in rows.column_names if c.startswith(PREFIX)])


def sums(measures: Sequence[str]) -> list[Column]:
    """Per measure, the flagged rows' total, and the rows kept (aggregates named as the flags)."""
    from pyspark.sql import functions as F

    totals = [F.coalesce(F.sum(flag(m)), F.lit(0)).alias(flag(m)) for m in measures]
    return [*totals, F.count(F.when(F.col(KEEP), F.lit(1))).alias(KEEP)]
