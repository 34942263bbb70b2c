"""Join health in a batch (issue 40): the counts, the flagged keys and the limits.

The kind flags each row it rebuilds (views/health_flags.py): one integer per measure, and
whether the view keeps the row. The batch counts them in the job that materialises the rows
(an observation, no job of its own).

What the affected keys counted before the batch comes from the view's **flagged keys**: a
small Delta table, `<state>/health/<view>`, that holds every output key with a non-zero flag
(an orphan, a list with a missing element, a conflict...), its flags, and since when it has
waited (`since_batch`, `since`). A healthy view's table is empty. Before the rows are
materialised, the batch finds the affected keys among them (`prior`): no job when the table is
empty, else one (the affected keys, materialised already, collected to the driver; above
`COLLECTED` keys a broadcast semi-join with the table, one job more). The materialising job's
observation then tests its rows' keys against those few flagged keys as literals: it counts the
keys that stopped waiting and are still there (`late`) and lists the rows the kind carried as
they were (null flags: a list_join's unchanged list in a batch of many keys), which keep their
old flags. Measures of a row of one input alone (an fk_join's null fk, a rekey's null derived key)
are counted from the input's net changes, before and after, in the job that materialises them, or
on the driver for a range read there (`change_counts`).
The view's totals are the last batch's less the old counts plus the new
(quality/health.totals): no batch counts the whole view.

After the batch the table is the rows before, less the affected keys', plus the new flagged
rows (collected by the same observation: bounded by the affected keys). delta-rs rewrites it on
the driver, one commit in a batch where it changes, pinned with the batch like a state table
(`_health`): a batch run again after a crash reads it as the batch before left it.

A share is of the rows of the kind's first input (fk_join's and list_join's left rows, enrich's
facts, rekey's masters) at the batch's pin, from the table's file statistics less its deletion
vectors' rows (delta-rs, no job).

A batch with no table or no totals to go on from (the first with health, after an upgrade) or a
repair (which re-derives at pins of its own) counts the whole view: an aggregate job over the
kind's full recompute. A full refresh counts its own rows, which are the whole view, in their
observation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from lakejoin.delta.change_feed import BEFORE, CHANGE, ChangeKind, null_key
from lakejoin.delta.conflicts import delta_rs_conflict
from lakejoin.delta.lookups import row_count
from lakejoin.delta.records import BatchMode
from lakejoin.delta.sql_text import spark_quoted
from lakejoin.quality.health import Health, totals
from lakejoin.views.base import Rebuilt, ViewKindLogic, derived
from lakejoin.views.context import BatchContext, shown_value
from lakejoin.views.health_flags import HEALTH_PIN as PIN
from lakejoin.views.health_flags import PREFIX, flag, sums

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

SINCE_BATCH, SINCE = "since_batch", "since"
EXAMPLES = 5  # keys a breach names
_FLAGGED, _LATE, _CARRIED = "_lj_flagged", "_lj_late", "_lj_carried"
# Beside the rows (dropped with the flags): a flagged key that waited, one that was flagged.
_SIDE, _WAS, _HELD = PREFIX + "key_", PREFIX + "was_waiting", PREFIX + "held"
# Up to how many flagged keys the materialising job tests as literals (each a py4j call: 10 k
# took ~5 s at 1.5 M orders); above, they are joined by broadcast.
LITERALS = 2_000
# Up to how many affected keys `prior` brings to the driver to find them among the flagged keys
# (measured at 1.5 M orders: 15 k keys in well under a second); above, a broadcast semi-join.
COLLECTED = 500_000
_CHANGE_BEFORE, _CHANGE_AFTER = "_lj_had_", "_lj_has_"


@dataclass(frozen=True)
class Prior:
    """The flagged keys as the last batch left them (`before`, None: no table yet, or one from
    before the kind flagged these measures or keyed its rows so), those among this batch's
    affected keys (`old`; every row of `before` when the batch rewrites every key), and whether
    the batch counts the whole view (`whole`: no table or totals to go on from, a repair)."""

    path: str
    version: int  # the table's version the batch read (-1: none)
    before: pa.Table | None
    old: pa.Table | None
    whole: bool


def prior(ctx: BatchContext, kind: ViewKindLogic, rebuilt: Rebuilt, path: str) -> Prior:
    """Read the flagged keys at the batch's pin and find the affected keys among them: no job
    when the table is empty or the batch counts every key, else one (module docstring)."""
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import functions as F

    plan = ctx.plan
    version = plan.pinned_versions.get(PIN, plan.start_versions.get(PIN, -1))
    key = list(kind.output_key)
    if version < 0 or not DeltaTable.is_deltatable(path):
        return Prior(path, -1, None, None, True)
    before = DeltaTable(path, version=version).to_pyarrow_table()
    if before.column_names != _columns(key, kind.health_kept):
        return Prior(path, version, None, None, True)  # an older table's: counted again from the view
    last = Health.from_metrics(plan.last_metrics)
    if rebuilt.affected is None or plan.mode is not BatchMode.INCREMENTAL or last is None:
        return Prior(path, version, before, before, True)
    if before.num_rows == 0:
        return Prior(path, version, before, before, False)
    affected = rebuilt.affected.select(*key)
    if rebuilt.affected_count is not None and rebuilt.affected_count <= COLLECTED:
        found = affected.collect()  # the affected keys, materialised already: one job
    else:  # too many for the driver: the flagged keys go to them (a broadcast, one job more)
        found = affected.join(
            F.broadcast(ctx.spark.createDataFrame(before.select(key))), key, "left_semi"
        ).collect()
    wanted = {_key(r.asDict(), key) for r in found}
    mask = [_key(r, key) in wanted for r in before.select(key).to_pylist()]
    return Prior(path, version, before, before.filter(pa.array(mask, type=pa.bool_())), False)


def _columns(key: Sequence[str], kept: Sequence[str]) -> list[str]:
    """The flagged keys table's columns."""
    return [*key, *(flag(m) for m in kept), SINCE_BATCH, SINCE]


