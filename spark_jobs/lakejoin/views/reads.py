"""The reads a view kind's incremental rebuild is made of, each on the driver when the keys are
few (delta-rs, lookups.py: no Spark job) or else with Spark: which rows of the driving input
the other inputs' changes reach (`reached`, through the kind's `Route`s), the affected keys
with their driving rows (`affected_rows`), and the rows of another input those reference
(`referenced_rows`).

Apart from the kinds because the rule is the same for all of them: only the routes differ (an
fk column, a list of fks). Apart from views/context.py because these reads are made of the
context's, for a kind's routes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

from lakejoin.delta import lookups, routing
from lakejoin.delta.key_ranges import KeyRange, Keys, materialised
from lakejoin.delta.key_ranges import enabled as ranges_enabled
from lakejoin.spec.model import Columns, Key, Source
from lakejoin.views.joins import referenced_right_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakejoin.views.context import BatchContext

# (driving table's path, its pinned version, changed keys of the route's source, at most how
# many driving keys, the driving key) -> the driving keys whose row holds one of them, read on
# the driver; None when the lookup does not take them (too many, or a table delta-rs does not read).
OnDriver = Callable[[str, int, Sequence[tuple[Any, ...]], int, Key], "list[tuple[Any, ...]] | None"]
# (the pinned driving rows, the route source's changes, how many keys changed if known) -> the
# driving keys (columns named as the driving key) whose row holds a changed key, one row each.
InSpark = Callable[["DataFrame", "DataFrame", "int | None"], "DataFrame"]


@dataclass(frozen=True)
class Route:
    """How the changes of one input (`source`) reach rows of the driving input: the driving
    rows that hold a changed key of it at the pin (a subscription, KIP-213), found on the driver
    or with Spark. The pinned driving table is the routing index: no state is kept."""

    source: Source
    on_driver: OnDriver
    in_spark: InSpark


def fk_route(source: Source, fk: Key, driving: Source) -> Route:
    """The route of a source whose key the driving rows hold in their `fk` columns (fk_join's
    right, an enrich dimension)."""

    def on_driver(path: str, version: int, changed: Sequence[tuple[Any, ...]], most: int, key: Key) -> Any:
        return routing.routed_on_driver(path, version, changed, route=fk, most=most, left_key=key)

    def in_spark(rows: DataFrame, changes: DataFrame, count: int | None) -> DataFrame:
        index = routing.routes(rows, driving.key, {routing.RIGHT_KEY: fk})
        return routing.routed_left_keys(index, changes, source.key, left_key=driving.key, changed=count)

    return Route(source, on_driver, in_spark)


@dataclass(frozen=True)
class Reach:
    """The driving keys the other inputs' changes reach, but for the driving keys that changed
    themselves (incremental work either way, so the fan-out rule does not count them): listed
    on the driver (`keys` a sorted list) or a materialised frame, and how many."""

    keys: list[tuple[Any, ...]] | DataFrame
    count: int


def reached(
    ctx: BatchContext,
    driving: Source,
    routes: Sequence[Route],
    changes: Mapping[str, DataFrame],
    *,
    driving_first: bool = False,
) -> Reach:
    """The driving keys `routes` reach from their sources' `changes` (`Reach`): on the driver
    when every route's changed keys and the driving changed keys are few and each lookup finds
    few (the lookups share one budget, `ctx.most_keys`), else with Spark. A route whose source
    is known to have no changed key (`ctx.changed`) reaches nothing and is not read; with no
    other route, nothing is read.

    `driving_first`: the driving keys are collected after the first route's keys, before any
    lookup (fk_join's and list_join's order); else after the lookups (enrich's). Each kind
    keeps its order, and so its Spark jobs when a lookup finds too many keys."""
    routes = [r for r in routes if ctx.changed.get(r.source.name) != 0]
    if not routes:
        return Reach([], 0)
    listed = _reached_on_driver(ctx, driving, routes, changes, driving_first=driving_first)
    if listed is not None:
        return Reach(listed, len(listed))
    return _reached_in_spark(ctx, driving, routes, changes)


def _reached_on_driver(
    ctx: BatchContext,
    driving: Source,
    routes: Sequence[Route],
    changes: Mapping[str, DataFrame],
    *,
    driving_first: bool,
) -> list[tuple[Any, ...]] | None:
    """`reached` on the driver; None when a read there does not take the keys."""

    def changed_keys(source: Source) -> list[tuple[Any, ...]] | None:
        return ctx.key_values(changes[source.name], source.key, ctx.changed.get(source.name))

    listed: list[tuple[Any, ...]] = []
    own: list[tuple[Any, ...]] | None = None
    for route in routes:
        changed = changed_keys(route.source)
        if changed is None:
            return None
        if driving_first and own is None:
            # The affected rows' driver lookup reads the driving keys too (collected once).
            own = changed_keys(driving)
            if own is None:
                return None
        most = ctx.most_keys - len(listed)  # the routes' reach together
        found = route.on_driver(driving.path, ctx.version(driving), changed, most, driving.key)
        if found is None:
            return None
        listed += found
    if own is None:
        own = changed_keys(driving)
        if own is None:
            return None
    return sorted(set(listed).difference(own))


def _reached_in_spark(
    ctx: BatchContext, driving: Source, routes: Sequence[Route], changes: Mapping[str, DataFrame]
) -> Reach:
    """`reached` with Spark: each route's driving keys in the pinned driving table (a union,
    made distinct, of several), but for the changed driving keys, materialised."""
    from pyspark.sql import functions as F

    rows = ctx.snapshot(driving)
    found = [r.in_spark(rows, changes[r.source.name], ctx.changed.get(r.source.name)) for r in routes]
    keys = found[0] if len(found) == 1 else reduce(lambda a, b: a.union(b), found).distinct()
    key = list(driving.key)
    done, count, _ = materialised(
        keys.join(F.broadcast(changes[driving.name].select(*key)), on=key, how="left_anti")
    )
    return Reach(done, count)


def affected_keys(left_changed_keys: DataFrame, routed_keys: DataFrame, left_key: Key) -> DataFrame:
    """Output keys a batch can change: left keys that changed, and left keys routed from
    changed right keys. A right change cannot reach any other row."""
    return left_changed_keys.select(*left_key).union(routed_keys.select(*left_key)).distinct()


@dataclass(frozen=True)
class Affected:
    """The affected driving keys (materialised, counted, their range: `key_ranges.Keys`) and
    their driving rows at the pin, one per key; `few`: found on the driver (lookups.py), so the
    reads that follow try the driver too."""

    keys: Keys
    rows: DataFrame
    few: bool


def affected_rows(ctx: BatchContext, driving: Source, changes: DataFrame, reach: Reach) -> Affected:
    """The driving keys that changed (`changes`, the driving input's net change) or that the
    other inputs' changes reach (`reach`), and their rows at the pin: on the driver when they
    are few, else materialised once with Spark (`rows_of` checks them one per key, so the joins
    and the reads that follow reuse them)."""
    routed = reach.keys
    found = _affected_on_driver(ctx, driving, changes, routed) if isinstance(routed, list) else None
    if found is not None:
        keys, rows = found
        return Affected(keys, rows, few=True)
    key = driving.key
    if not isinstance(routed, list):
        union = affected_keys(changes, routed, key)
    elif routed:
        union = affected_keys(changes, ctx.keys_frame(driving, routed), key)
    else:  # nothing reached: the changed keys alone
        union = changes.select(*key).distinct()
    keys = materialised(union, key)
    affected, _, bounds = keys
    return Affected(keys, ctx.rows_of(driving, affected, changes, bounds), few=False)


def _affected_on_driver(
    ctx: BatchContext, source: Source, changes: DataFrame, reached: Sequence[tuple[Any, ...]]
) -> tuple[Keys, DataFrame] | None:
    """The affected keys of `source` (those that changed, `changes`, and those a change on
    another side reached, `reached`) and their rows at the pin, found on the driver (the
    keys as `key_ranges.materialised` gives them, and `rows_of`'s rows). None when they are
    too many, or of a type or in a table a driver lookup does not take (use Spark)."""
    changed = ctx.key_values(changes, source.key, ctx.changed.get(source.name))
    if changed is None:
        return None
    values = sorted(set(changed).union(reached))
    if not lookups.takes(len(values), ctx.most_keys) or not lookups.literal_keys(values):
        return None
    rows = ctx.rows_on_driver(source, values, changes, changed)
    if rows is None:
        return None
    keys = ctx.keys_frame(source, values, rows.schema)
    ctx.know_keys(keys, source.key, values)  # the batch's write takes them (engine/batch.py)
    listed = values and ranges_enabled(ctx.spark)
    bounds = KeyRange(source.key)
    if listed:
        spans = [(min(v[i] for v in values), max(v[i] for v in values)) for i in range(len(source.key))]
        bounds = KeyRange(source.key, tuple(spans))
    return (keys, len(values), bounds), rows


def referenced_rows(
    ctx: BatchContext,
    source: Source,
    columns: Columns,
    *,
    few: Sequence[DataFrame] | None,
    in_spark: Callable[[], DataFrame],
    distinct: bool = False,
) -> DataFrame:
    """The rows of `source` at the pin that the affected rows reference through `columns`, one
    per key: read on the driver when the affected rows were found there (`few`: the frames
    that reference them, each collected without a join; `distinct`: `referenced_on_driver`'s),
    else `in_spark()`'s rows, materialised and checked one per key (`unique_rows`)."""
    rows = None if few is None else ctx.referenced_on_driver(source, few, columns, distinct=distinct)
    return rows if rows is not None else ctx.unique_rows(in_spark(), source)


def fk_referenced_rows(
    ctx: BatchContext, source: Source, fk: Key, referring: DataFrame, few: Sequence[DataFrame] | None
) -> DataFrame:
    """`referenced_rows` of the source whose key `referring`'s `fk` columns hold (fk_join's
    right, an enrich dimension)."""
    return referenced_rows(
        ctx,
        source,
        fk,
        few=few,
        in_spark=lambda: referenced_right_rows(ctx.snapshot(source), referring, fk, source.key),
    )
