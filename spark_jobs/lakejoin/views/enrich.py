"""enrich: a fact table enriched from several small dimension tables by broadcast joins.

`purchases(purchase_id, customer_id, product_id, qty)` with the dimensions customers and
products gives `purchase_id, customer_id, product_id, qty, customer_name, product_title, ...`:
the fact columns, then each dimension's chosen columns with the dimension's prefix. One output
row per fact key. The fact side is never shuffled: each dimension is broadcast to it, unless it
is larger than `broadcast_limit_mb`, in which case the batch warns with its size and joins it
with a shuffle instead.

Two modes (DESIGN §1):
- `lookup` (KIP-99): a fact is enriched with the dimensions as they stand when the batch that
  processes it runs. Dimension changes do not rewrite it; only a change of the fact's own
  content (or a full refresh) re-enriches it: a fact written back as it was keeps its
  enrichment, since such a write is no change (delta/change_feed.net_changes). A batch reads
  the fact's changes alone.
- `propagate` (KIP-314): a dimension change rewrites every fact that references that key now.
  The pinned fact table is its own routing index: the facts whose fk column holds a changed
  dimension key at the pin are those, read by the key and fk columns alone, so the output
  equals a recompute at the pinned versions. A fact whose fk moved is a fact change, rewritten
  anyway. No state table (docs/decisions.md, "State only where it pays").

Fan-out: before a propagate batch, the facts the changed dimension keys reach are counted. When
they are more than `fanout_threshold` of all facts (a country rename can touch 40 %), the batch
recomputes the whole view instead, which is cheaper at that size; the choice and the reason go
into the batch's notes and metrics.

Each dimension joins `left` (default: a fact without a match keeps null dimension columns) or
`inner` (the fact is left out until its dimension row exists).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from lakejoin.delta.change_feed import before_rows
from lakejoin.quality import checks as quality
from lakejoin.quality.validations import Validation
from lakejoin.spec.explained import Ask, Reading, Role, why_not_joined
from lakejoin.spec.kind_parts import carried_columns
from lakejoin.spec.model import Dimension, EnrichMode, JoinHow, Key, PipelineSpec, Source, View
from lakejoin.views.base import Gathered, Rebuilt, ViewKindLogic, held_rows
from lakejoin.views.context import BatchContext
from lakejoin.views.explained import driving, looked_up
from lakejoin.views.fanout import FanOutRule
from lakejoin.views.health_flags import flag
from lakejoin.views.joins import Flags, JoinStrategy, SideRows, joined, previous_rows
from lakejoin.views.reads import Affected, Route, fk_referenced_rows, fk_route

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakejoin.sink.entry import StateWrite

log = logging.getLogger("lakejoin")
MB = 1024 * 1024


@dataclass(frozen=True)
class DimensionRows:
    """One dimension's part in a recompute: its rows, key, chosen columns, join strategy."""

    dimension: Dimension
    rows: DataFrame
    key: Key
    columns: Sequence[str]
    broadcast: bool


def _dimension_name(index: int) -> str:
    """The name under which a batch holds a dimension's rows (`Rebuilt.held`): by position, as
    two dimensions may read one table through different fks."""
    return f"dimension {index}"


def recompute(fact_rows: DataFrame, dimensions: Sequence[DimensionRows], *, flags: bool = False) -> DataFrame:
    """The output rows of the given facts: fact columns, then each dimension's prefixed columns.

    A `left` dimension keeps a fact whose fk is null (in any column) or unmatched (null
    columns); an `inner` one drops it. Matching is exact equality of every fk column.

    With `flags` (views/health_flags.py), every fact, flagged `missing_dimension` when an fk
    without nulls finds no row of its dimension, and kept as the joins keep it.
    """
    sides = [
        SideRows(
            d.rows,
            d.key,
            d.dimension.fk,
            d.columns,
            d.dimension.prefix,
            d.dimension.how,
            JoinStrategy.BROADCAST if d.broadcast else JoinStrategy.SHUFFLE_HASH,
        )
        for d in dimensions
    ]
    return joined(fact_rows, sides, flags=Flags(flag("missing_dimension")) if flags else None)


def broadcasts(size_bytes: int, limit_mb: float) -> bool:
    """Whether a dimension whose files hold `size_bytes` is broadcast: within `limit_mb`
    (the view's `broadcast_limit_mb`); above it, it is joined with a shuffle."""
    return size_bytes <= limit_mb * MB


