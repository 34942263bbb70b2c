"""list_join: a left row's list of foreign keys, replaced by the matching right rows.

`persons(person_id, name, address_ids: [a1, a2])` with `addresses(address_id, street)` gives
`person_id, name, addresses: [{address_id: a1, street: ...}, {address_id: a2, street: ...}]`.

Each list is flattened into composite rows (left key, position, element key), and each joined
on its own. The view keeps no state: a right change finds the lists that hold its key in the
pinned left table (its key and list columns), and, in a batch of many keys, a left row's old list
is the output's, its elements' keys in order (docs/decisions.md, "State only where it pays"). A
batch re-joins only
- left rows whose list changed (added, removed, reordered or duplicated elements), and
- left rows holding an element whose right row changed.
When the right changes reach more than `fanout_threshold` of the left rows (a popular element)
and more than `fanout_min_rows` of them, the batch recomputes the whole view instead, as fk_join
and enrich do.
In a batch of many keys, a left row whose other columns changed but whose list did not keeps its
joined list from the output: its elements are not re-joined. A batch of few keys (found on the
driver) re-joins every affected list: the carry's own read of the output costs more there.

Semantics: each element is joined on its own with left semantics (no right row: null right
columns, filled in when it arrives); the list keeps its order; an empty or null list gives an
empty array; duplicates follow the view's policy (keep every occurrence, or drop all but the
first).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakejoin.delta import routing
from lakejoin.delta.change_feed import CHANGE, ChangeKind
from lakejoin.delta.key_ranges import materialised
from lakejoin.delta.sql_text import spark_columns, spark_quoted
from lakejoin.quality import checks as quality
from lakejoin.quality.validations import Validation
from lakejoin.spec.explained import Ask, InputRow, Reading, Role, list_elements, why_not_joined
from lakejoin.spec.kind_parts import carried_columns
from lakejoin.spec.model import Duplicates, JoinHow, Key, ListJoin, PipelineSpec, Source, View
from lakejoin.views.base import Gathered, LeftRightLogic, Rebuilt, held_rows
from lakejoin.views.context import BatchContext
from lakejoin.views.explained import driving, pin, read_rows
from lakejoin.views.fanout import FanOutRule
from lakejoin.views.health_flags import KEEP, flag
from lakejoin.views.joins import matching, previous_rows
from lakejoin.views.reads import Affected, Route, referenced_rows

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from lakejoin.sink.entry import StateWrite

LEFT_KEY = "left_key"
POS = "pos"
ELEMENT = "right_key"
MATCH = "_lj_match"
_FOUND = "_lj_right_found"
SIGNATURE = "_lj_signature"


def left_names(left_key: Key) -> list[str]:
    """The names composite rows give the left key's columns (`left_key`, or `left_key_0`...)."""
    return routing.key_columns(LEFT_KEY, len(left_key))


def as_left_names(left_key: Key) -> list[Column]:
    """The left key's columns renamed as composite rows name them (`left_names`)."""
    from pyspark.sql import functions as F

    return [F.col(c).alias(n) for c, n in zip(left_key, left_names(left_key), strict=True)]


def from_left_names(left_key: Key) -> list[Column]:
    """The inverse of `as_left_names`: composite rows' key columns under the left key's names."""
    from pyspark.sql import functions as F

    return [F.col(n).alias(c) for c, n in zip(left_key, left_names(left_key), strict=True)]


def element_key(right_key: Key, element: Callable[[str], Column] | None = None) -> Column:
    """A list element's key as the left list holds it: the right key's value, or for a key of
    several columns a struct of them, by name and in order (`element(c)` reads column `c`)."""
    from pyspark.sql import functions as F

    read = element or F.col
    if len(right_key) == 1:
        return read(right_key[0])
    return F.struct(*[read(c).alias(c) for c in right_key])


