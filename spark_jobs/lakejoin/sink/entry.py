"""The sink's one entry for a view's output batch: `write` chooses the batch's write
(strategy.choose_output over the batch's facts, sink/facts.py), applies it (`apply`, by the
writers of writers.py and key_upsert.py, each stamped with the batch commit's Stamp), and, when
the write declines before committing anything (the one-commit upsert refused the table or found
its rows not the batch's old rows; delta-rs failed inside the driver's MERGE), chooses again
with what it learnt. Each re-choice rules one strategy out, so a batch is tried at most three
ways; a conflict or any other error is raised as it is (sink/conflicts.py maps it).

A state table a view keeps enters here too (`write_state`, with the `StateWrite` the view kind
returns): rewritten for a schema change under a full refresh, filled when it holds no data file,
else a MERGE by `strategy.choose` (none when no key changed), stamped with the state's Stamp.

>>> written = write(spark, KeyedWrite(path, ("id",), recomputed, affected, commit))  # doctest: +SKIP
>>> written.strategy, written.note                                                    # doctest: +SKIP
(<Strategy.UPSERT: 'upsert'>, None)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from lakejoin.delta.markers import OutputCommit
from lakejoin.delta.sql_text import spark_columns
from lakejoin.sink import driver_merge, key_upsert
from lakejoin.sink.facts import WriteFacts
from lakejoin.sink.keyed_tables import ensure_keyed_table, schema_drift
from lakejoin.sink.merge_terms import KEEP, PRESENT, MergeCounts
from lakejoin.sink.stamp import Stamp
from lakejoin.sink.strategy import OutputFacts, SinkFacts, Strategy, Target, choose, choose_output
from lakejoin.sink.writers import (
    HeldRows,
    KeyedSource,
    change_rows,
    fill,
    keyed_source,
    merge_keyed,
    replace_output,
    told_driver_failed,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from lakejoin.delta.key_ranges import KeyRange


@dataclass(frozen=True)
class KeyedWrite:
    """What a batch asks of the sink for its output at `path` (keyed by `key`): make the rows of
    the affected keys (`affected`, one row each; None: every key, a full refresh) what
    `recomputed` says, in one commit, the batch commit (`commit`). `counted` and `bounds`: the
    affected keys' count and range when the batch's job gave them; `previous`: their rows at the
    previous pins when the view kind derived them; `held`: the rows on the driver (a batch of
    few keys). `drift`: the schema change the output's log shows; `rewrite`: why the plan
    rewrites the output under a full refresh."""

    path: str
    key: tuple[str, ...]
    recomputed: DataFrame
    affected: DataFrame | None
    commit: OutputCommit
    counted: int | None = None
    bounds: KeyRange | None = None
    previous: DataFrame | None = None
    held: HeldRows | None = None
    drift: str | None = None
    rewrite: str | None = None


@dataclass(frozen=True)
class Written:
    """What the sink did with a batch: the `strategy` that wrote it, its `counts` (with the batch
    commit's version), a `note` for the batch's summary (why the table was rewritten, why the
    upsert declined), and what was `tried` first and why it gave the batch up."""

    strategy: Strategy
    counts: MergeCounts
    note: str | None = None
    tried: tuple[tuple[Strategy, str], ...] = ()


@dataclass(frozen=True)
class StateWrite:
    """What a batch asks of the sink for a state table a view keeps at `path` (keyed by `key`,
    of `schema`): make the rows of the keys in `rows` what it says (its boolean `KEEP` column
    false: the key is deleted; `columns` compared, so an unchanged row is not rewritten) and,
    with `full`, delete every key not in it. The view kind builds it (views/base.write_state);
    engine/write.py stamps and writes it, once per attempt.

    >>> StateWrite(path, ("id",), ("id", "v"), rows.withColumn(KEEP, keep), False, schema)  # doctest: +SKIP
    """

    path: str
    key: tuple[str, ...]
    columns: tuple[str, ...]
    rows: DataFrame
    full: bool
    schema: StructType


class DeclinedError(Exception):
    """A write gave the batch up before committing anything (`why`; `note`, what the batch's
    summary says of it), so another strategy writes it."""

    def __init__(self, why: str, note: str | None = None) -> None:
        super().__init__(why)
        self.why, self.note = why, note


class Writers(Protocol):
    """What `written` applies a strategy with: the batch's key count, asked only by a choice
    that needs it, and the writers themselves."""

    def keys(self) -> int:
        """How many keys the MERGE writes (a full write's differences are counted here)."""
        ...

    def apply(self, strategy: Strategy, facts: OutputFacts) -> MergeCounts:
        """Write the batch by `strategy`; raises DeclinedError when it gives the batch up."""
        ...


def write(spark: SparkSession, w: KeyedWrite, facts: WriteFacts | None = None) -> Written:
    """Write `w`'s batch into its output, the way `choose_output` says (`facts`: the batch's,
    when gathered already)."""
    facts = facts or WriteFacts.of(spark, w.path, w.recomputed)
    told = OutputFacts(
        full=w.affected is None,
        drift=w.drift,
        rewrite=w.rewrite,
        counted=w.counted,
        settings=facts.settings,
        table=facts.table,
    )
    return written(told, _Applied(spark, w, facts))


def write_state(spark: SparkSession, w: StateWrite, stamp: Stamp | None) -> Written:
    """Write `w` into its state table, created first when missing, stamped with `stamp` (its
    txn and marker; None: unstamped, as a benchmark's or a test's table is): the table
    overwritten when a full write finds its schema changed (a definition change refreshes the
    view in full), filled laid out by key when it holds no data file, else the MERGE `choose`
    picks (NO_COMMIT when no key differs), Spark's when the driver's fails before its commit."""
    from pyspark.sql import functions as F

    if stamp is None:
        ensure_keyed_table(spark, w.path, w.schema)
    else:
        with stamp.spark(spark):  # created inside the state's stamp, as it always was
            ensure_keyed_table(spark, w.path, w.schema)
    if w.full:
        drift = schema_drift(spark, w.path, w.schema)
        if drift:  # the index rebuilt whole, in one commit
            counts = replace_output(w.path, w.rows.drop(KEEP), stamp)
            return Written(Strategy.REWRITE, counts, f"rewritten for a schema change: {drift}")
    facts = WriteFacts.of(spark, w.path, w.rows)
    if w.full and facts.settings.key_ranges and facts.table.files == 0:
        rows = w.rows.where(F.col(KEEP)).select(*spark_columns(w.columns))
        return Written(Strategy.REWRITE, fill(spark, w.path, rows, w.key, stamp))
    keyed = keyed_source(spark, w.path, w.rows, w.key, w.columns, full=w.full)
    batch = SinkFacts(Target.STATE, full=w.full, keys=keyed.keys, settings=facts.settings, table=facts.table)
    chosen = choose(batch)
    tried: tuple[tuple[Strategy, str], ...] = ()
    if chosen is Strategy.DRIVER_MERGE:
        try:
            counts = merge_keyed(chosen, spark, w.path, keyed, batch, w.key, w.columns, stamp)
            return Written(chosen, counts)
        except driver_merge.DriverMergeFailedError as exc:  # nothing committed: Spark's MERGE writes it
            told_driver_failed(w.path, exc)
            batch, tried = replace(batch, driver_failed=True), ((chosen, str(exc)),)
            chosen = choose(batch)
    return Written(
        chosen, merge_keyed(chosen, spark, w.path, keyed, batch, w.key, w.columns, stamp), tried=tried
    )


def written(told: OutputFacts, writers: Writers) -> Written:
    """Choose, apply, and choose again with what a write that declined learnt (`told`, one fact
    changed): the upsert declined rules the upsert out, a driver's MERGE that failed rules it out."""
    tried: list[tuple[Strategy, str]] = []
    notes: list[str] = []
    while True:
        strategy = choose_output(told, writers.keys)
        assert all(strategy is not done for done, _ in tried), f"{strategy} chosen again after {tried}"
        try:
            counts = writers.apply(strategy, told)
        except DeclinedError as exc:
            tried.append((strategy, exc.why))
            notes += [exc.note] if exc.note else []
            if strategy is Strategy.UPSERT:
                told = replace(told, upsert_declined=exc.why)
            elif strategy is Strategy.DRIVER_MERGE:
                told = replace(told, driver_failed=True)
            else:
                raise AssertionError(f"{strategy} cannot decline a batch") from exc
            continue
        return Written(strategy, counts, notes[0] if notes else _rewritten(told, strategy), tuple(tried))


def _rewritten(told: OutputFacts, strategy: Strategy) -> str | None:
    """Why the table was overwritten, when it was (a first build laid out by key says nothing)."""
    if strategy is not Strategy.REWRITE:
        return None
    if told.drift is not None:
        return f"rewritten for a schema change: {told.drift}"
    if told.full and told.rewrite is not None:
        return f"rewritten: {told.rewrite}"
    return None


class _Applied:
    """The writers of one batch `w`, and its keyed rows for a MERGE, made when first asked."""

    def __init__(self, spark: SparkSession, w: KeyedWrite, facts: WriteFacts) -> None:
        self.spark, self.w, self.facts = spark, w, facts

    def keys(self) -> int:
        return self._source.keys

    def apply(self, strategy: Strategy, facts: OutputFacts) -> MergeCounts:
        w = self.w
        # The batch commit's marker names the strategy: a log row rebuilt from it says so too.
        commit = replace(w.commit, final=replace(w.commit.final, write=strategy.value))
        stamp = Stamp.batch(commit)
        if strategy is Strategy.REWRITE:
            if _rewritten(facts, strategy) is not None:  # overwritten with the recompute's schema
                return replace_output(w.path, w.recomputed, stamp)
            return fill(self.spark, w.path, w.recomputed, w.key, stamp)  # laid out by key
        if strategy is Strategy.UPSERT:
            return self._upsert(stamp)
        batch = SinkFacts(
            Target.OUTPUT,
            facts.full,
            self._source.keys,
            self.facts.settings,
            self.facts.table,
            facts.driver_failed,
        )
        rows = self._rows if strategy is Strategy.DRIVER_MERGE else None
        try:
            return merge_keyed(
                strategy,
                self.spark,
                w.path,
                self._source,
                batch,
                w.key,
                w.recomputed.columns,
                stamp,
                rows=rows,
            )
        except driver_merge.DriverMergeFailedError as exc:  # nothing committed: another MERGE writes it
            told_driver_failed(w.path, exc)
            raise DeclinedError(str(exc)) from exc

    def _upsert(self, stamp: Stamp) -> MergeCounts:
        """The batch as change rows against the output's old rows of its keys: those the view
        kind derived at the previous pins, else the output's own (read as a MERGE would read
        them: a repair, enrich's `lookup` mode), or, for a full write, the whole table's."""
        w, columns = self.w, self.w.recomputed.columns
        if w.affected is None:
            old = self.spark.read.format("delta").load(w.path).select(*spark_columns(columns))
        else:
            held = (
                w.previous
                if w.previous is not None
                else held_rows(self.spark, w.path, w.affected, w.key, w.bounds)
            )
            old = held.select(*spark_columns(columns))
        changes = change_rows(w.recomputed, old, w.key)
        declined: list[str] = []
        counts = key_upsert.upsert(self.spark, w.path, changes, w.key, columns, stamp, note=declined.append)
        if counts is None:
            why = declined[0] if declined else None
            raise DeclinedError(why or "the one-commit upsert declined", why)
        return counts if w.affected is None else replace(counts, keys=w.counted or 0)

    @cached_property
    def _source(self) -> KeyedSource:
        """The keyed rows a MERGE writes: a full write's differences with the table, or the
        affected keys with their recomputed rows (none: the key is deleted)."""
        from pyspark.sql import functions as F

        w, key = self.w, list(self.w.key)
        if w.affected is None:
            source = w.recomputed.withColumn(KEEP, F.lit(True))
            return keyed_source(self.spark, w.path, source, key, w.recomputed.columns, full=True)
        present = w.recomputed.withColumn(PRESENT, F.lit(True))
        source = w.affected.select(*spark_columns(key)).join(present, on=key, how="left")
        source = source.withColumn(KEEP, F.col(PRESENT).isNotNull()).drop(PRESENT)
        known = None
        if w.counted is not None and w.bounds is not None:
            known = (w.affected, w.counted, w.bounds)
        return keyed_source(self.spark, w.path, source, key, w.recomputed.columns, full=False, known=known)

    @cached_property
    def _rows(self) -> Any:
        """The keyed rows on the driver already (Arrow) for a batch of few keys, else None."""
        held = self.w.held
        return driver_merge.keyed_rows(held.rows, held.keys, self.w.key) if held is not None else None


def held_rows(
    spark: SparkSession,
    path: str,
    affected: DataFrame,
    keys: list[str] | tuple[str, ...],
    bounds: KeyRange | None,
) -> DataFrame:
    """The output's rows of the affected keys (`affected`, materialised, within `bounds` when
    known, on which Delta skips files)."""
    from pyspark.sql import functions as F

    table = spark.read.format("delta").load(path)
    if bounds is not None:
        table = table.where(bounds.covers())
    return table.join(F.broadcast(affected.select(*keys)), on=list(keys), how="left_semi")
