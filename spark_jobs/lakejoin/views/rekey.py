"""rekey: a lookup table keyed by another column of a master table.

`merchants(merchant_id, display_name, country)` re-keyed by `display_name` gives
`merchants_by_name(display_name, merchant_id, country)`.

The view's state is an index of the master: one row per master key with its derived key, the
commit version of its last change of content (a write that left the row as it was is none), and
the chosen columns. It is a Delta table clustered by the
derived key, maintained from the master's Change Data Feed alone: a batch never rescans the
master. The old derived key of a changed master comes from the index; the new one from the
change. The derived keys a batch affects are the old and new ones of every changed master, and
each is recomputed from the masters that claim it in the index.

- An update `v1 -> v2` deletes `v1` and writes `v2`; a delete deletes its derived row; an
  update that keeps `v` rewrites the row only when a chosen column changed.
- A null derived key is dropped and counted (`null_keys_dropped`).
- `unique: true` (the default): two masters claiming one derived key is a conflict.
  `on_conflict: fail` stops the batch before it writes anything and lists the keys;
  `on_conflict: latest` keeps the master whose last change of content has the highest commit
  version (on a tie, within one commit, the greatest master key) and counts the conflict
  (`conflicts`): a master written back unchanged does not renew its claim.
- `unique: false`: one derived row per (derived key, master key).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakejoin.delta import lookups
from lakejoin.delta.change_feed import CHANGE, VERSION, ChangeKind, net_changes, null_key, read_change_feed
from lakejoin.delta.key_ranges import materialised
from lakejoin.delta.sql_text import spark_columns
from lakejoin.errors import KeyConflictError
from lakejoin.quality.validations import Validation
from lakejoin.sink.entry import StateWrite
from lakejoin.sink.merge_terms import KEEP
from lakejoin.spec.explained import (
    Ask,
    Choice,
    Feed,
    InputRow,
    Reading,
    Role,
    rekey_choice,
    why_not_derived,
)
from lakejoin.spec.layout import state_path
from lakejoin.spec.model import Key, PipelineSpec, Resolution, View, quoted, resolution, shown
from lakejoin.views.base import Gathered, Rebuilt, ViewKindLogic, held_rows
from lakejoin.views.context import STATE, BatchContext, shown_value
from lakejoin.views.explained import looked_up, pin, read_rows
from lakejoin.views.health_flags import KEEP as FLAG_KEEP
from lakejoin.views.health_flags import flag
from lakejoin.views.reads import Affected, Reach

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, Observation

SINCE = "_lj_version"  # the commit version of a master row's last change of content
MASTER_RESOLVED = "_lj_master_resolved"


def resolve(
    claims: DataFrame, derived_key: Key, master_key: Key, *, unique: bool, flags: bool = False
) -> DataFrame:
    """One output row per derived key (the latest claim wins; on a tie the greatest master key,
    its columns compared in order), or every claim when not unique.

    With `flags` (views/health_flags.py), each row is flagged `conflicts` when several masters
    claim its derived key (counted over the same window, no shuffle of its own)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not unique:
        if flags:
            return claims.withColumn(flag("conflicts"), F.lit(0)).withColumn(FLAG_KEEP, F.lit(True))
        return claims
    order = [F.col(SINCE).desc(), *(F.col(c).desc() for c in master_key)]
    latest = Window.partitionBy(*derived_key).orderBy(*order)
    ranked = claims.withColumn("_lj_rank", F.row_number().over(latest))
    if flags:
        claimants = F.count(F.lit(1)).over(Window.partitionBy(*derived_key))
        ranked = ranked.withColumn(flag("conflicts"), (claimants > 1).cast("int")).withColumn(
            FLAG_KEEP, F.lit(True)
        )
    return ranked.where("_lj_rank = 1").drop("_lj_rank")


def conflicts(claims: DataFrame, derived_key: Key, master_key: Key) -> DataFrame:
    """(derived key, master keys): the derived keys that several masters claim (the masters'
    keys as values, or as structs for a key of several columns)."""
    from pyspark.sql import functions as F

    master = F.col(master_key[0]) if len(master_key) == 1 else F.struct(*master_key)
    return (
        claims.groupBy(*derived_key)
        .agg(F.count(F.lit(1)).alias("n"), F.sort_array(F.collect_list(master)).alias("masters"))
        .where("n > 1")
    )


