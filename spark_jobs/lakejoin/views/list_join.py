"""list_join: a left row's list of foreign keys, replaced by the matching right rows.

`persons(person_id, name, address_ids: [a1, a2])` with `addresses(address_id, street)` gives
`person_id, name, addresses: [{address_id: a1, street: ...}, {address_id: a2, street: ...}]`.

Each list is flattened into composite rows (left key, position, element key). They are the
view's state: a Delta table clustered by element key, so a right change finds every list that
holds its key without scanning the left table. A batch re-joins only
- left rows whose list changed (added, removed, reordered or duplicated elements), and
- left rows holding an element whose right row changed.
When the right changes reach more than `fanout_threshold` of the left rows (a popular element),
the batch recomputes the whole view instead, as fk_join and enrich do.
A left row whose other columns changed but whose list did not keeps its joined list from the
output: its elements are not re-joined.

Semantics: each element is joined on its own with left semantics (no right row: null right
columns, filled in when it arrives); the list keeps its order; an empty or null list gives an
empty array; duplicates follow the view's policy (keep every occurrence, or drop all but the
first).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from lakejoin import routing
from lakejoin.changes import CHANGE, ChangeKind, upserts
from lakejoin.key_ranges import materialised
from lakejoin.spec import Duplicates, ListJoin, PipelineSpec, View
from lakejoin.views.base import STATE, BatchContext, Rebuilt, Validation, ViewKindLogic, fans_out

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LEFT_KEY = "left_key"
POS = "pos"
ELEMENT = "right_key"
MATCH = "_lj_match"
SIGNATURE = "_lj_signature"


def composite_rows(left_rows: DataFrame, join: ListJoin, left_key: str, *, outer: bool = False) -> DataFrame:
    """(left_key, pos, right_key) for every list element kept by the duplicates policy.

    With `outer`, a left row with an empty or null list gives one row with a null pos, so that
    it still has a place in a later join.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    explode = F.posexplode_outer if outer else F.posexplode
    rows = left_rows.select(F.col(left_key).alias(LEFT_KEY), explode(join.list).alias(POS, ELEMENT))
    if join.duplicates is Duplicates.DROP:
        first = Window.partitionBy(LEFT_KEY, ELEMENT).orderBy(F.col(POS).asc_nulls_first())
        rows = rows.withColumn("_lj_n", F.row_number().over(first)).where("_lj_n = 1").drop("_lj_n")
    return rows


def joined_lists(
    composite: DataFrame, right_rows: DataFrame, *, right_key: str, right_columns: list[str], into: str
) -> DataFrame:
    """(left_key, into): each left key's elements joined to their right rows, in list order."""
    from pyspark.sql import functions as F

    right = right_rows.select(F.col(right_key).alias(MATCH), *right_columns)
    joined = composite.join(F.broadcast(right), composite[ELEMENT] == right[MATCH], how="left")
    element = F.struct(F.col(ELEMENT).alias(right_key), *[F.col(c) for c in right_columns])
    item = F.when(F.col(POS).isNotNull(), F.struct(F.col(POS).alias("p"), element.alias("e")))
    return joined.groupBy(LEFT_KEY).agg(
        F.transform(F.array_sort(F.collect_list(item), _by_position), lambda x: x["e"]).alias(into)
    )


def _by_position(a, b):  # noqa: ANN001, ANN202 - Spark Column lambdas
    from pyspark.sql import functions as F

    # Compare positions only: right columns need not be orderable (maps, for one).
    return F.when(a["p"] < b["p"], -1).when(a["p"] > b["p"], 1).otherwise(0)


def signatures(composite: DataFrame) -> DataFrame:
    """(left_key, signature): each left key's element keys in list order, as comparable text.

    Positions themselves are left out: under `drop`, [a, b, a, c] and [a, b, c] keep the same
    elements in the same order, so the joined list is the same.
    """
    from pyspark.sql import functions as F

    ordered = F.sort_array(F.collect_list(F.struct(POS, ELEMENT)))
    return composite.groupBy(LEFT_KEY).agg(
        F.to_json(F.transform(ordered, lambda x: x[ELEMENT])).alias(SIGNATURE)
    )


