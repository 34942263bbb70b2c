"""What the batch engine (engine/batch.py) gives a view kind while one batch runs: the plan's
pinned snapshots, the keys that changed, and the reads a view kind builds its recompute from
(rows by key in Spark or on the driver, checked for null and duplicate keys).

Apart from the view-kind interface (views/base.py) because it is the engine's side of the
contract: every view kind uses the same reads, and none of them is a view kind's own choice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from lakejoin.delta import lookups
from lakejoin.delta.change_feed import null_key, upserts
from lakejoin.delta.key_ranges import KeyRange, Keys, materialised
from lakejoin.delta.records import BatchMode
from lakejoin.delta.sources import snapshot
from lakejoin.delta.sql_text import spark_columns
from lakejoin.errors import DuplicateKeyError, NullKeyError
from lakejoin.spec.model import Columns, Key, PipelineSpec, Source, View, shown

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakejoin.delta.plans import BatchPlan

STATE = "_routing"  # the name under which a plan pins the version of the view's state table
# What `checked_unique` makes the job that materialises the rows fail with.
DUPLICATE_KEY = "lakejoin: two rows hold one key"
_HOLDERS = "_lj_holders"


def checked_unique(rows: DataFrame, key: Columns) -> DataFrame:
    """`rows`, failing with `DUPLICATE_KEY` inside the job that materialises them when two hold
    the same `key`: the check is a window over rows that job reads anyway, not a scan of its
    own. (The filter reads the window's column, so the optimizer can neither prune the check
    nor move a join on the key below it.)"""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    holders = F.count(F.lit(1)).over(Window.partitionBy(*key))
    duplicate = F.when(F.col(_HOLDERS) > 1, F.raise_error(F.lit(DUPLICATE_KEY))).otherwise(F.lit(True))
    return rows.withColumn(_HOLDERS, holders).where(duplicate).drop(_HOLDERS)


@dataclass(frozen=True)
class Derivation:
    """How a kind is asked to derive its rows. A context is made for one derivation and keeps
    it: the batch's (engine/batch.py), the audit's and a whole-view health count's
    (views/base.derived, each on a context of its own, `BatchContext.deriving`)."""

    # Also the affected keys' rows at the previous pins, which the write takes from
    # `Rebuilt.previous` instead of reading the output.
    previous: bool = False
    # Rows flagged with their join health (views/health_flags.py).
    health: bool = False
    # False while the audit derives rows: the audited batch checked its inputs.
    check_inputs: bool = True
    # Inputs of at most this many rows are read whole on the driver (delta-rs) and enter Spark
    # as local relations (the audit of a small output, engine/audit.py); 0: Spark reads them.
    inputs_on_driver: int = 0


@dataclass
class BatchContext:
    """What a view kind may use while one batch runs: the plan, how to derive (`derivation`),
    what the batch's change step found (`changed`, `changed_range`, `health_changes`), and
    caches of the pinned snapshots and of the keys collected on the driver."""

    spark: SparkSession
    spec: PipelineSpec
    view: View
    plan: BatchPlan
    state_path: str
    schemas: Mapping[str, Mapping[str, str]]  # each input's columns (name -> type) at its pin
    notes: dict[str, str] = field(default_factory=dict)
    derivation: Derivation = Derivation()
    changed: Mapping[str, int] = field(default_factory=dict)  # keys changed per change source
    changed_range: Mapping[str, KeyRange] = field(default_factory=dict)  # their key range
    # Per `ViewKindLogic.health_changes` measure, its count in the changed rows before the batch
    # and after it (engine/health.py).
    health_changes: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    _snapshots: dict[str, DataFrame] = field(default_factory=dict)
    # Caches by a frame's id, each entry holding the frame (so its id is not reused while the
    # entry lives): its keys on the driver, and the parts of a frame of rows read on the driver
    # (`rows_on_driver`), each a local relation filtered and projected, which Spark collects
    # without a job (a union of them takes one).
    _values: dict[tuple[int, Key], tuple[DataFrame, list[tuple[Any, ...]] | None]] = field(
        default_factory=dict
    )
    _parts: dict[int, tuple[DataFrame, list[DataFrame]]] = field(default_factory=dict)

    def deriving(self, how: Derivation, **found: Any) -> BatchContext:
        """This context for another derivation (and what a step `found`: `changed`,
        `changed_range`, `health_changes`), sharing its notes and caches."""
        return replace(self, derivation=how, **found)

    @property
    def full(self) -> bool:
        return self.plan.mode is BatchMode.FULL_REFRESH

    @property
    def repairing(self) -> bool:
        """A repair re-derives rows to mend the output, so it must not reuse the output's rows."""
        return self.plan.mode is BatchMode.REPAIR

    def read_state(self, pin: str = STATE, path: str | None = None) -> DataFrame:
        """A state table (the default one unless named) as the last committed batch left it
        (the plan pins that version: a run that died after its state write, before its output
        commit, may have written the table further)."""
        version = self.plan.pinned_versions.get(pin, -1)
        return self.spark.read.format("delta").option("versionAsOf", version).load(path or self.state_path)

    def known_changes(self, source: Source, changes: DataFrame) -> Keys | None:
        """The keys of `source` that changed in this batch (`changes`, its materialised net
        change), how many, and their range (None: unknown, as in a full refresh)."""
        if self.full or source.name not in self.changed_range:
            return None
        return changes.select(*source.key), self.changed[source.name], self.changed_range[source.name]

    def version(self, source: Source) -> int:
        return self.plan.pinned_versions[source.name]

    def snapshot(self, source: Source) -> DataFrame:
        """The source as the plan pinned it (read on the driver when the derivation asks for a
        small input's rows there: `Derivation.inputs_on_driver`)."""
        if source.name not in self._snapshots:
            self._snapshots[source.name] = snapshot(self.spark, source.path, self.version(source))
        most = self.derivation.inputs_on_driver
        if not most:
            return self._snapshots[source.name]
        local = f"{source.name} on the driver"
        if local not in self._snapshots:
            rows = lookups.whole_rows(source.path, self.version(source), most)
            pinned = self._snapshots[source.name]
            self._snapshots[local] = (
                pinned if rows is None else lookups.as_spark(self.spark, rows, pinned.schema)
            )
        return self._snapshots[local]

    def where(self, source: Source, version: int | None = None) -> str:
        at = f" at version {version}" if version is not None else ""
        return f"view '{self.view.name}', source '{source.name}' ({source.path}){at}"

    def require_keys(self, rows: DataFrame, source: Source) -> None:
        if rows.where(null_key(source.key)).limit(1).count():
            key = source.key
            raise NullKeyError(
                f"a row has a null key '{key[0]}'"
                if len(key) == 1
                else f"a row's key {shown(key)} has a null in one of its columns",
                where=self.where(source, self.version(source)),
                fix=(
                    f"give every row a '{key[0]}'"
                    if len(key) == 1
                    else f"give every row a value in each of {', '.join(repr(c) for c in key)}"
                )
                + " in the source, or filter null keys out upstream",
            )

    def require_unique(self, rows: DataFrame, source: Source) -> None:
        if not self.derivation.check_inputs:
            return
        key = list(source.key)
        duplicates = rows.groupBy(*key).count().where("count > 1").orderBy(*key).limit(5).collect()
        if duplicates:
            raise self._duplicates(source, [(tuple(d[c] for c in key), d["count"]) for d in duplicates])

    def _duplicates(self, source: Source, held: Sequence[tuple[tuple[Any, ...], int]]) -> DuplicateKeyError:
        """The error for keys `source` holds more than once (key, rows), at the pin."""
        key = source.key
        said = ", ".join(f"{shown(key)}={shown_value(key, value)} ({n} rows)" for value, n in held)
        return DuplicateKeyError(
            f"the key '{shown(key)}' is not unique: {said}",
            where=self.where(source, self.version(source)),
            fix="deduplicate the source table (one row per key), or declare another key column",
        )

    def unique_rows(self, rows: DataFrame, source: Source) -> DataFrame:
        """`rows` of `source` materialised (a local checkpoint), one per key: two rows with one
        key raise DuplicateKeyError, found inside the materialising job (`checked_unique`)."""
        return self.materialise_unique(
            lambda: checked_unique(rows, source.key).localCheckpoint(), rows, source
        )

    def materialise_unique(self, materialise: Any, rows: DataFrame, source: Source) -> Any:
        """`materialise()`, whose job checks `rows` with `checked_unique`; when that check fails,
        DuplicateKeyError names the duplicate keys (`require_unique`, on the failing path only)."""
        try:
            return materialise()
        except Exception as exc:
            if DUPLICATE_KEY not in str(exc):
                raise
            self.require_unique(rows, source)
            raise

    def rows_of(
        self, source: Source, keys: DataFrame, changes: DataFrame, bounds: KeyRange | None = None
    ) -> DataFrame:
        """The rows of `source` at the pinned version whose key is in `keys` (a column named like
        the source's key), materialised, one row per key (checked here: callers need no
        uniqueness check of their own). `bounds`, when given, says `keys` is materialised
        already and spans that key range (it saves materialising the keys again).

        A key that changed in this batch takes its row from `changes` (its net change, which is
        its row as of the pin), so only the keys that did not change are looked up in the
        snapshot, and the snapshot's rows are not read at all when there are none: a batch of
        fact changes alone reads only the fact table's key column.
        """
        from pyspark.sql import functions as F

        key = list(source.key)
        if bounds is None:
            keys, _, bounds = materialised(keys, key)
        # Only the files of the keys' range are read (key_ranges: the source's files hold key
        # ranges when it was written in key order, as CDC appends of growing keys are).
        snapshot = self.snapshot(source).where(bounds.renamed(key).covers())
        # A net change holds one row per key, so it cannot show a key the source holds twice:
        # the keys the snapshot holds are checked, by key column alone, in the job that finds
        # which of them did not change.
        held = snapshot.select(*key).join(F.broadcast(keys), on=key, how="left_semi")
        unchanged_keys_of = checked_unique(held, key).join(changes.select(*key), on=key, how="left_anti")
        rest, unchanged_keys, _ = self.materialise_unique(
            lambda: materialised(unchanged_keys_of), held, source
        )
        changed = upserts(changes).select(*spark_columns(snapshot.columns))
        if unchanged_keys:
            unchanged = snapshot.join(F.broadcast(rest), on=key, how="left_semi")
            changed = changed.unionByName(unchanged)
        return changed.localCheckpoint()

    @property
    def most_keys(self) -> int:
        """Up to how many keys a lookup is made on the driver (0: driver lookups are off)."""
        return lookups.max_keys(self.spark)

    def key_values(self, frame: DataFrame, key: Key, count: int | None) -> list[tuple[Any, ...]] | None:
        """The keys (tuples of `key`'s columns) in `frame` (materialised, `count` rows) on the
        driver, for a lookup there (`lookups`); None when they are too many, of a type it does
        not take, or not counted."""
        if not lookups.takes(count, self.most_keys):
            return None
        # A frame's values are asked for twice (the routes leave out the changed left keys, the
        # affected rows read them): collected once.
        if (id(frame), key) not in self._values or self._values[id(frame), key][0] is not frame:
            values = [tuple(row) for row in frame.select(*key).collect()] if count else []
            self._values[id(frame), key] = (frame, values if lookups.literal_keys(values) else None)
        return self._values[id(frame), key][1]

    def know_keys(self, frame: DataFrame, key: Key, values: list[tuple[Any, ...]]) -> None:
        """`frame`'s keys, found on the driver with it (engine/changes.py): `key_values` then
        collects none."""
        self._values[id(frame), key] = (frame, values if lookups.literal_keys(values) else None)

    def driver_rows(
        self, source: Source, values: Sequence[tuple[Any, ...]], *, excluding: Sequence[tuple[Any, ...]] = ()
    ) -> DataFrame | None:
        """The rows of `source` at the pinned version whose key is one of `values` but not of
        `excluding`, read on the driver (`lookups`), one per key: two rows with one key of
        `values` raise DuplicateKeyError. None when delta-rs cannot read the table as Spark would."""
        path, version = source.path, self.version(source)
        rows = lookups.read_keys(path, version, source.key, values)
        if rows is None:
            return None
        held = lookups.duplicates(rows, source.key)
        if held:
            raise self._duplicates(source, held)
        return lookups.as_spark(
            self.spark, lookups.without(rows, source.key, excluding), self.snapshot(source).schema
        )

    def rows_on_driver(
        self,
        source: Source,
        values: Sequence[tuple[Any, ...]],
        changes: DataFrame,
        changed: Sequence[tuple[Any, ...]],
    ) -> DataFrame | None:
        """`rows_of` for keys listed on the driver (`values`; `changed`: those that changed in
        this batch, whose rows come from `changes`): the other keys' rows come from a driver
        lookup, no Spark job. None when delta-rs does not read the table (take `rows_of`)."""
        # The changed keys are looked up too: their rows in the snapshot are not used, but a key
        # the snapshot holds twice must fail as it does in `rows_of`.
        unchanged = self.driver_rows(source, values, excluding=changed)
        if unchanged is None:
            return None
        upserted = upserts(changes).select(*spark_columns(unchanged.columns))
        rows = upserted.unionByName(unchanged)
        self._parts[id(rows)] = (rows, [upserted, unchanged])
        return rows

    def keys_frame(self, source: Source, values: Sequence[tuple[Any, ...]], schema: Any = None) -> DataFrame:
        """Keys of `source` listed on the driver, as a frame of its key's columns typed like
        them: a local relation built from Arrow, which Spark reads without a job and knows the
        size of (a frame made from Python rows is an RDD: every read of it is a job)."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import StructType

        fields = StructType([(schema or self.snapshot(source).schema)[c] for c in source.key])
        target = to_arrow_schema(fields)
        columns = list(zip(*values, strict=True)) if values else [() for _ in source.key]
        table = pa.table(
            [pa.array(list(column), type=f.type) for column, f in zip(columns, target, strict=True)],
            schema=target,
        )
        return lookups.as_spark(self.spark, table, fields)

    def referenced_on_driver(
        self, source: Source, rows: DataFrame | Sequence[DataFrame], fk: Columns, *, distinct: bool = False
    ) -> DataFrame | None:
        """The rows of `source` at the pin that `rows` (few, found by `reads.affected_rows`; a frame
        or several) reference through `fk` (columns of `rows`, in the order of `source`'s key; a
        reference with a null in any column references nothing), one per key, read on the
        driver; None when a driver lookup does not take them (use `unique_rows`). `distinct`:
        the rows may repeat a reference many times (a list_join's elements), so Spark makes them
        distinct first.

        Each frame read on the driver is collected by its parts (`rows_on_driver`), local
        relations Spark collects without a job; a union of them, or a join, would start one or
        two (issue 52)."""
        frames = [rows] if not isinstance(rows, Sequence) else list(rows)
        if distinct:  # many references: Spark makes them distinct (a shuffle) before the collect
            union = frames[0]
            for more in frames[1:]:
                union = union.unionByName(more)
            frames = [union.select(*fk).where(~null_key(tuple(fk))).distinct()]
        else:  # few: made distinct here, not by Spark (a distinct is a shuffle: jobs)
            parts = [part for frame in frames for part in self._parts_of(frame)]
            frames = [part.select(*fk).where(~null_key(tuple(fk))) for part in parts]
        wanted = list(dict.fromkeys(tuple(r) for frame in frames for r in frame.collect()))
        if not lookups.takes(len(wanted), self.most_keys) or not lookups.literal_keys(wanted):
            return None
        return self.driver_rows(source, wanted)

    def _parts_of(self, frame: DataFrame) -> list[DataFrame]:
        held = self._parts.get(id(frame))
        return held[1] if held is not None and held[0] is frame else [frame]

    def whole_unique(self, source: Source) -> DataFrame:
        """The pinned snapshot, checked for null keys, then for duplicate keys (a full recompute
        reads it all; no checks while the derivation does not check its inputs)."""
        rows = self.snapshot(source)
        if self.derivation.check_inputs:
            self.require_keys(rows, source)
        self.require_unique(rows, source)
        return rows


def shown_value(key: Key, value: tuple[Any, ...]) -> str:
    """A key's value as messages show it: `7` for a key of one column, `(7, 'EU')` for several."""
    return repr(value[0]) if len(key) == 1 else "(" + ", ".join(repr(v) for v in value) + ")"