def composite_rows(left_rows: DataFrame, join: ListJoin, left_key: Key, *, outer: bool = False) -> DataFrame:
    """(left key as `left_names`, pos, right_key) for every list element kept by the duplicates
    policy.

    With `outer`, a left row with an empty or null list gives one row with a null pos, so that
    it still has a place in a later join.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    explode = F.posexplode_outer if outer else F.posexplode
    rows = left_rows.select(*as_left_names(left_key), explode(join.list).alias(POS, ELEMENT))
    if join.duplicates is Duplicates.DROP:
        first = Window.partitionBy(*left_names(left_key), ELEMENT).orderBy(F.col(POS).asc_nulls_first())
        rows = rows.withColumn("_lj_n", F.row_number().over(first)).where("_lj_n = 1").drop("_lj_n")
    return rows


def joined_lists(
    composite: DataFrame,
    right_rows: DataFrame,
    *,
    left_key: Key,
    right_key: Key,
    right_columns: list[str],
    into: str,
    flags: bool = False,
) -> DataFrame:
    """(left key as `left_names`, into): each left key's elements joined to their right rows, in
    list order. An element holds the right key's columns, then the right columns.

    With `flags` (views/health_flags.py), also each list's elements without a right row (a
    null element is not one: it names no right row) as `missing_elements`."""
    from pyspark.sql import functions as F

    right = right_rows.select(
        element_key(right_key).alias(MATCH), *spark_columns(right_columns), F.lit(True).alias(_FOUND)
    )
    joined = composite.join(F.broadcast(right), composite[ELEMENT] == right[MATCH], how="left")
    if len(right_key) == 1:
        keys = [F.col(ELEMENT).alias(right_key[0])]
    else:
        keys = [F.col(ELEMENT)[c].alias(c) for c in right_key]
    element = F.struct(*keys, *spark_columns(right_columns))
    item = F.when(F.col(POS).isNotNull(), F.struct(F.col(POS).alias("p"), element.alias("e")))
    missing = F.col(POS).isNotNull() & F.col(ELEMENT).isNotNull() & F.col(_FOUND).isNull()
    counted = [F.count(F.when(missing, F.lit(1))).alias(flag("missing_elements"))] if flags else []
    return joined.groupBy(*left_names(left_key)).agg(
        F.transform(F.array_sort(F.collect_list(item), _by_position), lambda x: x["e"]).alias(into), *counted
    )


def _by_position(a, b):  # noqa: ANN001, ANN202 - Spark Column lambdas
    from pyspark.sql import functions as F

    # Compare positions only: right columns need not be orderable (maps, for one).
    return F.when(a["p"] < b["p"], -1).when(a["p"] > b["p"], 1).otherwise(0)


def signatures(composite: DataFrame, left_key: Key) -> DataFrame:
    """(left key as `left_names`, signature): each left key's element keys in list order, as
    comparable text.

    Positions themselves are left out: under `drop`, [a, b, a, c] and [a, b, c] keep the same
    elements in the same order, so the joined list is the same.
    """
    from pyspark.sql import functions as F

    ordered = F.sort_array(F.collect_list(F.struct(POS, ELEMENT)))
    return composite.groupBy(*left_names(left_key)).agg(
        F.to_json(F.transform(ordered, lambda x: x[ELEMENT])).alias(SIGNATURE)
    )


def list_route(source: Source, list_column: str, driving: Source) -> Route:
    """The route of the right source, whose keys the driving (left) rows hold as the elements of
    their `list_column`."""
    from pyspark.sql import functions as F

    fields = source.key if len(source.key) > 1 else ()

    def on_driver(path: str, version: int, changed: Sequence[tuple[Any, ...]], most: int, key: Key) -> Any:
        return routing.holding_on_driver(
            path, version, changed, list_column, most=most, left_key=key, element_fields=fields
        )

    def in_spark(rows: DataFrame, changes: DataFrame, count: int | None) -> DataFrame:
        # The left key renamed while the elements are exploded beside it (a left key column may
        # be named as the element column).
        holders = rows.select(*as_left_names(driving.key), F.explode(list_column).alias(ELEMENT))
        wanted = changes.select(element_key(source.key).alias(ELEMENT))
        held = holders.join(F.broadcast(wanted), on=ELEMENT, how="left_semi")
        return held.select(*left_names(driving.key)).distinct().select(*from_left_names(driving.key))

    return Route(source, on_driver, in_spark)


@dataclass(frozen=True)
class ListRows:
    """The rows a list_join recompute takes: the left rows of the output rows, those of them
    whose lists are re-joined (`rejoin`), the right rows of those lists' elements, and the
    joined lists carried from the output (left key as `left_names`, into; None: none)."""

    left: DataFrame
    rejoin: DataFrame
    right: DataFrame
    carried: DataFrame | None = None


@dataclass(frozen=True)
class Rejoin:
    """Which affected lists a batch re-joins: their composite rows (materialised, `rebuilt` of
    them) and left rows, and the lists it carries (`kept`, `carried` of them, and their left
    keys as the left table names them, `carried_left`; None: a batch of few keys carries none)."""

    composite: DataFrame
    rebuilt: int
    rows: DataFrame
    kept: DataFrame | None = None
    carried: int = 0
    carried_left: DataFrame | None = None


class ListJoinView(LeftRightLogic[ListRows]):
    def __init__(self, spec: PipelineSpec, view: View) -> None:
        super().__init__(spec, view)
        self.join = view.list_join

    def _right_columns(self, schemas: Mapping[str, Mapping[str, str]]) -> list[str]:
        """The right columns each joined element carries: the declared ones, or all but the key's."""
        return carried_columns(self.join.right_columns, schemas[self.right.name], self.right.key)

    def _lists(
        self, composite: DataFrame, right_rows: DataFrame, right_columns: list[str], *, flags: bool = False
    ) -> DataFrame:
        return joined_lists(
            composite,
            right_rows,
            left_key=self.left.key,
            right_key=self.right.key,
            right_columns=right_columns,
            into=self.join.into,
            flags=flags,
        )

    def _element_columns(self) -> tuple[list[Column], list[str]]:
        """The element's key as columns (one per right key column) and their names: what a driver
        lookup of the right rows takes."""
        from pyspark.sql import functions as F

        if len(self.right.key) == 1:
            return [F.col(ELEMENT)], [ELEMENT]
        names = [f"{ELEMENT}_{i}" for i in range(len(self.right.key))]
        return [F.col(ELEMENT)[c].alias(n) for c, n in zip(self.right.key, names, strict=True)], names

    def _element_rows(self, ctx: BatchContext, elements: DataFrame) -> DataFrame:
        """The right rows at the pin of `elements` (a column `ELEMENT`), matched as a struct when
        the right key has several columns (a struct `=` matches a null field, which a match
        column by column would drop)."""
        from pyspark.sql import functions as F

        wanted = elements.select(F.col(ELEMENT).alias(MATCH)).where(F.col(MATCH).isNotNull()).distinct()
        return ctx.snapshot(self.right).join(
            F.broadcast(wanted), element_key(self.right.key) == wanted[MATCH], how="left_semi"
        )

    def _output_rows(self, left_rows: DataFrame, lists: DataFrame) -> DataFrame:
        """Left rows with the list column replaced by their joined list; with the lists' health
        flags when they carry them (null for a list carried from the output: the batch gives it
        its flags before the batch, engine/health.py)."""
        from pyspark.sql import functions as F

        on = matching(left_rows, self.left.key, lists, left_names(self.left.key))
        joined = left_rows.join(lists, on, how="left")
        into = F.col(self.join.into)
        columns = [into if c == self.join.list else left_rows[spark_quoted(c)] for c in left_rows.columns]
        if flag("missing_elements") in lists.columns:
            missing = F.col(flag("missing_elements"))
            columns += [
                missing.alias(flag("missing_elements")),
                F.when(missing.isNotNull(), (missing > 0).cast("int")).alias(flag("lists_with_missing")),
                F.lit(True).alias(KEEP),
            ]
        return joined.select(*columns)

    @property
    def fanout(self) -> FanOutRule:
        # An element held by many lists (a popular tag) can reach a large share of the
        # output: then one recompute beats re-joining every list that holds it.
        return FanOutRule.of_join(self.left, self.right, self.join)

    def gather(
        self, ctx: BatchContext, changes: Mapping[str, DataFrame], affected: Affected, metrics: dict[str, int]
    ) -> Gathered[ListRows]:
        """Re-join the lists of the left keys that changed or hold a changed element, but, in a
        batch of many keys, for those whose list is as it was and holds no changed element: they
        keep their joined list from the output (`_rejoined`). `metrics` gains the composite
        rows re-joined and the left rows carried."""
        key, left_rows = self.left.key, affected.rows
        again = self._rejoined(ctx, changes, affected)
        # With `ctx.derivation.previous`, the lists the re-joined left rows held at the previous
        # pins are joined too: one read of the right rows serves both.
        left_before = (
            previous_rows(left_rows, changes[self.left.name], key) if ctx.derivation.previous else None
        )
        elements = again.composite.select(ELEMENT)
        rejoin_before = None
        if left_before is not None:
            rejoin_before = (
                left_before
                if again.carried_left is None
                else left_before.join(again.carried_left, on=list(key), how="left_anti")
            )
            elements = elements.unionByName(composite_rows(rejoin_before, self.join, key).select(ELEMENT))
        right_rows = self._element_rows_of(ctx, elements, few=affected.few, rebuilt=again.rebuilt)
        metrics.update(composite_rows_rebuilt=again.rebuilt, left_rows_carried=again.carried)
        before = None
        if left_before is not None and rejoin_before is not None:
            # A carried list is the previous pins' too: its elements and their right rows are
            # as they were.
            right_before = previous_rows(right_rows, changes[self.right.name], self.right.key)
            before = ListRows(left_before, rejoin_before, right_before, again.kept)
        now = ListRows(left_rows, again.rows, right_rows, again.kept)
        return Gathered(now, before, held={self.left.name: left_rows})

    def gather_whole(self, ctx: BatchContext, metrics: dict[str, int]) -> Gathered[ListRows]:
        left_rows, right_rows = ctx.whole_unique(self.left), ctx.whole_unique(self.right)
        return Gathered(ListRows(left_rows, left_rows, right_rows))

    def recompute(self, ctx: BatchContext, rows: ListRows, *, flags: bool) -> DataFrame:
        from pyspark.sql import functions as F

        composite = composite_rows(rows.rejoin, self.join, self.left.key, outer=True)
        lists = self._lists(composite, rows.right, self._right_columns(ctx.schemas), flags=flags)
        if rows.carried is not None:
            carried = rows.carried
            if flags:  # a carried list's flags are as they were (engine/health.py)
                carried = carried.select(
                    *carried.columns, F.lit(None).cast("bigint").alias(flag("missing_elements"))
                )
            lists = lists.unionByName(carried)
        return self._output_rows(rows.left, lists)

    def _rejoined(self, ctx: BatchContext, changes: Mapping[str, DataFrame], affected: Affected) -> Rejoin:
        """Which affected lists a batch re-joins, and which it carries from the output."""
        from pyspark.sql import functions as F

        key, lk = self.left.key, left_names(self.left.key)
        left_rows = affected.rows
        if affected.few:
            # A batch of few keys re-joins every affected list: carrying a list as it was costs a
            # read of the output and two jobs more than re-joining a few lists, which give the
            # same rows (the output is the recompute at the previous pins).
            composite, rebuilt, _ = materialised(composite_rows(left_rows, self.join, key))
            return Rejoin(composite, rebuilt, left_rows)
        _, _, key_bounds = affected.keys
        new_composite = composite_rows(left_rows, self.join, key).localCheckpoint()
        kept, carried, carried_left = self._carried(
            ctx, changes[self.left.name], changes[self.right.name], new_composite, key_bounds
        )
        rows = left_rows.join(carried_left, on=list(key), how="left_anti")
        composite, rebuilt, _ = materialised(
            new_composite.join(F.broadcast(kept.select(*lk)), on=lk, how="left_anti")
        )
        return Rejoin(composite, rebuilt, rows, kept, carried, carried_left)

    def _element_rows_of(
        self, ctx: BatchContext, elements: DataFrame, *, few: bool, rebuilt: int
    ) -> DataFrame:
        """The right rows of `elements` (every element of every re-joined list, now and before):
        on the driver when the affected rows were found there (`few`)."""
        parts, names = self._element_columns()
        return referenced_rows(
            ctx,
            self.right,
            names,
            few=[elements.select(*parts)] if few else None,
            in_spark=lambda: self._element_rows(ctx, elements),
            # many rows when the lists are long, so Spark makes them distinct before they are
            # collected
            distinct=rebuilt > ctx.most_keys,
        )

    def _carried(
        self,
        ctx: BatchContext,
        left_changed: DataFrame,
        right_changed: DataFrame,
        new_composite: DataFrame,
        key_bounds: Any,
    ) -> tuple[DataFrame, int, DataFrame]:
        """The lists a batch of many keys carries from the output: (left key as `left_names`,
        into) of the left rows whose list is as it was and holds no changed element, how many,
        and their keys as the left table names them (to leave out of the re-join)."""
        from pyspark.sql import functions as F

        key, lk = self.left.key, left_names(self.left.key)
        # The old list is the output's: its elements' keys, in order, as the duplicates policy
        # left them. A left row whose list is as it was, and none of whose elements changed on
        # the right, keeps its joined list.
        changed_elements = right_changed.select(element_key(self.right.key).alias(ELEMENT))
        holding = new_composite.join(F.broadcast(changed_elements), on=ELEMENT, how="left_semi")
        candidates = (
            left_changed.where(F.col(CHANGE) == ChangeKind.UPSERT.value)
            .select(*as_left_names(key))
            .join(holding.select(*lk), on=lk, how="left_anti")
        )
        output = ctx.spark.read.format("delta").load(self.view.path).where(key_bounds.covers())
        into = self.join.into
        old_key = F.transform(into, lambda e: element_key(self.right.key, lambda c: e[c]))
        old_lists = output.select(*as_left_names(key), into, F.to_json(old_key).alias("_lj_old")).join(
            F.broadcast(candidates), on=lk, how="left_semi"
        )
        same = old_lists.join(F.broadcast(signatures(new_composite, key)), on=lk, how="left").where(
            F.coalesce(F.col(SIGNATURE), F.lit("[]")) == F.col("_lj_old")
        )
        if ctx.repairing:
            same = same.limit(0)
        kept, carried, _ = materialised(same.select(*lk, into))
        return kept, carried, F.broadcast(kept.select(*from_left_names(key)))

    @property
    def routes(self) -> tuple[Route, ...]:
        """A right change reaches the left rows whose list holds its key at the pin."""
        return (list_route(self.right, self.join.list, self.left),)

    def write_state(self, ctx: BatchContext, rebuilt: Rebuilt, *, since: int) -> tuple[StateWrite, ...]:
        """No state to write (see the module)."""
        return ()

    def validations(self, ctx: BatchContext, written: DataFrame, rebuilt: Rebuilt) -> list[Validation]:
        import great_expectations as gx
        from pyspark.sql import functions as F

        key = self.left.key
        names = [f"_lj_left_key{i}" for i in range(len(key))]
        lists = held_rows(ctx, rebuilt, self.left.name, self.left).select(
            *[F.col(c).alias(n) for c, n in zip(key, names, strict=True)],
            F.coalesce(
                F.size(
                    F.array_distinct(self.join.list)
                    if self.join.duplicates is Duplicates.DROP
                    else F.col(self.join.list)
                ),
                F.lit(0),
            ).alias("_lj_left_length"),
        )
        lengths = lists.join(
            F.broadcast(
                written.select(
                    *[F.col(c).alias(n) for c, n in zip(key, names, strict=True)],
                    F.size(self.join.into).alias("_lj_length"),
                )
            ),
            on=names,
            how="inner",
        )
        return [
            Validation(
                "changed_rows",
                written,
                [
                    *quality.key_expectations(key),
                    gx.expectations.ExpectColumnValuesToNotBeNull(column=self.join.into),
                ],
            ),
            Validation(
                "list_lengths",
                lengths,
                [
                    gx.expectations.ExpectColumnPairValuesToBeEqual(
                        column_A="_lj_length", column_B="_lj_left_length"
                    )
                ],
            ),
        ]

    def explain(self, ask: Ask) -> Reading:
        """The left row and each element's right row (by its place in the list), at the
        batch's pins."""
        inputs, feeds = driving(ask, self.left, Role.LEFT)
        if inputs[0].row is not None:
            right, where = self.right, f"source '{self.right.name}'"
            elements = list_elements(
                inputs[0].row[self.join.list], right.key, drop=self.join.duplicates is Duplicates.DROP
            )
            wanted = list(dict.fromkeys(e for e in elements if e is not None and None not in e))
            version = pin(ask.batch, right)
            rows = read_rows(right.path, version, right.key, wanted, where) if wanted else []
            found = {tuple(r[c] for c in right.key): r for r in rows}
            inputs += [
                InputRow(
                    Role.ELEMENT,
                    right.name,
                    version,
                    None if e is None or None in e else dict(zip(right.key, e, strict=True)),
                    found.get(e) if e is not None else None,
                    how=JoinHow.LEFT,
                    position=i,
                )
                for i, e in enumerate(elements)
            ]
            feeds.append((right, Role.ELEMENT, right.key, wanted))
        return Reading(inputs, feeds, why_not_joined(inputs) if ask.absent else None)