class ListJoinView(ViewKindLogic):
    state_name = "composite rows"

    def __init__(self, spec: PipelineSpec, view: View) -> None:
        super().__init__(spec, view)
        self.join = view.list_join
        self.left, self.right = spec.sources[self.join.left], spec.sources[self.join.right]
        self._right_columns: list[str] = []
        self._counts: dict[str, int] = {}

    @property
    def output_key(self) -> tuple[str, ...]:
        return (self.left.key,)

    def prepare(self, schemas: Mapping[str, Mapping[str, str]]) -> None:
        columns = list(schemas[self.right.name])
        self._right_columns = list(self.join.right_columns or [c for c in columns if c != self.right.key])

    def metrics(self) -> dict[str, int]:
        return dict(self._counts)

    def _output_rows(self, left_rows: DataFrame, lists: DataFrame) -> DataFrame:
        """Left rows with the list column replaced by their joined list."""
        from pyspark.sql import functions as F

        joined = left_rows.join(lists, left_rows[self.left.key] == lists[LEFT_KEY], how="left")
        columns = [F.col(self.join.into) if c == self.join.list else left_rows[c] for c in left_rows.columns]
        return joined.select(*columns)

    def rebuild(self, ctx: BatchContext, changes: Mapping[str, DataFrame] | None) -> Rebuilt:
        from pyspark.sql import functions as F

        key = self.left.key
        self._counts = {}
        # Composite rows follow the left rows only: the fan-out fallback below still writes just these.
        self._state_change: tuple[DataFrame, DataFrame, DataFrame] | None = None
        if changes is not None:
            state = ctx.read_state()
            routed, reached = self._routed(ctx, state, changes[self.right.name])
            # An element held by many lists (a popular tag) can reach a large share of the
            # output: then one recompute beats re-joining every list that holds it.
            if fans_out(
                ctx,
                self.left,
                reached,
                self.join.fanout_threshold,
                self._counts,
                changed="right keys",
                of="left rows",
            ):
                left_changed = changes[self.left.name]
                self._state_change = self._changed_composite(state, upserts(left_changed), left_changed)
                changes = None
        if changes is None:
            left_rows = ctx.whole_source(self.left)
            ctx.require_unique(left_rows, self.left)
            right_rows = ctx.whole_source(self.right)
            ctx.require_unique(right_rows, self.right)
            self._composite, rebuilt, _ = materialised(composite_rows(left_rows, self.join, key))
            self._counts.update(composite_rows_rebuilt=rebuilt, left_rows_carried=0)
            lists = joined_lists(
                composite_rows(left_rows, self.join, key, outer=True),
                right_rows,
                right_key=self.right.key,
                right_columns=self._right_columns,
                into=self.join.into,
            )
            return Rebuilt(self._output_rows(left_rows, lists), None)

        left_changed = changes[self.left.name]
        changed_keys = left_changed.select(F.col(key).alias(LEFT_KEY))
        # A batch of few keys finds them, their rows and their old composite rows on the
        # driver (lookups.py).
        found = ctx.affected_on_driver(self.left, left_changed, routed) if isinstance(routed, list) else None
        if isinstance(routed, list):
            routed = ctx.keys_frame(self.left, routed).withColumnRenamed(key, LEFT_KEY)
        old_composite = None
        if found is not None:
            (keys, count, key_bounds), left_rows = found
            affected, bounds = keys.withColumnRenamed(key, LEFT_KEY), replace(key_bounds, column=LEFT_KEY)
            old_composite = self._state_on_driver(ctx, state, keys)
        else:
            affected, count, bounds = materialised(changed_keys.union(routed).distinct(), LEFT_KEY)
            keys, key_bounds = affected.withColumnRenamed(LEFT_KEY, key), replace(bounds, column=key)
            left_rows = ctx.rows_of(self.left, keys, left_changed, key_bounds)
        new_composite = composite_rows(left_rows, self.join, key).localCheckpoint()
        if old_composite is None:
            old_composite = state.where(bounds.covers(F.col(LEFT_KEY))).join(
                F.broadcast(affected), on=LEFT_KEY, how="left_semi"
            )

        # A left row whose list is as it was, and none of whose elements changed on the right,
        # keeps its joined list from the output.
        upserted = left_changed.where(F.col(CHANGE) == ChangeKind.UPSERT.value).select(
            F.col(key).alias(LEFT_KEY)
        )
        same_list = (
            upserted.join(routed, on=LEFT_KEY, how="left_anti")
            .join(signatures(new_composite), on=LEFT_KEY, how="left")
            .join(signatures(old_composite).withColumnRenamed(SIGNATURE, "_lj_old"), on=LEFT_KEY, how="left")
            .where(F.col(SIGNATURE).eqNullSafe(F.col("_lj_old")))
            .select(LEFT_KEY)
        )
        if ctx.repairing:
            same_list = same_list.limit(0)
        output = ctx.spark.read.format("delta").load(self.view.path).where(bounds.covers(F.col(key)))
        if found is not None and not ctx.repairing:  # the affected keys' output rows, on the driver
            output = _either(self._output_on_driver(ctx, output, keys), output)
        kept, carried, _ = materialised(
            output.select(F.col(key).alias(LEFT_KEY), self.join.into).join(
                F.broadcast(same_list), on=LEFT_KEY, how="left_semi"
            )
        )
        carried_keys = kept.select(LEFT_KEY)
        rejoin_rows = left_rows.join(
            F.broadcast(carried_keys.withColumnRenamed(LEFT_KEY, key)), on=key, how="left_anti"
        )
        rejoin_composite, rebuilt, _ = materialised(
            new_composite.join(F.broadcast(carried_keys), on=LEFT_KEY, how="left_anti")
        )
        referenced = (
            None if found is None else ctx.referenced_on_driver(self.right, rejoin_composite, ELEMENT)
        )
        if referenced is not None:
            right_rows = referenced
        else:
            wanted = (
                rejoin_composite.select(F.col(ELEMENT).alias(MATCH))
                .where(F.col(MATCH).isNotNull())
                .distinct()
            )
            right_rows = ctx.unique_rows(
                ctx.snapshot(self.right).join(
                    F.broadcast(wanted), F.col(self.right.key) == wanted[MATCH], how="left_semi"
                ),
                self.right,
            )
        lists = joined_lists(
            composite_rows(rejoin_rows, self.join, key, outer=True),
            right_rows,
            right_key=self.right.key,
            right_columns=self._right_columns,
            into=self.join.into,
        ).unionByName(kept)

        # The composite rows to replace: those of the left keys that changed, but for the carried
        # ones (theirs are unchanged by definition).
        replaced = changed_keys.join(F.broadcast(carried_keys), on=LEFT_KEY, how="left_anti")
        replaced = replaced.localCheckpoint()
        self._state_change = (
            replaced,
            rejoin_composite.join(F.broadcast(replaced), on=LEFT_KEY, how="left_semi"),
            old_composite.join(F.broadcast(replaced), on=LEFT_KEY, how="left_semi"),
        )
        self._counts.update(composite_rows_rebuilt=rebuilt, left_rows_carried=carried)
        return Rebuilt(self._output_rows(left_rows, lists), keys, count, key_bounds)

    def _routed(
        self, ctx: BatchContext, state: DataFrame, right_changes: DataFrame
    ) -> tuple[DataFrame | list[Any], int]:
        """The left keys whose lists hold a changed element (the composite rows), and how many:
        listed on the driver when the changed elements are few (lookups.py), else materialised.
        With no changed element the state is not read."""
        from pyspark.sql import functions as F

        if not ctx.changed.get(self.right.name, 1):  # no changed element: the state is not read
            return [], 0
        changed = ctx.key_values(right_changes, self.right.key, ctx.changed.get(self.right.name))
        if changed is not None:
            listed = routing.routed_on_driver(
                ctx.state_path, ctx.plan.pinned_versions[STATE], changed, route=ELEMENT, most=ctx.most_keys
            )
            if listed is not None:
                return listed, len(listed)
        wanted = right_changes.select(F.col(self.right.key).alias(ELEMENT))
        routed = state.join(F.broadcast(wanted), on=ELEMENT, how="left_semi")
        done, reached, _ = materialised(routed.select(LEFT_KEY).distinct())
        return done, reached

    def _state_on_driver(self, ctx: BatchContext, state: DataFrame, keys: DataFrame) -> DataFrame | None:
        """The composite rows of the affected left keys (`keys`, a local relation), at the
        state's pinned version, read on the driver; None when delta-rs does not read it."""
        from lakejoin import lookups

        path, version = ctx.state_path, ctx.plan.pinned_versions[STATE]
        values = [row[0] for row in keys.collect()]
        rows = lookups.read_keys(path, version, LEFT_KEY, values, [LEFT_KEY, POS, ELEMENT])
        if rows is None:
            return None
        return lookups.as_spark(ctx.spark, rows, state.select(LEFT_KEY, POS, ELEMENT).schema)

    def _output_on_driver(self, ctx: BatchContext, output: DataFrame, keys: DataFrame) -> DataFrame | None:
        """The output's rows of the affected left keys (`keys`, a local relation) as the table
        holds them now, read on the driver; None when delta-rs does not read it."""
        from deltalake import DeltaTable

        from lakejoin import lookups

        path = self.view.path
        version = DeltaTable(path).version()
        values = [row[0] for row in keys.collect()]
        rows = lookups.read_keys(path, version, self.left.key, values)
        if rows is None:
            return None
        return lookups.as_spark(ctx.spark, rows, output.schema)

    def _changed_composite(
        self, state: DataFrame, rows: DataFrame, left_changed: DataFrame
    ) -> tuple[DataFrame, DataFrame, DataFrame]:
        """The keys whose composite rows a batch replaces (the left keys that changed), their new
        composite rows (from `rows`, their rows now) and their old ones (in `state`)."""
        from pyspark.sql import functions as F

        replaced = left_changed.select(F.col(self.left.key).alias(LEFT_KEY)).localCheckpoint()
        old = state.join(F.broadcast(replaced), on=LEFT_KEY, how="left_semi")
        return replaced, composite_rows(rows, self.join, self.left.key), old

    def write_state(self, ctx: BatchContext) -> None:
        from pyspark.sql import functions as F

        present = F.lit(True).alias("_lj_present")
        if self._state_change is None:
            ensure_composite_table(ctx.spark, ctx.state_path, self._composite)
            source = self._composite.select(LEFT_KEY, POS, ELEMENT, present)
            merge_composite(ctx.spark, ctx.state_path, source, full=True)
            return
        replaced, new, _ = self._state_change
        if replaced.isEmpty():  # only right rows changed: every list holds what it held
            return
        new_rows = new.select(LEFT_KEY, POS, ELEMENT, present)
        # The positions to delete come from the table as it is now, not as the last batch left
        # it: a run that died after its state write and before its output commit may have
        # written longer lists than the ones this batch replaces.
        current = ctx.spark.read.format("delta").load(ctx.state_path)
        old = current.join(F.broadcast(replaced), on=LEFT_KEY, how="left_semi")
        source = old.select(LEFT_KEY, POS).join(new_rows, on=[LEFT_KEY, POS], how="full_outer")
        merge_composite(ctx.spark, ctx.state_path, source, full=False)

    def validations(self, ctx: BatchContext, written: DataFrame) -> list[Validation]:
        import great_expectations as gx
        from pyspark.sql import functions as F

        key = self.left.key
        lists = ctx.snapshot(self.left).select(
            F.col(key).alias("_lj_left_key"),
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
                written.select(F.col(key).alias("_lj_left_key"), F.size(self.join.into).alias("_lj_length"))
            ),
            on="_lj_left_key",
            how="inner",
        )
        return [
            Validation(
                "changed_rows",
                written,
                [
                    gx.expectations.ExpectColumnValuesToNotBeNull(column=key),
                    gx.expectations.ExpectColumnValuesToBeUnique(column=key),
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


def _either(first: DataFrame | None, second: DataFrame) -> DataFrame:
    return second if first is None else first


def ensure_composite_table(spark: SparkSession, path: str, composite: DataFrame) -> None:
    from lakejoin.sink import ensure_keyed_table

    ensure_keyed_table(spark, path, composite.select(LEFT_KEY, POS, ELEMENT).schema)


def merge_composite(spark: SparkSession, path: str, source: DataFrame, *, full: bool) -> None:
    """Replace composite rows by (left_key, pos): rows of `source` without `_lj_present` are
    deleted; with `full`, every row not in `source` is deleted too."""
    from pyspark.sql import functions as F

    from lakejoin.sink import KEEP, merge_by_key

    source = source.withColumn(KEEP, F.col("_lj_present").isNotNull())
    merge_by_key(spark, path, source, [LEFT_KEY, POS], [LEFT_KEY, POS, ELEMENT], full=full)
