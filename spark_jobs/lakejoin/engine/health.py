"""Join health in a batch (issue 40): the counts, the waiting rows and the limits.

The kind flags each row it rebuilds (views/health_flags.py); the batch counts the new rows'
flags in the job that materialises them (`observed`, no job of its own). What the affected keys
counted before the batch comes from their rows at the previous pins (`Rebuilt.previous`, which
the write derives anyway): one job joins them with the new rows by key and returns the old
counts, the rows that stopped or started waiting, and the late arrivals (rows that waited and
now have their row). The view's totals are the last batch's plus the difference
(quality/health.totals).

The rows that wait (an fk without its right row...) are kept in a small Delta table of the
view's, `<state>/health/<view>` (key, `since_batch`, `since`), rewritten by delta-rs on the
driver in one commit per batch in which it changes, and pinned with the batch like a state
table (`_health`): a batch run again after a crash reads it as the batch before left it. The
oldest row's age is read from it.

A batch with no previous rows (a repair, a batch being finished, the MERGE write) counts the
whole view again: one aggregate job over the kind's full recompute.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakejoin.engine.audit import derived_rows
from lakejoin.quality.health import Health, totals
from lakejoin.views.health_flags import HEALTH_PIN as PIN
from lakejoin.views.health_flags import KEEP, flag

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

    from lakejoin.spec.model import PipelineSpec, View
    from lakejoin.views.base import Rebuilt, ViewKindLogic
    from lakejoin.views.context import BatchContext

SINCE_BATCH, SINCE = "since_batch", "since"
EXAMPLES = 5  # keys a breach names
_OLD, _NEW = "_lj_old", "_lj_new"


def health_path(spec: PipelineSpec, view: View) -> str:
    return str(Path(spec.state_path) / "health" / view.name)


def observed(kind: ViewKindLogic) -> list[Column]:
    """What the job that materialises the flagged rows also counts: each measure, the rows
    kept, and the first keys of the waiting rows (for a breach's message)."""
    from pyspark.sql import functions as F

    from lakejoin.views.health_flags import sums

    out = sums(kind.health_measures)
    if kind.waits is not None:
        keys = F.collect_list(F.when(F.col(flag(kind.waits)) > 0, F.struct(*kind.output_key)))
        out.append(F.slice(F.sort_array(keys), 1, EXAMPLES).alias("_lj_examples"))
    return out


@dataclass(frozen=True)
class WaitingUpdate:
    """The waiting rows after the batch, and whether they differ from the table's (then step 6
    writes them, one delta-rs commit, before the output commit)."""

    path: str
    rows: pa.Table
    changed: bool
    version: int  # the table's version the batch read (-1: none)

    def write(self) -> int | None:
        """Write the rows when they changed; the version the batch pins (None: no table)."""
        from deltalake import DeltaTable, write_deltalake

        if not self.changed:
            return self.version if self.version >= 0 else None
        write_deltalake(self.path, self.rows, mode="overwrite", schema_mode="overwrite")
        return int(DeltaTable(self.path).version())


def count_batch(
    ctx: BatchContext,
    kind: ViewKindLogic,
    rebuilt: Rebuilt,
    new_rows: DataFrame,
    seen: dict[str, Any],
    last: Health | None,
    path: str,
) -> tuple[Health, WaitingUpdate]:
    """The view's health after this batch, and its waiting rows.

    `new_rows`: the materialised flagged rows; `seen`: what their job observed; `last`: the
    health the last committed batch logged; `path`: the waiting rows' table."""
    from pyspark.sql import functions as F

    from lakejoin.views.context import shown_value

    measures, key, waits = kind.health_measures, list(kind.output_key), kind.waits
    new = {m: int(seen[flag(m)]) for m in measures}
    examples = (
        {waits: [shown_value(tuple(key), tuple(r)) for r in seen.get("_lj_examples") or []]} if waits else {}
    )
    plan = ctx.plan
    version = plan.pinned_versions.get(PIN, plan.start_versions.get(PIN, -1))
    before = _read(path, version)
    previous = rebuilt.previous
    late, whole = 0, rebuilt.affected is None or previous is None or last is None
    if whole:
        # Every key counted, or no rows before the batch to count from: the whole view, once.
        rows_of = new_rows if rebuilt.affected is None else derived_rows(ctx, kind)
        row = rows_of.agg(*_whole(kind)).first()
        assert row is not None
        after = {m: int(row[flag(m)]) for m in measures}
        started = [tuple(k) for k in row["_lj_waiting"] or []] if waits else []
        stopped: list[tuple[Any, ...]] = []
        rows = int(row["_lj_rows"])
    else:
        assert previous is not None and last is not None

        # The affected keys before (their rows at the previous pins) and after, side by side.
        def side(frame: DataFrame, name: str) -> DataFrame:
            cols = [F.col(flag(m)).alias(f"{name}_{m}") for m in measures]
            return frame.select(*key, *cols, F.col(KEEP).alias(f"{name}_keep"))

        both = side(previous, _OLD).join(side(new_rows, _NEW), on=key, how="full_outer")
        aggregates = [F.coalesce(F.sum(f"{_OLD}_{m}"), F.lit(0)).alias(m) for m in measures]
        aggregates.append(F.count(F.col(f"{_OLD}_keep")).alias("_lj_old_rows"))  # rows before
        if waits:
            was = F.coalesce(F.col(f"{_OLD}_{waits}"), F.lit(0)) > 0
            now = F.coalesce(F.col(f"{_NEW}_{waits}"), F.lit(0)) > 0
            present = F.col(f"{_NEW}_keep").isNotNull()
            aggregates += [
                F.collect_list(F.when(~was & now, F.struct(*key))).alias("_lj_started"),
                F.collect_list(F.when(was & ~now, F.struct(*key))).alias("_lj_stopped"),
                F.count(F.when(was & ~now & present, F.lit(1))).alias("_lj_late"),
            ]
        row = both.agg(*aggregates).first()
        assert row is not None
        after = totals(last.totals, old={m: int(row[m]) for m in measures}, new=new)
        rows = last.rows - int(row["_lj_old_rows"]) + int(seen["n"])
        started = [tuple(k) for k in row["_lj_started"] or []] if waits else []
        stopped = [tuple(k) for k in row["_lj_stopped"] or []] if waits else []
        late = int(row["_lj_late"]) if waits else 0
    update = _waiting(path, key, new_rows, before, started, stopped, batch_id=plan.batch_id, whole=whole)
    update = replace(update, version=version if before is not None else -1)
    batches, seconds = oldest(update.rows, plan.batch_id)
    health = Health(after, rows, batches, seconds, late, examples)
    return health, update


def _read(path: str, version: int) -> pa.Table | None:
    from deltalake import DeltaTable

    if version < 0 or not DeltaTable.is_deltatable(path):
        return None
    return DeltaTable(path, version=version).to_pyarrow_table()


def _whole(kind: ViewKindLogic) -> list[Column]:
    from pyspark.sql import functions as F

    from lakejoin.views.health_flags import sums

    out = [*sums(kind.health_measures), F.count(F.lit(1)).alias("_lj_rows")]
    if kind.waits is not None:
        keys = F.collect_list(F.when(F.col(flag(kind.waits)) > 0, F.struct(*kind.output_key)))
        out.append(keys.alias("_lj_waiting"))
    return out


def _waiting(
    path: str,
    key: list[str],
    frame: DataFrame,
    before: pa.Table | None,
    started: list[tuple[Any, ...]],
    stopped: list[tuple[Any, ...]],
    *,
    batch_id: int,
    whole: bool,
) -> WaitingUpdate:
    """The waiting rows after the batch: those before less `stopped` plus `started` (since this
    batch), or with `whole` exactly `started`, each keeping its `since` if it waited before."""
    from datetime import UTC, datetime

    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    now = datetime.now(UTC)
    held = {tuple(r[c] for c in key): r for r in (before.to_pylist() if before is not None else [])}

    def fresh(values: tuple[Any, ...]) -> dict[str, Any]:
        return {**dict(zip(key, values, strict=True)), SINCE_BATCH: batch_id, SINCE: now}

    if whole:
        rows = [held.get(k) or fresh(k) for k in dict.fromkeys(started)]
        changed = set(dict.fromkeys(started)) != set(held)
    else:
        gone = set(stopped)
        rows = [r for k, r in held.items() if k not in gone] + [fresh(k) for k in started if k not in held]
        changed = bool(started or stopped)
    types = {f.name: f.dataType for f in frame.schema.fields}
    schema = pa.schema(
        [
            *[pa.field(c, to_arrow_type(types[c])) for c in key],
            pa.field(SINCE_BATCH, pa.int64()),
            pa.field(SINCE, pa.timestamp("us", tz="UTC")),
        ]
    )
    return WaitingUpdate(path, pa.Table.from_pylist(rows, schema=schema), changed, -1)


def oldest(rows: pa.Table, batch_id: int) -> tuple[int | None, float | None]:
    """The oldest waiting row's age: in batches (this batch's id less its first) and seconds."""
    import time

    import pyarrow.compute as pc

    if rows.num_rows == 0:
        return None, None
    first = int(pc.min(rows[SINCE_BATCH]).as_py())
    since = pc.min(rows[SINCE]).as_py()
    return batch_id - first, max(time.time() - since.timestamp(), 0.0)
