"""Step 6 of a batch: the state tables a view keeps, then the output write (sink/entry.py), whose
last commit is the batch commit (delta/markers.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakejoin.delta.markers import FINAL, OutputCommit, app_id, find_commit
from lakejoin.errors import ConcurrentBatchError
from lakejoin.sink.conflicts import batch_error, output_error
from lakejoin.sink.entry import KeyedWrite, Written
from lakejoin.sink.entry import write as sink_write
from lakejoin.sink.entry import write_state as write_state_table
from lakejoin.sink.facts import SessionSettings, WriteFacts
from lakejoin.sink.keyed_tables import drift_error, ensure_output, schema_drift
from lakejoin.sink.stamp import Stamp
from lakejoin.spec.model import PipelineSpec, View

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakejoin.delta.identity import Identities
    from lakejoin.delta.plans import BatchPlan
    from lakejoin.engine.health import FlaggedUpdate
    from lakejoin.sink.writers import HeldRows
    from lakejoin.views.base import Rebuilt, ViewKindLogic
    from lakejoin.views.context import BatchContext


STATE_PART = "state"  # the marker part of a state table's commit (delta/markers.py)
STATE_ATTEMPTS = 5  # writes of a state table another run's commits keep overtaking


def write_state(ctx: BatchContext, kind: ViewKindLogic, rebuilt: Rebuilt) -> dict[str, int]:
    """Bring the view's state tables to the batch's pins, from what the kind's `rebuild`
    returned; return the version this batch's own commit made of each (what the next batch
    reads), never a version another run wrote.

    The kind says what to write (its `write_state`), the sink's entry writes it
    (sink/entry.write_state). Each write is stamped with the table's next txn version, so of two
    runs writing at once one applies, and a retry after a crash always applies again; and with a
    marker of this run, by which the batch finds its own commit. The kind's write makes the keys
    that commits after the batch's state pin touched (a crashed run's, another run's at other
    pins) what they were at the pin (`since`), so this batch's version is exact at its own pins
    whatever was written on top. When another commit lands between the version the write
    started from and its own (or Delta skipped it: another run took the txn version), the write
    is made again."""
    from deltalake import DeltaTable

    tables = kind.state_tables(ctx.state_path)
    if not tables:
        return {}
    app = f"{app_id(ctx.spec.name, ctx.view.name)}.state"
    where = f"view '{ctx.view.name}' state"
    versions: dict[str, int] = {}
    for pin, path in tables.items():
        for _ in range(STATE_ATTEMPTS):
            base = int(DeltaTable(path).version()) if DeltaTable.is_deltatable(path) else -1
            # A state write is one MERGE, stamped `app`. Until session 34 a large one was a MERGE
            # and an append (stamped `app.inserts`), either of which could be missing from a
            # batch: the next version stays above both, for a table those wrote.
            written = (
                [DeltaTable(path).transaction_version(a) or 0 for a in (app, f"{app}.inserts")]
                if base >= 0
                else []
            )
            marker = ctx.plan.marker(STATE_PART)
            stamp = Stamp(app, max(written, default=0) + 1, marker.as_json())
            try:
                for asked in kind.write_state(ctx, rebuilt, since=base):
                    if asked.path == path:
                        write_state_table(ctx.spark, asked, stamp)
            except Exception as exc:
                concurrent = batch_error(exc, ctx.plan.batch_id, where=f"{where} ({path})")
                if concurrent is None:
                    raise
                raise concurrent from exc
            found = find_commit(path, lambda m, run=marker.run: m.run == run and m.part == STATE_PART)
            now = int(DeltaTable(path).version())
            if found is None and now == base:  # nothing differed: the table stays at its version
                versions[pin] = base
                break
            if found is not None and found[0] == base + 1:
                versions[pin] = found[0]
                break
        else:
            raise ConcurrentBatchError(
                f"other commits kept landing on the {kind.state_name} while batch {ctx.plan.batch_id} "
                f"wrote it ({STATE_ATTEMPTS} attempts)",
                where=f"{where} ({path})",
                fix="do not run two batches of one view at once; run the view again",
            )
    return versions


def write_output(
    spark: SparkSession,
    spec: PipelineSpec,
    view: View,
    kind: ViewKindLogic,
    plan: BatchPlan,
    pins: dict[str, int],
    recomputed: DataFrame,
    rebuilt: Rebuilt,
    identities: Identities | None = None,
    held: HeldRows | None = None,
    settings: SessionSettings | None = None,
) -> Written:
    """Write the recomputed rows into the output through the sink's entry (sink/entry.py) and
    say what it did (its counts hold the batch commit's version). Its last commit carries the
    batch, `pins` and which table each pin is of (`identities`, the plan's when not given).
    `held`: the rows and the affected keys of a small batch on the driver, which the driver's
    MERGE writes as they are. `settings`: the batch's write settings, which its derivation read
    already (strategy.may_upsert)."""
    affected = rebuilt.affected
    where = f"view '{view.name}' output ({view.path})"
    ensure_output(spark, view.path, recomputed.schema)
    drift = schema_drift(spark, view.path, recomputed.schema)
    if drift and affected is not None:
        raise drift_error(drift, where=where)
    commit = OutputCommit(app_id(spec.name, view.name), plan.marker(FINAL, pins, identities))
    asked = KeyedWrite(
        view.path,
        tuple(kind.output_key),
        recomputed,
        affected,
        commit,
        counted=rebuilt.affected_count,
        bounds=rebuilt.bounds,
        previous=rebuilt.previous,
        held=held,
        drift=drift or None,
        rewrite=plan.rewrite or None,
    )
    try:
        written = sink_write(spark, asked, WriteFacts.of(spark, view.path, recomputed, settings))
    except Exception as exc:
        concurrent = output_error(
            exc, path=view.path, app=commit.app, batch_id=commit.final.batch_id, where=where
        )
        if concurrent is None or concurrent is exc:
            raise
        raise concurrent from exc
    assert written.counts.version is not None
    return written


def write_flagged(update: FlaggedUpdate, spec: PipelineSpec, view: View, batch_id: int) -> int | None:
    """Write the view's flagged keys (engine/health.py) when they changed; the version the batch
    pins. Two runs of one batch both rewrite the table, and delta-rs refuses the second commit:
    that is a conflict with another run's write of this batch, reported as the output's are."""
    from deltalake.exceptions import CommitFailedError

    try:
        return update.write()
    except CommitFailedError as exc:
        where = f"view '{view.name}' flagged keys ({update.path})"
        conflict = output_error(
            exc, path=view.path, app=app_id(spec.name, view.name), batch_id=batch_id, where=where
        )
        if conflict is None:  # refused for another reason: delta-rs's own error says which
            raise
        raise conflict from exc