def _size(size_bytes: int) -> str:
    for unit, scale in (("GB", MB * 1024), ("MB", MB), ("KB", 1024)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.1f} {unit}"
    return f"{size_bytes} bytes"


@dataclass(frozen=True)
class EnrichRows:
    """The rows an enrich recompute takes: facts and, per dimension, the rows they reference."""

    facts: DataFrame
    dimensions: Sequence[DimensionRows]


class EnrichView(ViewKindLogic[EnrichRows]):
    def __init__(self, spec: PipelineSpec, view: View) -> None:
        super().__init__(spec, view)
        self.enrich = view.enrich
        self.fact = spec.sources[self.enrich.fact]
        self.propagate = self.enrich.mode is EnrichMode.PROPAGATE

    def table(self, dimension: Dimension) -> Source:
        return self.spec.sources[dimension.table]

    @property
    def change_sources(self) -> tuple[Source, ...]:
        # Lookup never rewrites a fact for a dimension change, so their changes are not read.
        return self.sources if self.propagate else (self.fact,)

    def _routes(self) -> dict[str, Key]:
        """A route per dimension (named by its stable id), and the fact's fk columns it holds."""
        return {d.id: d.fk for d in self.enrich.dimensions}

    @property
    def routes(self) -> tuple[Route, ...]:
        """In propagate, a dimension change reaches the facts whose fk holds its key at the pin
        (a route per dimension); in lookup, none."""
        if not self.propagate:
            return ()
        return tuple(fk_route(self.table(d), d.fk, self.fact) for d in self.enrich.dimensions)

    def _columns(self, d: Dimension, schemas: Mapping[str, Mapping[str, str]]) -> list[str]:
        """The dimension's columns the output carries: the declared ones, or all but its key."""
        return carried_columns(d.columns, schemas[d.table], self.table(d).key)

    # --- recompute -------------------------------------------------------------------------

    @property
    def fanout(self) -> FanOutRule | None:
        # Lookup has no routes: it never applies the fan-out rule.
        if not self.propagate:
            return None
        dimensions = tuple(self.table(d) for d in self.enrich.dimensions)
        e = self.enrich
        return FanOutRule(
            self.fact, dimensions, e.fanout_threshold, e.fanout_min_rows, "dimension keys", "facts"
        )

    def gather(
        self, ctx: BatchContext, changes: Mapping[str, DataFrame], affected: Affected, metrics: dict[str, int]
    ) -> Gathered[EnrichRows]:
        """The rows of the facts that changed or that a changed dimension key reaches, and the
        dimension rows they reference: found on the driver when they are few (lookups.py), else
        with Spark. The dimensions' join strategies are added to `metrics`."""
        fact_changes, fact_rows = changes[self.fact.name], affected.rows
        # Lookup enriches a fact with the dimensions of the batch that last wrote it, which no
        # input at the previous pins holds: the write reads the output's rows.
        fact_before = None
        if ctx.derivation.previous and self.propagate:
            fact_before = previous_rows(fact_rows, fact_changes, self.fact.key)
        # A fact whose fk moved references at the previous pins a dimension row no fact
        # references now: one read of the dimension rows serves both.
        referring = fact_rows if fact_before is None else fact_rows.unionByName(fact_before)
        # On the driver, the facts and the changed ones' rows before their change reference the
        # same dimension rows as `referring`, and are collected with no join (fk_join's rule).
        few = (
            None
            if not affected.few
            else [fact_rows, *([before_rows(fact_changes)] if fact_before is not None else [])]
        )
        dimensions = [
            self._dimension_rows(ctx, d, referring, metrics, whole=False, few=few)
            for d in self.enrich.dimensions
        ]
        before = None
        if fact_before is not None:
            then = [
                replace(d, rows=previous_rows(d.rows, changes[d.dimension.table], d.key)) for d in dimensions
            ]
            before = EnrichRows(fact_before, then)
        held = {_dimension_name(i): d.rows for i, d in enumerate(dimensions)}
        return Gathered(EnrichRows(fact_rows, dimensions), before, held=held)

    def gather_whole(self, ctx: BatchContext, metrics: dict[str, int]) -> Gathered[EnrichRows]:
        fact_rows = ctx.whole_unique(self.fact)
        dimensions = [
            self._dimension_rows(ctx, d, fact_rows, metrics, whole=True) for d in self.enrich.dimensions
        ]
        return Gathered(EnrichRows(fact_rows, dimensions))

    def recompute(self, ctx: BatchContext, rows: EnrichRows, *, flags: bool) -> DataFrame:
        return recompute(rows.facts, rows.dimensions, flags=flags)

    def _dimension_rows(
        self,
        ctx: BatchContext,
        d: Dimension,
        fact_rows: DataFrame,
        counts: dict[str, int],
        *,
        whole: bool,
        few: Sequence[DataFrame] | None = None,
    ) -> DimensionRows:
        """The dimension's rows a recompute needs: all (`whole`), or those `fact_rows` reference,
        read on the driver when the facts are few (`few`: the frames that reference the same
        rows as `fact_rows`, each collected without a join). A dimension joined with a shuffle
        is counted in `counts`."""
        table = self.table(d)
        rows = ctx.whole_unique(table) if whole else fk_referenced_rows(ctx, table, d.fk, fact_rows, few)
        columns = self._columns(d, ctx.schemas)
        return DimensionRows(d, rows, table.key, columns, self._broadcastable(ctx, table, counts))

    def _broadcastable(self, ctx: BatchContext, table: Source, counts: dict[str, int]) -> bool:
        """A dimension is broadcast unless its files exceed the view's broadcast limit; one that
        is not is counted in `counts` (`shuffled.<table>`) and noted."""
        import pyarrow as pa
        import pyarrow.compute as pc
        from deltalake import DeltaTable

        # The size of its files at the pin, from the Delta log (delta-rs: no Spark job).
        files = pa.table(DeltaTable(table.path, version=ctx.version(table)).get_add_actions(flatten=True))
        size_bytes = int(pc.sum(files["size_bytes"]).as_py() or 0) if files.num_rows else 0
        limit = self.enrich.broadcast_limit_mb
        if broadcasts(size_bytes, limit):
            return True
        message = (
            f"dimension '{table.name}' is {_size(size_bytes)} on disk, above broadcast_limit_mb "
            f"{limit:g}: it is joined with a shuffle instead of a broadcast (slower, but it cannot "
            "exhaust memory); raise broadcast_limit_mb if the executors have room for it"
        )
        log.warning("view '%s': %s", self.view.name, message)
        ctx.notes[f"broadcast.{table.name}"] = message
        counts[f"shuffled.{table.name}"] = 1
        return False

    # --- state and checks ------------------------------------------------------------------

    def write_state(self, ctx: BatchContext, rebuilt: Rebuilt, *, since: int) -> tuple[StateWrite, ...]:
        """No state to write (see the module)."""
        return ()

    def validations(self, ctx: BatchContext, written: DataFrame, rebuilt: Rebuilt) -> list[Validation]:
        import great_expectations as gx

        expectations: list[Any] = quality.key_expectations(self.fact.key)
        rows = written
        for i, d in enumerate(self.enrich.dimensions):
            if d.how is not JoinHow.INNER:
                continue
            flag = f"_lj_dim{i}_resolved"
            table = self.table(d)
            held = held_rows(ctx, rebuilt, _dimension_name(i), table)
            rows = quality.with_key_resolution(rows, held, d.fk, table.key, flag)
            expectations += [
                *(gx.expectations.ExpectColumnValuesToNotBeNull(column=c) for c in d.fk),
                gx.expectations.ExpectColumnValuesToBeInSet(column=flag, value_set=[True]),
            ]
        return [Validation("changed_rows", rows, expectations)]

    def explain(self, ask: Ask) -> Reading:
        """The fact and each dimension's row. In lookup mode a dimension's change reaches no
        enriched row (only a fact's change re-enriches it), so only the fact's feed is read."""
        lookup = not self.propagate
        inputs, feeds = driving(ask, self.fact, Role.FACT)
        if inputs[0].row is not None:
            for d in self.enrich.dimensions:
                table, fk = self.table(d), tuple(inputs[0].row[c] for c in d.fk)
                inputs.append(looked_up(ask, table, Role.DIMENSION, fk, how=d.how))
                if not lookup:
                    feeds.append((table, Role.DIMENSION, table.key, [fk]))
        return Reading(inputs, feeds, why_not_joined(inputs, lookup=lookup) if ask.absent else None)