@dataclass(frozen=True)
class IndexUpdate:
    """What a batch writes to the index (`Rebuilt.state`): every index row (`full`, a full
    refresh), or the master's net changes, one row per changed master with its derived key, the
    version of its last change, the chosen columns and the change kind (a delete, or an upsert
    with a null derived key, deletes the master's index row)."""

    rows: DataFrame
    full: bool


def _null_keys(derived_key: Key) -> Column:
    """How many rows have no derived key (a null in any of its columns), as an observation's `n`."""
    from pyspark.sql import functions as F

    return F.count_if(null_key(derived_key)).alias("n")


@dataclass(frozen=True)
class Claims(Affected):
    """The derived keys a rekey batch affects (`keys`; `rows`: the changed masters' new
    claims) and what its gather reads on from: the index at its pin, the master's changes, the
    changed masters' index rows (`old`), the changed master keys when those were read on the
    driver (`masters`; None: with Spark), and the observation counting the masters dropped
    for a null derived key."""

    index: DataFrame
    changed: DataFrame
    old: DataFrame
    masters: list[tuple[Any, ...]] | None
    dropped: Observation

    @property
    def new(self) -> DataFrame:
        """The changed masters' new claims (those with a derived key)."""
        return self.rows


def _former_masters(ask: Ask, k: Key) -> list[tuple[Any, ...]]:
    """The masters whose rows the output held under the explained derived key, newest first,
    from the output's history of the key (its rows carry the master key)."""
    if ask.history is None:
        return []
    rows = [r for r in reversed(ask.history) if all(c in r for c in k)]
    return list(dict.fromkeys(tuple(r[c] for c in k) for r in rows))


