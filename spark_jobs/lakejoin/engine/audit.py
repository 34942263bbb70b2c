"""The continuous audit (issue 40): after its output commit, an audit batch re-derives one slice
of the view's keys from the inputs at its pins and compares it with the output it committed.

A slice is the keys whose hash (xxhash64 of the key columns) modulo `slices` is the batch's
(quality/audit_plan.next_slice). The rows are derived by the kind's own full recompute, lazily and
without its input checks (the batch ran them), so Spark pushes the slice's filter into the scan
of the driving table; the output is read at the committed version with the same filter. One
job compares them by key and a hash of every column: how many keys differ, and the first 20.

`lakejoin audit SPEC --full` runs every slice at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakejoin.errors import AuditDifferenceError
from lakejoin.spec.model import Key

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from lakejoin.spec.model import PipelineSpec, View
    from lakejoin.views.base import Rebuilt, ViewKindLogic
    from lakejoin.views.context import BatchContext

SHOWN = 20  # keys an audit names
_EXPECTED, _FOUND = "_lj_expected", "_lj_found"


@dataclass(frozen=True)
class AuditResult:
    slice: int | None  # None: every slice
    slices: int
    differences: int
    keys: list[tuple[Any, ...]]  # the first SHOWN of them, in key order

    @property
    def scope(self) -> str:
        return "every key" if self.slice is None else f"slice {self.slice} of {self.slices} of the keys"


def difference_error(spec: PipelineSpec, view: View, found: AuditResult, audit: str) -> AuditDifferenceError:
    """What `audit` (\"the audit of batch 7\", \"lakejoin audit --full\") found: output rows that
    are not what the inputs give, by key, and how to mend the view."""
    from lakejoin.spec.definition import output_key
    from lakejoin.views.context import shown_value

    key = tuple(output_key(spec, view))
    shown = ", ".join(shown_value(key, k) for k in found.keys)
    more = f" and {found.differences - len(found.keys)} more" if found.differences > len(found.keys) else ""
    return AuditDifferenceError(
        f"{audit} ({found.scope}) found {found.differences} key(s) whose output row is not what "
        f"the inputs give: {shown}{more}. Something wrote the output behind lakejoin's back, or a "
        "batch went wrong",
        where=f"view '{view.name}' output ({view.path})",
        fix=f"rebuild the rows: lakejoin run {spec.file} --view {view.name} --full-refresh (it "
        "rewrites only the rows that differ)",
    )


def in_slice(key: Key, slice_: int | None, slices: int) -> Column:
    from pyspark.sql import functions as F

    if slice_ is None:
        return F.lit(True)
    return F.pmod(F.xxhash64(*[F.col(c) for c in key]), F.lit(slices)) == F.lit(slice_)


def derived(ctx: BatchContext, kind: ViewKindLogic) -> Rebuilt:
    """Every row the inputs at the batch's pins give the view, lazily: the kind's full recompute
    with the input checks off (the batch ran them). The audit compares them with the output;
    join health recounts them (flagged, while `ctx.count_health` is on) when a batch has no
    flagged keys or totals to go on from."""
    ctx.check_inputs = False
    try:
        return kind.rebuild(ctx, None)
    finally:
        ctx.check_inputs = True


def derived_rows(ctx: BatchContext, kind: ViewKindLogic) -> DataFrame:
    return derived(ctx, kind).rows


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


def audit_view(spark: SparkSession, spec: PipelineSpec, view: View) -> AuditResult | None:
    """`lakejoin audit --full`: every key of the view's output as it stands now against the
    inputs at the pins of its last committed batch (None: no batch has committed). An edit made
    after that batch is found at once, not only when its slice comes round."""
    from deltalake import DeltaTable

    from lakejoin.delta.log import BatchLog
    from lakejoin.delta.markers import app_id, output_batches
    from lakejoin.delta.records import BatchMode
    from lakejoin.engine.kinds import view_logic
    from lakejoin.engine.plan import BatchPlan, input_columns
    from lakejoin.engine.write import state_path
    from lakejoin.errors import BatchStateError
    from lakejoin.views.context import BatchContext

    last = BatchLog.of(spec).last_committed(view.name)
    if last is None:
        return None
    newest = output_batches(view.path, app_id(spec.name, view.name)).last_committed
    if newest is not None and newest > last.batch_id:
        raise BatchStateError(
            f"batch {newest} committed into the output of view '{view.name}' but the batch log "
            f"stops at batch {last.batch_id}, so the pins the output stands on are not known",
            where=f"batch log of pipeline '{spec.name}'",
            fix=f"let a run catch the log up first: lakejoin run {spec.file} --view {view.name}",
        )
    kind = view_logic(spec, view)
    pinned = dict(last.pinned_versions)
    plan = BatchPlan(view.name, last.batch_id, BatchMode.FULL_REFRESH, {}, pinned)
    ctx = BatchContext(
        spark, spec, view, plan, state_path(spec, view), input_columns(spec, view, kind, pinned)
    )
    return audit(ctx, kind, int(DeltaTable(view.path).version()), None, view.audit.slices)
