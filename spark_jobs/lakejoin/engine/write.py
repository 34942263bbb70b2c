"""Step 6 of a batch: the state tables a view keeps, then the output MERGE whose last commit is
the batch commit (delta/markers.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from lakejoin.delta.markers import FINAL, PRE, OutputCommit, app_id, idempotent, output_batches
from lakejoin.errors import CommittedElsewhereError, ConcurrentBatchError
from lakejoin.sink.choice import merge_affected, merge_full, replace_output, upsert_affected
from lakejoin.sink.keyed_tables import drift_error, ensure_output, schema_drift
from lakejoin.sink.merge_terms import MergeCounts
from lakejoin.spec.model import PipelineSpec, View

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakejoin.delta.key_ranges import KeyRange
    from lakejoin.engine.health import FlaggedUpdate
    from lakejoin.engine.plan import BatchPlan
    from lakejoin.views.base import Rebuilt, ViewKindLogic
    from lakejoin.views.context import BatchContext


def state_path(spec: PipelineSpec, view: View) -> str:
    """Where a view keeps its state (rekey's re-keyed index)."""
    return str(Path(spec.state_path) / "routing" / view.name)


def write_state(ctx: BatchContext, kind: ViewKindLogic, rebuilt: Rebuilt) -> dict[str, int]:
    """Bring the view's state tables to the batch's pins, from what the kind's `rebuild`
    returned; return the version each now has (what the next batch reads). Each write is
    stamped with the table's next txn version, so of two runs writing at once one applies, and
    a retry after a crash always applies again."""
    from deltalake import DeltaTable

    tables = kind.state_tables(ctx.state_path)
    app = f"{app_id(ctx.spec.name, ctx.view.name)}.state"
    # A state write is one MERGE, stamped `app`. Until session 34 a large one was a MERGE and an
    # append (stamped `app.inserts`), either of which could be missing from a batch: the next
    # version stays above both, for a table those wrote.
    written = [
        DeltaTable(p).transaction_version(a) or 0
        for p in tables.values()
        if DeltaTable.is_deltatable(p)
        for a in (app, f"{app}.inserts")
    ]
    try:
        with idempotent(ctx.spark, app, max(written, default=0) + 1):
            kind.write_state(ctx, rebuilt)
    except Exception as exc:
        concurrent = _concurrent(exc, ctx.plan.batch_id, where=f"view '{ctx.view.name}' state")
        if concurrent is None:
            raise
        raise concurrent from exc
    return {pin: int(DeltaTable(p).version()) for pin, p in tables.items() if DeltaTable.is_deltatable(p)}


@dataclass(frozen=True)
class OutputWrite:
    counts: MergeCounts
    version: int
    note: str | None = None


def write_output(
    spark: SparkSession,
    spec: PipelineSpec,
    view: View,
    kind: ViewKindLogic,
    plan: BatchPlan,
    pins: dict[str, int],
    recomputed: DataFrame,
    rebuilt: Rebuilt,
) -> OutputWrite:
    """MERGE the recomputed rows into the output; its last commit carries the batch and `pins`."""
    affected = rebuilt.affected
    where = f"view '{view.name}' output ({view.path})"
    keys = list(kind.output_key)
    ensure_output(spark, view.path, recomputed.schema)
    drift = schema_drift(spark, view.path, recomputed.schema)
    if drift and affected is not None:
        raise drift_error(drift, where=where)
    commit = OutputCommit(
        app_id(spec.name, view.name),
        plan.marker(PRE, pins),
        plan.marker(FINAL, pins),
        finishing=plan.finishing,
    )
    note = None
    try:
        if drift or (plan.rewrite and affected is None):
            counts = replace_output(view.path, recomputed, commit)
            note = f"rewritten for a schema change: {drift}" if drift else f"rewritten: {plan.rewrite}"
        elif affected is None:
            declined: list[str] = []
            counts = merge_full(spark, view.path, recomputed, keys, commit, note=declined.append)
            note = declined[0] if declined else None
        else:
            upserted, note = _upsert(spark, view.path, recomputed, rebuilt, keys, commit)
            if upserted is not None:
                counts = upserted
            else:
                known = None
                if rebuilt.affected_count is not None and rebuilt.bounds is not None:
                    known = (affected, rebuilt.affected_count, rebuilt.bounds)
                counts = merge_affected(spark, view.path, recomputed, affected, keys, commit, known=known)
    except ConcurrentBatchError as exc:
        raise _or_committed(exc, view.path, commit.app, commit.final.batch_id) from exc
    except Exception as exc:
        concurrent = _concurrent(exc, plan.batch_id, where=where)
        if concurrent is None:
            raise
        raise _or_committed(concurrent, view.path, commit.app, commit.final.batch_id) from exc
    assert counts.version is not None
    return OutputWrite(counts, counts.version, note)


def _upsert(
    spark: SparkSession,
    path: str,
    recomputed: DataFrame,
    rebuilt: Rebuilt,
    keys: list[str],
    commit: OutputCommit,
) -> tuple[MergeCounts | None, str | None]:
    """The batch written by the one-commit upsert: from the affected keys' rows at the previous
    pins when the view kind derived them (`Rebuilt.previous`), else from the output's own rows
    of those keys, read as a MERGE would read them (a repair, enrich's `lookup` mode). None
    and why: the upsert is off, or it declined (the caller writes the batch with the MERGE)."""
    from lakejoin.sink import key_upsert

    affected = rebuilt.affected
    assert affected is not None, "a batch of affected keys"
    previous = rebuilt.previous
    if previous is None:
        if not key_upsert.enabled(spark):
            return None, None
        previous = held_rows(spark, path, affected, keys, rebuilt.bounds)
    declined: list[str] = []
    counts = upsert_affected(
        spark,
        path,
        recomputed,
        previous,
        keys,
        commit,
        keys=rebuilt.affected_count,
        note=declined.append,
    )
    if counts is None:
        return None, declined[0] if declined else None
    return replace(counts, keys=rebuilt.affected_count or 0), None


def held_rows(
    spark: SparkSession, path: str, affected: DataFrame, keys: list[str], bounds: KeyRange | None
) -> DataFrame:
    """The output's rows of the affected keys (`affected`, materialised, within `bounds` when
    known, on which Delta skips files)."""
    from pyspark.sql import functions as F

    table = spark.read.format("delta").load(path)
    if bounds is not None:
        table = table.where(bounds.covers())
    return table.join(F.broadcast(affected.select(*keys)), on=keys, how="left_semi")


def write_flagged(update: FlaggedUpdate, spec: PipelineSpec, view: View, batch_id: int) -> int | None:
    """Write the view's flagged keys (engine/health.py) when they changed; the version the batch
    pins. Two runs of one batch both rewrite the table, and delta-rs refuses the second commit:
    that is a conflict with another run's write of this batch, reported as the output's are."""
    from deltalake.exceptions import CommitFailedError

    try:
        return update.write()
    except CommitFailedError as exc:
        conflict = _concurrent(exc, batch_id, where=f"view '{view.name}' flagged keys ({update.path})")
        if conflict is None:  # refused for another reason: delta-rs's own error says which
            raise
        raise _or_committed(conflict, view.path, app_id(spec.name, view.name), batch_id) from exc


def _or_committed(exc: ConcurrentBatchError, path: str, app: str, batch_id: int) -> ConcurrentBatchError:
    """`exc`, or the news that the batch is in: a conflict with another run's commit of this very
    batch (its txn version `app` on the output) leaves this run nothing to do."""
    if isinstance(exc, CommittedElsewhereError):
        return exc
    done = output_batches(path, app).last_committed
    if done is None or done < batch_id:
        return exc
    return CommittedElsewhereError(
        f"another run committed batch {batch_id} first (its commit landed while this "
        "run's was being written); this run wrote nothing more",
        where=f"output {path}",
        fix="nothing to do: the batch is committed once; run again for newer changes",
    )


def _concurrent(exc: Exception, batch_id: int, *, where: str) -> ConcurrentBatchError | None:
    """Delta's conflict errors (ConcurrentTransactionException: another run's commit of the same
    batch landed during this one's; ConcurrentAppend/Delete...: its MERGE touched the same files;
    delta-rs's "a concurrent transaction ...")."""
    text = str(exc)
    if "concurrent" not in text.lower():
        return None
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return ConcurrentBatchError(
        f"another commit landed on this table while batch {batch_id} was writing it (another run of "
        f"the view, or someone's OPTIMIZE, DELETE or UPDATE); this run stopped: {first}",
        where=where,
        fix="run the view again: it plans from what is committed (and finishes a batch half written "
        "into the output); do not run two batches of one view at once",
    )
