"""The continuous audit (issue 40): after its output commit, an audit batch re-derives one slice
of the view's keys from the inputs at its pins and compares it with the output it committed.

A slice is the keys whose hash (xxhash64 of the key columns) modulo `slices` is the batch's
(quality/audit_plan.slice_of). The rows are derived by the kind's own full recompute, lazily and
without its input checks (the batch ran them), so Spark pushes the slice's filter into the scan
of the driving table; the output is read at the committed version with the same filter. One
job compares them by key and a hash of every column: how many keys differ, and the first 20.

`lakejoin audit SPEC --full` runs every slice at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakejoin.spec.model import Key

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from lakejoin.views.base import ViewKindLogic
    from lakejoin.views.context import BatchContext

SHOWN = 20  # keys an audit names
_EXPECTED, _FOUND = "_lj_expected", "_lj_found"


@dataclass(frozen=True)
class AuditResult:
    slice: int | None  # None: every slice
    slices: int
    differences: int
    keys: list[tuple[Any, ...]]  # the first SHOWN of them, in key order


def in_slice(key: Key, slice_: int | None, slices: int) -> Column:
    from pyspark.sql import functions as F

    if slice_ is None:
        return F.lit(True)
    return F.pmod(F.xxhash64(*[F.col(c) for c in key]), F.lit(slices)) == F.lit(slice_)


def derived_rows(ctx: BatchContext, kind: ViewKindLogic) -> DataFrame:
    """Every row the inputs at the batch's pins give the view, lazily: the kind's full recompute
    with the input checks off (the batch that is audited ran them)."""
    ctx.check_inputs = False
    try:
        return kind.rebuild(ctx, None).rows
    finally:
        ctx.check_inputs = True


def audit(
    ctx: BatchContext, kind: ViewKindLogic, output_version: int, slice_: int | None, slices: int
) -> AuditResult:
    """Compare the slice of the derived rows with the output at `output_version`, in one job."""
    from pyspark.sql import functions as F

    key = list(kind.output_key)
    chosen = in_slice(tuple(key), slice_, slices)
    output = ctx.spark.read.format("delta").option("versionAsOf", output_version).load(ctx.view.path)
    columns = output.columns

    def digest(rows: DataFrame, name: str) -> DataFrame:
        return rows.where(chosen).select(*key, F.xxhash64(*[F.col(c) for c in columns]).alias(name))

    expected = digest(derived_rows(ctx, kind).select(*columns), _EXPECTED)
    found = digest(output, _FOUND)
    differ = expected.join(found, on=key, how="full_outer").where(~F.col(_EXPECTED).eqNullSafe(F.col(_FOUND)))
    row = differ.agg(
        F.count(F.lit(1)).alias("n"),
        F.slice(F.sort_array(F.collect_list(F.struct(*key))), 1, SHOWN).alias("keys"),
    ).first()
    assert row is not None, "an aggregate without grouping returns one row"
    keys = [tuple(k[c] for c in key) for k in row["keys"] or []]
    return AuditResult(slice_, slices, int(row["n"]), keys)