def _key(row: Mapping[str, Any], key: Sequence[str]) -> tuple[Any, ...]:
    """A key as the flagged keys compare it, from a row of delta-rs's or of Spark's: a
    timestamp as a naive local time, as PySpark's `collect` returns it; binary as bytes."""
    from datetime import datetime

    def plain(v: Any) -> Any:
        if isinstance(v, datetime) and v.tzinfo:
            return v.astimezone().replace(tzinfo=None)
        return bytes(v) if isinstance(v, bytearray) else v

    return tuple(plain(row[c]) for c in key)


def _literal(value: Any) -> Column:
    """A key value as a Spark literal: a naive timestamp (delta-rs's of a `timestamp_ntz` key)
    from its text, so no time zone shifts it."""
    from datetime import datetime

    from pyspark.sql import functions as F

    if isinstance(value, datetime) and value.tzinfo is None:
        return F.lit(value.isoformat(" ")).cast("timestamp_ntz")
    return F.lit(value)


def membership(key: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> Column:
    """Whether a row's key is one of `rows`' (at most `LITERALS` flagged keys): a set of
    literals in the plan (Spark's InSet), so neither side is shuffled or broadcast and no job
    is added to the one that evaluates it."""
    from pyspark.sql import functions as F

    if not rows:
        return F.lit(False)
    if len(key) == 1:
        return F.col(key[0]).isin([_literal(r[key[0]]) for r in rows])
    literals = [F.struct(*[_literal(r[c]).alias(c) for c in key]) for r in rows]
    return F.struct(*[F.col(c) for c in key]).isin(literals)


def beside(
    ctx: BatchContext, kind: ViewKindLogic, rows: DataFrame, before: Prior
) -> tuple[DataFrame, list[Column]]:
    """The flagged rows to materialise, and what their job also counts: each measure, the rows
    kept, the flagged rows themselves (key and flags: bounded by the affected keys in an
    incremental batch; every flagged key in a full recompute), the rows that waited before the
    batch and no longer do (`late`), and in an incremental batch the rows the kind carried as
    they were (null flags, a list_join's unchanged list) that were flagged before: they keep
    their old flags. The rows are tested against the flagged keys as literals; above `LITERALS`
    of them, they are joined by broadcast (a job more)."""
    from pyspark.sql import functions as F

    key, kept, waits = list(kind.output_key), kind.health_kept, kind.waits
    out = sums(kind.health_measures)
    any_flag = F.greatest(*[F.col(flag(m)) for m in kept], F.lit(0)) > 0
    struct = F.struct(*key, *[F.col(flag(m)).cast("long").alias(flag(m)) for m in kept])
    out.append(F.collect_list(F.when(any_flag, struct)).alias(_FLAGGED))
    old = before.old.to_pylist() if before.old is not None else []
    carry = not before.whole  # a kind carries rows in an incremental batch only
    waited = [r for r in old if waits is not None and (r[flag(waits)] or 0) > 0]
    watched = old if carry else waited
    if not watched:
        return rows, out
    if len(watched) <= LITERALS:
        was, held = membership(key, waited), membership(key, old)
    else:
        import pyarrow as pa

        names = [f"{_SIDE}{c}" for c in key]
        side = pa.Table.from_pylist(
            [{**{n: r[c] for n, c in zip(names, key, strict=True)}, _WAS: r in waited} for r in watched]
        )
        joined = rows.join(
            F.broadcast(ctx.spark.createDataFrame(side)),
            [rows[c] == F.col(n) for c, n in zip(key, names, strict=True)],
            "left",
        )
        rows = joined.select(
            *[rows[spark_quoted(c)] for c in rows.columns], F.col(_WAS), F.col(names[0]).alias(_HELD)
        )
        was, held = F.coalesce(F.col(_WAS), F.lit(False)), F.col(_HELD).isNotNull()
    if carry:
        carried = F.col(flag(kept[0])).isNull() & held
        out.append(F.collect_list(F.when(carried, F.struct(*key))).alias(_CARRIED))
    if waits is not None:
        out.append(F.count_if(was & (F.col(flag(waits)) == 0)).alias(_LATE))
    return rows, out


@dataclass(frozen=True)
class ChangeCounts:
    """The join health a kind counts from one source's net changes (`ViewKindLogic.
    health_changes`): for each measure, the changed rows that had it before the batch (a null
    in one of its columns of `_lj_before`) and those that have it after (an upsert with a null
    there). Counted in the job that materialises the changes (`columns`), or on the driver
    from the rows netted there (`of_rows`): one rule, two writings, held together by
    tests/steps/test_change_counts.py."""

    measures: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.measures)

    def columns(self) -> list[Column]:
        """The aggregates, for Spark's job over the changes."""
        from pyspark.sql import functions as F

        out = []
        for measure, columns in self.measures:
            had = F.col(BEFORE).isNotNull() & null_key([f"{BEFORE}.{c}" for c in columns])
            has = (F.col(CHANGE) == ChangeKind.UPSERT.value) & null_key(list(columns))
            out += [
                F.count_if(had).alias(_CHANGE_BEFORE + measure),
                F.count_if(has).alias(_CHANGE_AFTER + measure),
            ]
        return out

    def of_rows(self, net: Sequence[Mapping[str, Any]]) -> dict[str, int]:
        """The same figures from net change rows on the driver (`change_feed.net_rows`)."""
        out = {}
        for measure, columns in self.measures:
            out[_CHANGE_BEFORE + measure] = sum(
                1 for r in net if r[BEFORE] is not None and any(r[BEFORE][c] is None for c in columns)
            )
            out[_CHANGE_AFTER + measure] = sum(
                1 for r in net if r[CHANGE] == ChangeKind.UPSERT.value and any(r[c] is None for c in columns)
            )
        return out


