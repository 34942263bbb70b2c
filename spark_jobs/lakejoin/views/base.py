"""What every view kind gives the batch engine (engine/batch.py): its output key, its recompute
of a batch's affected rows, its state tables, and its data quality checks.

The engine owns the protocol: plan, changes, check, write, commit, idempotency. A view kind
owns its semantics: which output keys a batch's changes can affect, how to recompute them, and
how to keep its own state table (rekey's re-keyed index; the other kinds keep none) in step.
What the engine gives a view kind in return, while one batch runs, is views/context.py; the
fan-out rule several kinds share is views/fanout.py, and the reads they share views/reads.py.
`derived` is a kind's full recompute with the input checks off, which the audit compares with
the output and join health counts.

`ViewKindLogic.rebuild` is written once, here: the changes reach driving keys through the
kind's routes, the fan-out rule may choose a full recompute, the affected keys and their rows
are read, then the kind gathers the other rows it needs (`gather`, or `gather_whole` for a full
recompute) and recomputes them now and at the previous pins (`recompute`). A kind fills in
those hooks; rekey, whose driving input is its own index, also its own `affected`. A kind
also explains one key of its view from its inputs at a batch's pins (`explain`, for
`lakejoin explain`), with no Spark.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from lakejoin.delta.key_ranges import KeyRange
from lakejoin.quality.validations import Validation
from lakejoin.spec.explained import Ask, Reading
from lakejoin.spec.model import PipelineSpec, Source, View
from lakejoin.spec.registry import KINDS
from lakejoin.views.context import STATE, Derivation
from lakejoin.views.fanout import FanOutRule, rule_fans_out
from lakejoin.views.reads import Affected, Reach, Route, affected_rows, reached

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakejoin.delta.key_ranges import Keys
    from lakejoin.sink.entry import StateWrite
    from lakejoin.views.context import BatchContext

I = TypeVar("I")  # noqa: E741 - the rows a kind's recompute takes (its own type)


@dataclass(frozen=True)
class Rebuilt:
    """What `rebuild` returns, and all that the later steps of the batch get from it: the
    recomputed output rows, the output keys they replace (None: all keys), the kind's own
    figures reported with the batch (`metrics`: composite rows, conflicts, the fan-out rule's
    figures...), and what `write_state` writes (`state`, of the kind's own type; None for a
    kind without a state table).

    When the view kind materialised the affected keys it says how many there are and their
    range (`key_ranges.materialised`), so the write does not materialise them again.

    `previous`: when the context asks for it (`ctx.derivation.previous`) and the kind can, the
    affected keys' rows at the previous batch's pins, derived from what the batch read (the
    rows at the pin, and the changes' rows before them): by the contract, the output's rows
    of those keys, which the write then need not read (sink/key_upsert.py). None: the write
    reads the output's rows itself."""

    rows: DataFrame
    affected: DataFrame | None
    affected_count: int | None = None
    bounds: KeyRange | None = None
    metrics: Mapping[str, int] = field(default_factory=dict)
    state: Any = None
    previous: DataFrame | None = None
    # Join health a full recompute counts itself, not per output row (rekey's masters dropped
    # for a null derived key), per measure.
    health_counts: Mapping[str, int] = field(default_factory=dict)
    # The rows of an input the batch read for its affected keys (fk_join's right rows, enrich's
    # dimension rows, list_join's left rows), by a name the kind chooses: its checks test the
    # written rows against these, not against the whole input (`held_rows`).
    held: Mapping[str, DataFrame] = field(default_factory=dict)


@dataclass(frozen=True)
class Gathered(Generic[I]):
    """What a kind's `gather` (or `gather_whole`) returns to the rebuild: the rows its recompute
    takes (`now`), the same at the previous pins when it can derive them (`before`; None: the
    write reads the output), and what `Rebuilt` carries from it (`held`, `state`,
    `health_counts`; the metrics go into the dict the rebuild passes)."""

    now: I
    before: I | None = None
    held: Mapping[str, DataFrame] = field(default_factory=dict)
    state: Any = None
    health_counts: Mapping[str, int] = field(default_factory=dict)


def held_rows(ctx: BatchContext, rebuilt: Rebuilt, name: str, source: Source) -> DataFrame:
    """The rows of `source` the batch holds under `name` (`Rebuilt.held`), or its pinned
    snapshot when it holds none (a full recompute read it whole). A small batch's checks then
    scan no input whole (issue 52)."""
    held = rebuilt.held.get(name)
    return held if held is not None else ctx.snapshot(source)


class ViewKindLogic(ABC, Generic[I]):
    """One view kind's part of a batch, as functions of their inputs.

    A kind object holds only what its constructor derives from the spec and the view; no step
    leaves anything on it for a later one. The engine calls, in order:
    - `rebuild(ctx, changes)` -> `Rebuilt`: the recomputed rows with their affected keys, the
      kind's metrics and its state to write;
    - `validations(ctx, written)` -> the checks of the rows about to be written;
    - `write_state(ctx, rebuilt)`, given what `rebuild` returned.
    The inputs' columns at the pinned versions come in `ctx.schemas` (checked against the
    spec before any step runs); a kind derives its chosen columns from them where it needs
    them."""

    # The order of the driver's collects in `reads.reached` (fk_join's and list_join's: the
    # driving keys before the lookups), kept per kind so that each keeps its Spark jobs.
    driving_first: ClassVar[bool] = False

    @property
    def state_name(self) -> str:
        """What the view's state table is called in messages (its registry entry's `state`)."""
        return self.declared.state or "state table"

    @property
    def health_measures(self) -> tuple[str, ...]:
        """Join health (views/health_flags.py): the measures `rebuild` flags per row while
        `ctx.derivation.health` is on (the registry entry's flagged measures, in its order)."""
        return tuple(m.name for m in self.declared.measures if m.flagged)

    @property
    def waits(self) -> str | None:
        """The measure whose rows wait for a row of another input (the batch keeps them, with
        since when, in a table)."""
        return self.declared.waits

    @property
    def health_kept(self) -> tuple[str, ...]:
        """The flag measures the view's flagged keys table keeps per key, to count the affected
        keys' flags before a batch (engine/health.py): all but those `health_changes` counts."""
        return tuple(m for m in self.health_measures if m not in self.health_changes)

    @property
    def health_changes(self) -> Mapping[str, tuple[str, tuple[str, ...]]]:
        """Measures a batch counts from a change source's net changes, before and after, in the
        job that materialises them: a measure of a row of that source alone (an fk_join's null
        fk), which only a change of that row can change. Per measure, the source and the
        columns of which a null marks the row. Keeping such rows in the flagged keys would copy
        most of a view with an optional fk there. Read off the registry entry's measures."""
        d = self.view.definition
        return {m.name: _counted(*m.from_changes(d)) for m in self.declared.measures if m.from_changes}

    @property
    def health_rows(self) -> Source:
        """The input whose rows a health share is of (fk_join's and list_join's left, enrich's
        facts, rekey's master): the first."""
        return self.sources[0]

    def __init__(self, spec: PipelineSpec, view: View) -> None:
        self.spec = spec
        self.view = view
        self.declared = KINDS[view.kind]

    @property
    def sources(self) -> tuple[Source, ...]:
        return tuple(self.spec.sources[name] for name in self.view.inputs)

    @property
    def change_sources(self) -> tuple[Source, ...]:
        """The sources whose changes a batch reads; the others are only read at pinned versions.
        A batch with no new version of any of these has nothing to do."""
        return self.sources

    def state_tables(self, state_path: str) -> dict[str, str]:
        """The view's state tables, by the name under which a plan pins each one's version
        (none unless its registry entry names one)."""
        return {STATE: state_path} if self.declared.state else {}

    @property
    def output_key(self) -> tuple[str, ...]:
        """The column(s) that identify an output row (as the view's definition says)."""
        return self.view.definition.output_key(lambda name: self.spec.sources[name].key)

    @property
    def driving(self) -> Source:
        """The input whose keys are the rebuild's affected keys (its first)."""
        return self.sources[0]

    @property
    def routes(self) -> tuple[Route, ...]:
        """How the other inputs' changes reach driving rows (none by default)."""
        return ()

    def rebuild(self, ctx: BatchContext, changes: Mapping[str, DataFrame] | None) -> Rebuilt:
        """Recompute the output rows this batch affects (every row when `changes` is None).

        Receives the batch context and `changes`, which maps each change source to its net
        changed rows since the last batch (see delta/change_feed.net_changes). Returns the rows, their
        affected keys, the kind's metrics and the state `write_state` is to write. A failure
        here leaves nothing written.
        """
        metrics: dict[str, int] = {}
        if changes is not None:
            reach = self.reach(ctx, changes)
            if not self.fans_out(ctx, reach, metrics):
                affected = self.affected(ctx, changes, reach)
                return self._rebuilt(
                    ctx, self.gather(ctx, changes, affected, metrics), affected.keys, metrics
                )
        return self._rebuilt(ctx, self.gather_whole(ctx, metrics), None, metrics)

    def _rebuilt(
        self, ctx: BatchContext, got: Gathered[I], keys: Keys | None, metrics: dict[str, int]
    ) -> Rebuilt:
        rows = self.recompute(ctx, got.now, flags=ctx.derivation.health)
        previous = None if got.before is None else self.recompute(ctx, got.before, flags=False)
        affected, count, bounds = keys if keys is not None else (None, None, None)
        return Rebuilt(
            rows,
            affected,
            count,
            bounds,
            metrics=metrics,
            state=got.state,
            previous=previous,
            health_counts=got.health_counts,
            held=got.held,
        )

    def reach(self, ctx: BatchContext, changes: Mapping[str, DataFrame]) -> Reach:
        """The driving keys the other inputs' changes reach through the kind's routes
        (`reads.reached`)."""
        return reached(ctx, self.driving, self.routes, changes, driving_first=self.driving_first)

    @property
    def fanout(self) -> FanOutRule | None:
        """The kind's fan-out rule (views/fanout.py): which side's rows the changes of its
        routes reach, and its settings. None: a kind without routes, which never recomputes in
        full for a fan-out."""
        return None

    def fans_out(self, ctx: BatchContext, reach: Reach, metrics: dict[str, int]) -> bool:
        """Whether the changes reach so many driving rows that the batch recomputes the whole
        view instead (the kind's `fanout` rule, its figures put in `metrics`)."""
        rule = self.fanout
        return rule is not None and rule_fans_out(ctx, rule, reach.count, metrics)

    def affected(self, ctx: BatchContext, changes: Mapping[str, DataFrame], reach: Reach) -> Affected:
        """The affected driving keys and their rows (`reads.affected_rows`)."""
        return affected_rows(ctx, self.driving, changes[self.driving.name], reach)

    @abstractmethod
    def gather(
        self, ctx: BatchContext, changes: Mapping[str, DataFrame], affected: Affected, metrics: dict[str, int]
    ) -> Gathered[I]:
        """The rows the recompute of the `affected` keys takes, now and at the previous pins
        (when `ctx.derivation.previous` asks and the kind can), and what `Rebuilt` carries."""

    @abstractmethod
    def gather_whole(self, ctx: BatchContext, metrics: dict[str, int]) -> Gathered[I]:
        """The rows a full recompute takes: every input whole (`ctx.whole_unique`)."""

    @abstractmethod
    def recompute(self, ctx: BatchContext, rows: I, *, flags: bool) -> DataFrame:
        """The output rows of `rows` (lazily: no Spark job), flagged with their join health
        (views/health_flags.py) when `flags`."""

    @abstractmethod
    def write_state(self, ctx: BatchContext, rebuilt: Rebuilt, *, since: int) -> tuple[StateWrite, ...]:
        """The writes that bring the view's state tables up to the pinned versions from
        `rebuilt.state` (what `rebuild` returned); engine/write.py stamps each and writes it
        through the sink's entry (sink/entry.write_state) before the output commit (not in a
        repair). They must leave the table exact at the batch's pins whatever commits after the
        state's pin wrote, up to `since`, the newest version the write starts from (a crashed
        attempt's, another run's at other pins): state is a function of the pinned inputs,
        rewritten key by key, and the keys those commits touched go back to what they were at
        the pin. Nothing is written here."""

    @abstractmethod
    def validations(self, ctx: BatchContext, written: DataFrame, rebuilt: Rebuilt) -> list[Validation]:
        """Great Expectations checks of `written`, the materialised rows the batch is about to
        write (run before its output commit: a failing blocking check leaves nothing committed),
        against the input rows `rebuilt` holds (`held_rows`).
        Each validation's rows are at most one per row of `written` (the checks choose their
        engine by that count)."""

    @abstractmethod
    def explain(self, ask: Ask) -> Reading:
        """What the view's inputs say of one key at a batch's pins (`lakejoin explain`): the
        input rows that make its row, the keys whose changes lead to it, and why there is no
        row (`ask.absent`) or which master a rekey kept. Read with delta-rs (views/explained.py),
        never Spark: `lakejoin explain` needs no JVM."""


class LeftRightLogic(ViewKindLogic[I]):
    """A kind that joins a left input, its driving one, with a right one (the two joins): its
    two sources, and the order of the driver's collects they share (`driving_first`)."""

    driving_first = True

    def __init__(self, spec: PipelineSpec, view: View) -> None:
        super().__init__(spec, view)
        # The view's inputs are the join's left, then its right (each once, a self-join's too).
        self.left, self.right = self.sources


def _counted(source: str, columns: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    return source, tuple(columns)


def derived(ctx: BatchContext, kind: ViewKindLogic, *, health: bool = False, on_driver: int = 0) -> Rebuilt:
    """Every row the inputs at the batch's pins give the view, lazily: the kind's full recompute
    with the input checks off (the batch ran them), its inputs of at most `on_driver` rows read
    on the driver. The audit (engine/audit.py) compares them with the output; join health
    (engine/health.py) recounts them (flagged: `health`) when a batch has no flagged keys or
    totals to go on from."""
    how = Derivation(health=health, check_inputs=False, inputs_on_driver=on_driver)
    return kind.rebuild(ctx.deriving(how), None)
