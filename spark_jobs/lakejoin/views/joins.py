"""Joins that several view kinds build their recompute from (fk_join's right side, enrich's
dimensions: `joined`, the one rule of both). Apart from the kinds because no view kind imports
another: what two of them share lives here, below both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from functools import reduce
from typing import TYPE_CHECKING

from lakejoin.delta.sql_text import spark_column, spark_columns, spark_quoted
from lakejoin.spec.model import Columns, JoinHow, Key
from lakejoin.views.health_flags import KEEP

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


class JoinStrategy(Enum):
    """How a side is joined to the driving rows: as Spark chooses (fk_join: a hint would cost
    jobs where Spark's own choice costs none), broadcast, or a shuffled hash join (enrich, by
    each dimension's size against its broadcast limit)."""

    AUTO = "auto"
    BROADCAST = "broadcast"
    SHUFFLE_HASH = "shuffle_hash"


@dataclass(frozen=True)
class SideRows:
    """One side joined to the driving rows: its rows, its key, the driving rows' columns that
    hold it (`fk`, in the key's order), the columns the output carries (each as `prefix` +
    name), the join type, and how Spark joins it."""

    rows: DataFrame
    key: Key
    fk: Key
    columns: Sequence[str]
    prefix: str
    how: JoinHow
    strategy: JoinStrategy = JoinStrategy.AUTO


@dataclass(frozen=True)
class Flags:
    """The health flag columns (views/health_flags.py) a flagged `joined` writes: `missing`, a
    driving row with an fk without nulls that finds no row of a side; `null_fk`, when given, one
    with a null in an fk column."""

    missing: str
    null_fk: str | None = None


def joined(driving: DataFrame, sides: Sequence[SideRows], *, flags: Flags | None = None) -> DataFrame:
    """The output rows of the given driving rows: their columns, then each side's prefixed
    columns. A `left` side keeps a driving row whose fk is null (in any column) or unmatched
    (null columns); an `inner` one drops it. Matching is exact equality of every fk column, so
    `a` never matches `ab`, and an fk with a null in any column matches nothing.

    With `flags`, every driving row, flagged (`Flags`) and kept as the joins keep it (`KEEP`)."""
    from pyspark.sql import functions as F

    out, added = driving, []
    null_fks, missing, matches = [], [], []
    for i, side in enumerate(sides):
        match = [f"_lj_side{i}"] if len(side.key) == 1 else [f"_lj_side{i}_{j}" for j in range(len(side.key))]
        found = f"_lj_side{i}_found"
        right = side.rows.select(
            *[F.col(k).alias(m) for k, m in zip(side.key, match, strict=True)],
            *[spark_column(c).alias(side.prefix + c) for c in side.columns],
            *([F.lit(True).alias(found)] if flags else []),
        )
        if side.strategy is JoinStrategy.BROADCAST:
            right = F.broadcast(right)
        elif side.strategy is JoinStrategy.SHUFFLE_HASH:
            right = right.hint("shuffle_hash")
        how = "left" if flags else side.how.value
        out = out.join(right, matching(driving, side.fk, right, match), how=how)
        added += [side.prefix + c for c in side.columns]
        if flags:
            null_fk = F.lit(False)
            for c in side.fk:
                null_fk = null_fk | driving[c].isNull()
            matched = F.col(found).isNotNull()
            null_fks.append(null_fk)
            missing.append(~null_fk & ~matched)
            if side.how is JoinHow.INNER:
                matches.append(matched)
    columns = [*[driving[spark_quoted(c)] for c in driving.columns], *spark_columns(added)]
    if flags:
        if flags.null_fk is not None:
            columns.append(_any(null_fks).cast("int").alias(flags.null_fk))
        keep = reduce(lambda a, b: a & b, matches) if matches else F.lit(True)
        columns += [_any(missing).cast("int").alias(flags.missing), keep.alias(KEEP)]
    return out.select(*columns)


def _any(conditions: list[Column]) -> Column:
    from pyspark.sql import functions as F

    return reduce(lambda a, b: a | b, conditions) if conditions else F.lit(False)