class RekeyView(ViewKindLogic["DataFrame"]):  # the rows: its claims
    def __init__(self, spec: PipelineSpec, view: View) -> None:
        super().__init__(spec, view)
        self.rekey = view.rekey
        self.master = spec.sources[self.rekey.source]
        self.resolution = resolution(self.rekey.unique, self.rekey.on_conflict)

    def _columns(self, schemas: Mapping[str, Mapping[str, str]]) -> list[str]:
        """The master's chosen columns, but for the master key's and the derived key's."""
        chosen = list(self.rekey.columns or schemas[self.master.name])
        return [c for c in chosen if c not in (*self.rekey.key, *self.master.key)]

    def _index_columns(self, schemas: Mapping[str, Mapping[str, str]]) -> list[str]:
        keys = list(dict.fromkeys((*self.master.key, *self.rekey.key)))
        return [*keys, SINCE, *self._columns(schemas)]

    @property
    def _claim_key(self) -> list[str]:
        """A claim's key columns, once each: the derived key's, then the master key's."""
        v, k = self.rekey.key, self.master.key
        return [*v, *(c for c in k if c not in v)]

    def affected(self, ctx: BatchContext, changes: Mapping[str, DataFrame], reach: Reach) -> Claims:
        """The derived keys a batch affects: the old ones of the changed masters (their index
        rows: on the driver when they are few, lookups.py) and the new ones (their upserts)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        v, k = self.rekey.key, self.master.key
        index_columns = self._index_columns(ctx.schemas)
        index, changed = ctx.read_state(), changes[self.master.name]
        # Masters without a derived key (a null in any of its columns) are counted by an
        # observation on the job that materialises the rows anyway, not by a count of their own.
        dropped = Observation()
        upserts = changed.where(F.col(CHANGE) == ChangeKind.UPSERT.value).observe(dropped, _null_keys(v))
        new = upserts.where(~null_key(v)).select(
            *spark_columns(index_columns[: len(self._claim_key)]),
            F.col(VERSION).alias(SINCE),
            *spark_columns(self._columns(ctx.schemas)),
        )
        # A batch of few masters reads their index rows on the driver (lookups.py).
        masters = ctx.key_values(changed, k, ctx.changed.get(self.master.name))
        listed = None if masters is None else self._index_on_driver(ctx, index, k, masters)
        old = (
            index.join(F.broadcast(changed.select(*k)), on=list(k), how="left_semi")
            if listed is None
            else listed
        )
        if ctx.derivation.previous and listed is None:
            old = old.localCheckpoint()  # the previous claims read them again
        key_columns = list(self.output_key)
        keys = materialised(old.select(*key_columns).union(new.select(*key_columns)).distinct(), v)
        on_driver = masters if listed is not None else None
        return Claims(keys, new, on_driver is not None, index, changed, old, on_driver, dropped)

    def gather(
        self, ctx: BatchContext, changes: Mapping[str, DataFrame], affected: Affected, metrics: dict[str, int]
    ) -> Gathered[DataFrame]:
        """The claims of the affected derived keys (the unchanged masters' and the changed
        ones'), materialised, their conflicts counted (FAIL raises here, before anything is
        written), and the index update; with `ctx.derivation.previous`, the claims at the
        previous pins."""
        from pyspark.sql import functions as F

        assert isinstance(affected, Claims), "rekey's affected keys are its claims"
        k, index_columns = self.master.key, self._index_columns(ctx.schemas)
        unchanged, held = self._unchanged_claims(ctx, affected)
        # Without `unique`, a derived row depends on its own master alone.
        claims = (
            affected.new
            if self.resolution is Resolution.EVERY_CLAIM
            else unchanged.select(*spark_columns(index_columns)).unionByName(affected.new)
        )
        claims = claims.localCheckpoint()
        update = IndexUpdate(
            affected.changed.select(
                *spark_columns(index_columns[: len(self._claim_key)]),
                F.col(VERSION).alias(SINCE),
                *spark_columns(self._columns(ctx.schemas)),
                F.col(CHANGE),
            ),
            full=False,
        )
        before = None
        if ctx.derivation.previous:
            # The affected derived keys' claims at the previous pins: the unchanged
            # masters' (in `claims`) and the changed masters' index rows.
            before = affected.old.select(*spark_columns(index_columns))
            if self.resolution is not Resolution.EVERY_CLAIM:
                before = (
                    claims.join(F.broadcast(affected.changed.select(*k)), on=list(k), how="left_anti")
                    .select(*spark_columns(index_columns))
                    .unionByName(before)
                )
        self._count_conflicts(ctx, claims, affected.dropped, metrics)
        return Gathered(claims, before, held=held, state=update)

    def _unchanged_claims(
        self, ctx: BatchContext, affected: Claims
    ) -> tuple[DataFrame, dict[str, DataFrame]]:
        """The index rows of the affected derived keys' unchanged masters, and the master rows
        of the claims, held for the checks when listed on the driver (none otherwise)."""
        from pyspark.sql import functions as F

        v, k = self.rekey.key, self.master.key
        held: dict[str, DataFrame] = {}
        unchanged = None
        if affected.masters is not None:
            # The masters of the claims written, which the check looks for in the master
            # table: the changed ones are in the batch's changes, the others are read on
            # the driver with the index rows that name them (no scan of the master whole).
            claimed_masters: list[tuple[Any, ...]] | None = []
            if self.resolution is not Resolution.EVERY_CLAIM:
                # Distinct here, not by Spark (a shuffle): the affected keys are few.
                affected_keys = affected.keys[0]
                claimed = list(dict.fromkeys(tuple(row) for row in affected_keys.select(*v).collect()))
                found = self._index_rows_on_driver(ctx, v, claimed, excluding=(k, affected.masters))
                if found is not None:
                    unchanged = lookups.as_spark(ctx.spark, found, affected.index.schema)
                claimed_masters = None if found is None else lookups.key_tuples(found, k)
            held_masters = (
                None if claimed_masters is None else self._masters(ctx, affected.changed, claimed_masters)
            )
            if held_masters is not None:
                held[self.master.name] = held_masters
        if unchanged is None:
            derived = affected.keys[0].select(*v).distinct()
            unchanged = affected.index.join(
                F.broadcast(affected.changed.select(*k)), on=list(k), how="left_anti"
            ).join(F.broadcast(derived), on=list(v), how="left_semi")
        return unchanged, held

    def gather_whole(self, ctx: BatchContext, metrics: dict[str, int]) -> Gathered[DataFrame]:
        """Every master's claim (`_full_index`), materialised, its conflicts counted, and the
        index rewritten whole; every master without a derived key is counted."""
        from pyspark.sql import Observation

        v = self.rekey.key
        dropped = Observation()
        kept = self._full_index(ctx).observe(dropped, _null_keys(v)).where(~null_key(v))
        claims = kept.select(*spark_columns(self._index_columns(ctx.schemas))).localCheckpoint()
        self._count_conflicts(ctx, claims, dropped, metrics)
        return Gathered(
            claims,
            state=IndexUpdate(claims, full=True),
            # a full recompute counts every master without a derived key
            health_counts={"null_keys": metrics["null_keys_dropped"]},
        )

    def _count_conflicts(
        self, ctx: BatchContext, claims: DataFrame, dropped: Observation, metrics: dict[str, int]
    ) -> None:
        """Count in `metrics` the masters dropped for a null derived key (`dropped`, observed by
        the job that materialised the claims) and the derived keys several masters claim; with
        `on_conflict: fail`, raise KeyConflictError for those, else note them."""
        v, k = self.rekey.key, self.master.key
        metrics.update(null_keys_dropped=int(dropped.get["n"] or 0), conflicts=0)
        if self.resolution is Resolution.EVERY_CLAIM:
            return
        clashes = conflicts(claims, v, k).orderBy(*v).limit(20).collect()
        total = conflicts(claims, v, k).count() if clashes else 0
        metrics["conflicts"] = total
        if clashes and self.resolution is Resolution.FAIL:
            raise KeyConflictError(
                f"{total} derived key(s) are claimed by more than one master row: "
                + shown_conflicts(clashes, v, k, limit=20),
                where=f"view '{self.view.name}', source '{self.master.name}' at version "
                f"{ctx.version(self.master)}",
                fix=f"make {quoted(v)} unique among the master rows and run again (nothing was written), "
                "or declare 'on_conflict: latest' (the master changed last wins) or "
                "'unique: false' (one row per master)",
            )
        if clashes:
            ctx.notes["conflicts"] = (
                f"{total} derived key(s) claimed by several masters, the latest kept: "
                + shown_conflicts(clashes, v, k, limit=5)
            )

    def recompute(self, ctx: BatchContext, rows: DataFrame, *, flags: bool) -> DataFrame:
        v, k = self.rekey.key, self.master.key
        flagged = [flag("conflicts"), FLAG_KEEP] if flags else []
        return resolve(rows, v, k, unique=self.rekey.unique, flags=flags).select(
            *spark_columns([*self._claim_key, *self._columns(ctx.schemas), *flagged])
        )

    def explain(self, ask: Ask) -> Reading:
        """The master rows holding the derived key at the pin and the rule that kept one (or
        all); for a key not in the view, the masters that held it (from the output's history of
        the key, whose rows name their master)."""
        master, v, k = self.master, self.rekey.key, self.master.key
        derived, version = ask.values[: len(v)], pin(ask.batch, master)
        claims = self._claims_at_pin(ask, derived)
        if claims is None:  # no index to read: the master itself, by a column its files are not sorted by
            rows = read_rows(master.path, version, v, [derived], f"source '{master.name}'")
            claims = {tuple(r[c] for c in k): None for r in rows}
        else:
            masters = list(claims)
            rows = read_rows(master.path, version, k, masters, f"source '{master.name}'") if masters else []
            rows = [r for r in rows if tuple(r[c] for c in v) == derived]  # else the index drifted
        if not self.rekey.unique:
            rows = [r for r in rows if tuple(r[c] for c in k) == ask.values[len(v) :]]
        holders = [InputRow(Role.MASTER, master.name, version, {c: r[c] for c in k}, r) for r in rows]
        # A batch's changes by the derived key: the masters that came to hold it and those that left
        # (`unique: false`: a row is its own master's alone, so by the master key as well).
        feeds: list[Feed] = [(master, Role.MASTER, v, [derived])]
        if not self.rekey.unique:
            feeds = [(master, Role.MASTER, (*v, *k), [ask.values])]
        if ask.absent:
            former = _former_masters(ask, k) if self.rekey.unique else [ask.values[len(v) :]]
            claimants = holders or [looked_up(ask, master, Role.MASTER, m) for m in former]
            return Reading(claimants, feeds, why_not_derived(v, claimants, claimed=bool(holders)))
        rule = self.resolution
        found = [(h.key or {}, claims.get(tuple((h.key or {}).values()))) for h in holders]
        chosen, text = rekey_choice(rule, found)
        return Reading(
            holders, feeds, choice=Choice(rule, chosen, found if rule is Resolution.LATEST else [], text)
        )

    def _claims_at_pin(self, ask: Ask, derived: tuple[Any, ...]) -> dict[tuple[Any, ...], int | None] | None:
        """The master keys claiming `derived` and each one's commit version of its last change of
        content, from the index at the batch's pin: a Delta table clustered by the derived key, so
        the lookup reads the few files that hold it. None when there is no index at the pin or
        delta-rs cannot read it."""
        version = ask.batch.pinned_versions.get(STATE, -1)
        path = state_path(self.spec, self.view)
        k = self.master.key
        if version < 0 or not lookups.literal_keys([derived]):
            return None
        try:
            rows = lookups.read_keys(path, version, self.rekey.key, [derived], [*k, SINCE])
        except Exception as exc:  # noqa: BLE001 - delta-rs: a version vacuumed, a log cleaned up
            ask.notes.append(f"the rekey index {path} cannot be read at version {version} ({exc})")
            return None
        if rows is None:
            return None
        return {tuple(r[c] for c in k): int(r[SINCE]) for r in rows.to_pylist()}

    @staticmethod
    def _index_rows_on_driver(
        ctx: BatchContext,
        key: Key,
        values: list[tuple[Any, ...]],
        *,
        excluding: tuple[Key, list[tuple[Any, ...]]] | None = None,
    ) -> pa.Table | None:
        """The index rows, at its pinned version, whose `key` is one of `values` (less those
        whose `excluding` key is one of its values), read on the driver; None when they are too
        many or delta-rs does not read the index."""
        path, version = ctx.state_path, ctx.plan.pinned_versions[STATE]
        few = lookups.takes(len(values), lookups.max_keys(ctx.spark)) and lookups.literal_keys(values)
        rows = lookups.read_keys(path, version, key, values) if few else None
        if rows is None or excluding is None:
            return rows
        return lookups.without(rows, *excluding)

    def _index_on_driver(
        self, ctx: BatchContext, index: DataFrame, key: Key, values: list[tuple[Any, ...]]
    ) -> DataFrame | None:
        """`_index_rows_on_driver` as a Spark local relation of the index's schema."""
        rows = self._index_rows_on_driver(ctx, key, values)
        return None if rows is None else lookups.as_spark(ctx.spark, rows, index.schema)

    def _masters(
        self, ctx: BatchContext, changed: DataFrame, unchanged: list[tuple[Any, ...]]
    ) -> DataFrame | None:
        """The master rows at the pin of the changed masters (their net changes) and of the
        `unchanged` ones (read on the driver); None when a driver lookup does not take them."""
        from lakejoin.delta.change_feed import upserts

        wanted = sorted(set(unchanged))
        if not wanted:
            return upserts(changed).select(*spark_columns(ctx.snapshot(self.master).columns))
        if not (lookups.takes(len(wanted), ctx.most_keys) and lookups.literal_keys(wanted)):
            return None
        looked_up = ctx.driver_rows(self.master, wanted)
        if looked_up is None:
            return None
        return upserts(changed).select(*spark_columns(looked_up.columns)).unionByName(looked_up)

    def _full_index(self, ctx: BatchContext) -> DataFrame:
        """Every master row with the commit version of its last change of content.

        Only `on_conflict: latest` needs the versions; they come from the master's whole
        change feed, collapsed as a batch's changes are (`net_changes`: a commit that wrote the
        row back as it was is no change). Where that cannot be read, the pinned version stands in
        for every row (ties then go to the greatest master key), and the batch says so in its
        notes.
        """
        from pyspark.sql import functions as F

        snapshot = ctx.whole_unique(self.master)
        pinned = ctx.version(self.master)
        if self.resolution is not Resolution.LATEST:
            return snapshot.withColumn(SINCE, F.lit(pinned).cast("bigint"))
        try:
            feed = read_change_feed(ctx.spark, self.master.path, 0, pinned)
            last = net_changes(feed, self.master.key).where(F.col(CHANGE) == ChangeKind.UPSERT.value)
            versions = last.select(*self.master.key, F.col(VERSION).alias(SINCE)).localCheckpoint()
        except Exception as exc:  # noqa: BLE001 - any unreadable history falls back, with a note
            ctx.notes["versions"] = (
                "the master's change feed from version 0 could not be read "
                f"({type(exc).__name__}); conflicts in this full refresh were resolved by master key"
            )
            return snapshot.withColumn(SINCE, F.lit(pinned).cast("bigint"))
        return snapshot.join(versions, on=list(self.master.key), how="left").withColumn(
            SINCE, F.coalesce(F.col(SINCE), F.lit(pinned).cast("bigint"))
        )

    def write_state(self, ctx: BatchContext, rebuilt: Rebuilt, *, since: int) -> tuple[StateWrite, ...]:
        """The index's write of `rebuilt.state` (an `IndexUpdate`): merged by master key, and
        with `full`, every master not in it deleted (the sink rewrites the index whole when the
        master gained, lost or retyped a column it carries: a definition change refreshes the
        view in full). An incremental write also puts back, as the batch's pin has them, the
        masters that commits after the pin (up to `since`) wrote."""
        from pyspark.sql import functions as F

        update = rebuilt.state
        assert isinstance(update, IndexUpdate), "rekey's rebuild returns an IndexUpdate as its state"
        v, k = self.rekey.key, self.master.key
        if update.full:
            schema = update.rows.schema
            source = update.rows.withColumn(KEEP, F.lit(True))
        else:
            schema = update.rows.drop(CHANGE).schema
            keep = (F.col(CHANGE) == ChangeKind.UPSERT.value) & ~null_key(v)
            source = update.rows.withColumn(KEEP, keep).drop(CHANGE)
            pin = ctx.plan.pinned_versions.get(STATE, -1)
            if 0 <= pin < since:
                source = source.unionByName(
                    self._as_at_pin(ctx, source, pin, since), allowMissingColumns=True
                )
        columns = tuple(self._index_columns(ctx.schemas))
        return (StateWrite(ctx.state_path, tuple(k), columns, source, update.full, schema),)

    def _as_at_pin(self, ctx: BatchContext, update: DataFrame, pin: int, since: int) -> DataFrame:
        """The index rows, as version `pin` has them, of the masters that the commits in
        (pin, since] wrote and `update` does not (a master gone at the pin: a row to delete)."""
        from pyspark.sql import functions as F

        k = list(self.master.key)
        touched = (
            read_change_feed(ctx.spark, ctx.state_path, pin + 1, since)
            .select(*k)
            .distinct()
            .join(update.select(*k), on=k, how="left_anti")
        )
        at_pin = ctx.read_state()
        kept = at_pin.join(touched, on=k, how="left_semi").withColumn(KEEP, F.lit(True))
        gone = touched.join(at_pin.select(*k), on=k, how="left_anti").withColumn(KEEP, F.lit(False))
        return kept.unionByName(gone, allowMissingColumns=True).select(*spark_columns(update.columns))

    def validations(self, ctx: BatchContext, written: DataFrame, rebuilt: Rebuilt) -> list[Validation]:
        import great_expectations as gx

        from lakejoin.quality import checks as quality

        v, k = self.rekey.key, self.master.key
        master = held_rows(ctx, rebuilt, self.master.name, self.master)
        rows = quality.with_key_resolution(written, master, k, k, MASTER_RESOLVED)
        keys = (
            quality.key_expectations(v)
            if self.rekey.unique
            else [
                *(gx.expectations.ExpectColumnValuesToNotBeNull(column=c) for c in v),
                gx.expectations.ExpectCompoundColumnsToBeUnique(column_list=[*v, *k]),
            ]
        )
        return [
            Validation(
                "changed_rows",
                rows,
                [
                    *keys,
                    gx.expectations.ExpectColumnValuesToBeInSet(column=MASTER_RESOLVED, value_set=[True]),
                ],
            ),
        ]


def shown_conflicts(clashes: list, v: Key, k: Key, *, limit: int) -> str:  # noqa: ANN001 - Rows
    """`v=... <- k [...]` for each conflict: its derived key and the masters claiming it."""

    def master(m: Any) -> str:
        return repr(m) if len(k) == 1 else "(" + ", ".join(repr(x) for x in m) + ")"

    return "; ".join(
        f"{shown(v)}={shown_value(v, tuple(c[x] for x in v))} <- {shown(k)} "
        f"[{', '.join(master(m) for m in c['masters'])}]"
        for c in clashes[:limit]
    )