def change_counts(kind: ViewKindLogic, source: str) -> ChangeCounts:
    """What join health counts from `source`'s net changes: in the job that materialises them,
    or on the driver for a range read there (engine/changes.py)."""
    return ChangeCounts(
        tuple(
            (measure, tuple(columns))
            for measure, (name, columns) in kind.health_changes.items()
            if name == source
        )
    )


def counted_changes(kind: ViewKindLogic, seen: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """What `change_counts` found, per measure: (before, after)."""
    return {
        m: (int(seen[_CHANGE_BEFORE + m] or 0), int(seen[_CHANGE_AFTER + m] or 0))
        for m in kind.health_changes
        if _CHANGE_BEFORE + m in seen
    }


WRITE_ATTEMPTS = 5  # a commit refused because another run's landed first is tried again


@dataclass(frozen=True)
class FlaggedUpdate:
    """The flagged keys after the batch, and whether they differ from the table's (then step 6
    writes them, one delta-rs commit, before the output commit)."""

    path: str
    rows: pa.Table
    changed: bool
    version: int  # the table's version the batch read (-1: none)

    def write(self) -> int | None:
        """Write the rows when they changed; the version the batch pins (None: no table).

        Every batch reads the table at the version the last batch pinned, never at its newest,
        so a commit another run made since (two runs of one batch write the same rows) does not
        make these rows wrong: a refused commit is tried again on the newest version. Only the
        output's commit decides which run's batch is in (engine/write.py)."""
        from deltalake import DeltaTable, write_deltalake
        from deltalake.exceptions import CommitFailedError

        if not self.changed:
            return self.version if self.version >= 0 else None
        for attempt in range(WRITE_ATTEMPTS):
            table = DeltaTable(self.path) if DeltaTable.is_deltatable(self.path) else None
            try:
                write_deltalake(table or self.path, self.rows, mode="overwrite", schema_mode="overwrite")
            except CommitFailedError as exc:
                # Refused for another reason than a conflict (an append-only table): no retry helps.
                if attempt + 1 == WRITE_ATTEMPTS or not delta_rs_conflict(exc):
                    raise
                continue
            # The table object moves to its own commit; a path is read again (a first write).
            return int(table.version() if table is not None else DeltaTable(self.path).version())
        raise AssertionError("unreachable")


def count_batch(
    ctx: BatchContext,
    kind: ViewKindLogic,
    rebuilt: Rebuilt,
    new_rows: DataFrame,
    seen: Mapping[str, Any],
    last: Health | None,
    before: Prior,
) -> tuple[Health, FlaggedUpdate]:
    """The view's health after this batch, and its flagged keys.

    `new_rows`: the materialised flagged rows; `seen`: what their job observed; `last`: the
    health the last committed batch logged; `before`: the flagged keys before the batch."""
    measures, kept, key, waits = kind.health_measures, kind.health_kept, list(kind.output_key), kind.waits
    plan = ctx.plan
    late = int(seen.get(_LATE, 0))  # among the rows rewritten: every key's in a full recompute
    if rebuilt.affected is None:  # every key rewritten: the rows counted are the whole view
        after = {m: int(seen[flag(m)]) for m in measures} | dict(rebuilt.health_counts)
        flagged = list(seen[_FLAGGED] or [])
    elif before.whole:
        # No flagged keys or totals to go on from: the whole view, counted once.
        whole = derived(ctx, kind, health=True)
        row = whole.rows.agg(*beside(ctx, kind, whole.rows, replace(before, old=None))[1]).first()
        assert row is not None
        after = {m: int(row[flag(m)]) for m in measures} | dict(whole.health_counts)
        flagged = list(row[_FLAGGED] or [])
    else:
        assert before.old is not None and last is not None
        # Kept flags: the affected keys' before the batch from the table; counted from the
        # changes: the changed rows' before and after (`ViewKindLogic.health_changes`).
        old = {m: _sum(before.old, flag(m)) for m in kept}
        new = {m: int(seen[flag(m)]) for m in kept}
        for m in kind.health_changes:
            old[m], new[m] = ctx.health_changes.get(m, (0, 0))
        flagged = list(seen[_FLAGGED] or [])
        # A row carried as it was keeps its flags: what the table held for it.
        held = {_key(r, key): r for r in before.old.to_pylist()}
        for carried in seen.get(_CARRIED) or []:
            was = held[_key(carried.asDict(), key)]
            flagged.append(was)
            for m in kept:
                new[m] += int(was[flag(m)] or 0)
        after = totals({m: last.totals.get(m, 0) for m in old}, old=old, new=new)
    update = _flagged(before, key, kept, waits, new_rows, flagged, batch_id=plan.batch_id, whole=before.whole)
    batches, seconds = oldest(update.rows, ctx.plan.batch_id, waits)
    examples = {waits: _examples(update.rows, key, waits)} if waits else {}
    rows = source_rows(ctx, kind)
    return Health(after, rows, batches, seconds, late, examples), update


def _sum(rows: pa.Table, column: str) -> int:
    import pyarrow.compute as pc

    return int(pc.sum(rows[column]).as_py() or 0) if rows.num_rows else 0


def source_rows(ctx: BatchContext, kind: ViewKindLogic) -> int:
    """The rows a share is of: the kind's row source at the batch's pin, from its files'
    statistics less its deletion vectors' rows (delta-rs, no job); a Spark count only where a
    file has no row count in its statistics."""
    source = kind.health_rows
    version = ctx.version(source)
    found = row_count(source.path, version)
    if found is not None:
        return found
    return int(ctx.spark.read.format("delta").option("versionAsOf", version).load(source.path).count())


def _flagged(
    before: Prior,
    key: list[str],
    measures: Sequence[str],
    waits: str | None,
    frame: DataFrame,
    flagged: list[Any],
    *,
    batch_id: int,
    whole: bool,
) -> FlaggedUpdate:
    """The flagged keys after the batch: those before, less the affected keys' (all of them with
    `whole`), plus `flagged` (the new rows with a flag). A key that waited before and still does
    keeps its `since`."""
    from datetime import UTC, datetime

    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import TimestampType

    now = datetime.now(UTC)
    types = {f.name: f.dataType for f in frame.schema.fields}
    held: dict[tuple[Any, ...], dict[str, Any]] = {}
    if before.before is not None:
        held = {_key(r, key): r for r in before.before.to_pylist()}
    gone = set(held) if whole or before.old is None else {_key(r, key) for r in before.old.to_pylist()}
    kept = [r for k, r in held.items() if k not in gone]
    added = []
    for item in flagged:
        values = item.asDict() if hasattr(item, "asDict") else dict(item)
        k = _key(values, key)
        # Spark gives a timestamp back as a naive local time; the table keeps it in UTC.
        row = {
            c: values[c].astimezone(UTC) if isinstance(types[c], TimestampType) and values[c] else values[c]
            for c in key
        }
        row.update({flag(m): int(values[flag(m)] or 0) for m in measures})
        waiting = waits is not None and row[flag(waits)] > 0
        was = held.get(k)
        if (
            waiting
            and was is not None
            and was.get(SINCE_BATCH) is not None
            and (was.get(flag(waits or "")) or 0) > 0
        ):
            row[SINCE_BATCH], row[SINCE] = was[SINCE_BATCH], was[SINCE]
        else:
            row[SINCE_BATCH], row[SINCE] = (batch_id, now) if waiting else (None, None)
        added.append(row)
    schema = pa.schema(
        [
            *[pa.field(c, to_arrow_type(types[c])) for c in key],
            *[pa.field(flag(m), pa.int64()) for m in measures],
            pa.field(SINCE_BATCH, pa.int64()),
            pa.field(SINCE, pa.timestamp("us", tz="UTC")),
        ]
    )
    rows = pa.Table.from_pylist([*kept, *added], schema=schema)
    if before.before is None:
        changed = True
    else:
        old_rows = [held[k] for k in gone if k in held]
        changed = _signature(old_rows, key, measures) != _signature(added, key, measures)
    return FlaggedUpdate(before.path, rows, changed, before.version)


def _signature(
    rows: Sequence[Mapping[str, Any]], key: list[str], measures: Sequence[str]
) -> set[tuple[Any, ...]]:
    return {(*_key(r, key), *(int(r[flag(m)] or 0) for m in measures)) for r in rows}


def oldest(rows: pa.Table, batch_id: int, waits: str | None) -> tuple[int | None, float | None]:
    """The oldest waiting row's age: in batches (this batch's id less its first) and seconds."""
    import time

    import pyarrow.compute as pc

    if waits is None or rows.num_rows == 0:
        return None, None
    waiting = rows.filter(pc.greater(rows[flag(waits)], 0))
    if waiting.num_rows == 0:
        return None, None
    first = int(pc.min(waiting[SINCE_BATCH]).as_py())
    since = pc.min(waiting[SINCE]).as_py()
    return batch_id - first, max(time.time() - since.timestamp(), 0.0)


def _examples(rows: pa.Table, key: list[str], waits: str) -> list[str]:
    """The first waiting keys in key order, as a breach's message names them."""
    import pyarrow.compute as pc

    waiting = rows.filter(pc.greater(rows[flag(waits)], 0)).select(key)
    values = sorted((tuple(r[c] for c in key) for r in waiting.to_pylist()), key=lambda t: tuple(map(str, t)))
    return [shown_value(tuple(key), v) for v in values[:EXAMPLES]]
