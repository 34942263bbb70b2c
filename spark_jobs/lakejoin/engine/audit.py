"""The continuous audit (issue 40): after its output commit, an audit batch re-derives one slice
of the view's keys from the inputs at its pins and compares it with the output it committed.

Audit batches take the slices in turn (quality/audit_plan.next_slice); a round of `slices` audit
batches checks every key. A round cuts the keys by ranges of the key's first column, read from
the output's file statistics (delta-rs, no job) at the version the round's first batch
committed, so every batch of the round cuts alike and the slices cover every key once (each
logs a fingerprint of its cut, and only slices cut alike add up in the coverage). A range
is a literal predicate: Delta skips the output's files outside it, and Spark pushes it into the
scan of the driving table (a view keyed by its driving table's key), so a slice reads about a
`slices`-th of each (plus the files a batch added since the table was laid out, which span the
keys). A key whose first column's statistics are no exact literal (a timestamp, a float, a
decimal, a binary, or none kept) or give fewer cuts than half the slices falls back to a hash of
the key (xxhash64 modulo `slices`), which reads everything. The rows are derived by the kind's
own full recompute, lazily and without its input checks (the batch ran them); the output is read
at the committed version with the same filter. One job compares them by key and a hash of every
column: how many keys differ, and the first 20.

A small output (at most `spark.lakejoin.audit.wholeMaxRows` rows in its files, 20,000 by
default) is audited whole, on the driver: its rows are read with delta-rs (no Spark scan), the
kind's full recompute runs over its inputs of at most as many rows read with delta-rs (local
relations, no file scan) and is collected as Arrow (one job, the one a slice also runs), and
the two are compared by key and value there. A slice of a small output costs what the whole costs (its
inputs are read whole either way), so such an audit checks every key at once.

`lakejoin audit SPEC --full` runs every slice at once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakejoin.delta import lookups
from lakejoin.delta.log import BatchLog
from lakejoin.delta.markers import app_id, output_batches
from lakejoin.delta.plans import BatchPlan
from lakejoin.delta.records import BatchMode
from lakejoin.delta.sql_text import spark_columns
from lakejoin.engine.kinds import view_logic
from lakejoin.engine.plan import input_columns, stale_pins
from lakejoin.errors import AuditDifferenceError, BatchStateError, InputReplacedError
from lakejoin.quality.audit_plan import EVERY_KEY
from lakejoin.spec.definition import output_key
from lakejoin.spec.layout import state_path
from lakejoin.spec.model import Key, PipelineSpec, View
from lakejoin.views.base import ViewKindLogic, derived
from lakejoin.views.context import BatchContext, shown_value

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

_log = logging.getLogger("lakejoin")

SHOWN = 20  # keys an audit names
# Up to how many rows (in the output's files, at the audited version) an output is audited whole
# on the driver; 0: always by slices in Spark. A collect of 20,000 rows and their comparison in
# Python take about a tenth of a second; a Spark slice's job alone several.
WHOLE_MAX_ROWS = "spark.lakejoin.audit.wholeMaxRows"
WHOLE_MAX_ROWS_DEFAULT = 20_000
_EXPECTED, _FOUND = "_lj_expected", "_lj_found"


@dataclass(frozen=True)
class AuditResult:
    slice: int | None  # None: every slice
    slices: int
    differences: int
    keys: list[tuple[Any, ...]]  # the first SHOWN of them, in key order
    scope: str = "every key"  # which keys it checked (`Slicing.text`)


def difference_error(spec: PipelineSpec, view: View, found: AuditResult, audit: str) -> AuditDifferenceError:
    """What `audit` (\"the audit of batch 7\", \"lakejoin audit --full\") found: output rows that
    are not what the inputs give, by key, and how to mend the view."""
    key = tuple(output_key(spec, view))
    shown = ", ".join(shown_value(key, k) for k in found.keys)
    more = f" and {found.differences - len(found.keys)} more" if found.differences > len(found.keys) else ""
    return AuditDifferenceError(
        f"{audit} checked {found.scope} and found {found.differences} key(s) whose output row is not what "
        f"the inputs give: {shown}{more}. Something wrote the output behind lakejoin's back, or a "
        "batch went wrong",
        where=f"view '{view.name}' output ({view.path})",
        fix=f"rebuild the rows: lakejoin run {spec.file} --view {view.name} --full-refresh (it "
        "rewrites only the rows that differ)",
    )


@dataclass(frozen=True)
class Slicing:
    """How a round cuts the keys into `slices` slices: by ranges of `column` between the
    ascending `cuts` (slice i: from cut i-1 up to, not with, cut i; the first slice also holds
    null; slices past the last cut are empty), or, with no cuts, by a hash of the key. One
    slice: none to cut by, every key."""

    slices: int
    column: str | None = None
    cuts: tuple[Any, ...] = ()

    @property
    def ranges(self) -> bool:
        return bool(self.cuts)

    def fingerprint(self) -> int:
        """How this round cuts the keys, as the batch log's integer `audit.cuts`
        (quality/audit_plan.EVERY_KEY: every key): slices of two rounds add up to every key
        only when their fingerprints match."""
        import hashlib

        if self.slices == 1:
            return EVERY_KEY
        text = repr((self.slices, self.column, self.cuts) if self.ranges else (self.slices, "xxhash64"))
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 2 or 1

    def text(self, slice_: int) -> str:
        """What the batch auditing `slice_` checked, for its note."""
        if self.slices == 1:
            return "every key (the round's first version is unknown or no longer readable)"
        if not self.ranges:
            return f"slice {slice_} of {self.slices} (by a hash of the key)"
        cut = [repr(c) if isinstance(c, str) else str(c) for c in self.cuts]
        if slice_ == 0:
            where = f"{self.column} below {cut[0]}, or null"
        elif slice_ > len(cut):
            where = f"no key: the output's files cut the keys into {len(cut) + 1} slices"
        else:
            where = f"{self.column} from {cut[slice_ - 1]}" + (
                f" to below {cut[slice_]}" if slice_ < len(cut) else ""
            )
        return f"slice {slice_} of {self.slices} ({where})"


def cuts(firsts: list[tuple[Any, int]], slices: int) -> tuple[Any, ...]:
    """`slices - 1` ascending cut values from the output's files, each file given as the least
    value of the key's first column in it and its row count: the least value of the file at
    each `slices`-th of the rows, files taken by their least value. A table laid out by key
    (delta/key_ranges.py) has disjoint files, so a slice reads about a `slices`-th of it. Any
    ascending values cut exactly, so a string minimum Delta truncated to a prefix is as good a
    cut. Fewer distinct cuts than half the slices (few files, or a key led by a column of few
    values) give none: the round hashes instead."""
    files = sorted((least, rows) for least, rows in firsts if least is not None and rows > 0)
    total = sum(rows for _, rows in files)
    if slices < 2 or not total:
        return ()
    chosen: list[Any] = []
    seen, i = 0, 0
    for n in range(1, slices):
        target = total * n / slices
        while i < len(files) - 1 and seen + files[i][1] <= target:
            seen += files[i][1]
            i += 1
        floor = chosen[-1] if chosen else files[0][0]  # a cut at the least key would empty slice 0
        if files[i][0] > floor:
            chosen.append(files[i][0])
    return tuple(chosen) if len(chosen) >= (slices - 1) // 2 else ()


def slicing(path: str, version: int | None, key: Key, slices: int) -> Slicing:
    """The round's cuts, from the output's file statistics at `version` (None, or a version
    delta-rs can no longer read: no slicing, so the batch checks every key)."""
    import pyarrow as pa
    from deltalake import DeltaTable

    column = key[0]
    if version is None:
        return Slicing(1)
    try:
        files = pa.table(DeltaTable(path, version=version).get_add_actions(flatten=True))
    except Exception as exc:  # noqa: BLE001 - e.g. its log was cleaned up: this batch checks every key
        _log.warning(
            "the audit checks every key of %s: its round's version %s is not readable: %s", path, version, exc
        )
        return Slicing(1)
    least = f"min.{column}"
    exact = (
        pa.types.is_integer,
        pa.types.is_string,
        pa.types.is_large_string,
        pa.types.is_string_view,
        pa.types.is_date,
    )
    if least not in files.column_names or not any(t(files[least].type) for t in exact):
        return Slicing(slices)
    firsts = list(zip(files[least].to_pylist(), files["num_records"].to_pylist(), strict=True))
    return Slicing(slices, column, cuts([(v, r or 0) for v, r in firsts], slices))


def in_slice(key: Key, slice_: int | None, slicing: Slicing) -> Column:
    from pyspark.sql import functions as F

    if slice_ is None or slicing.slices == 1:
        return F.lit(True)
    if not slicing.ranges:
        return F.pmod(F.xxhash64(*[F.col(c) for c in key]), F.lit(slicing.slices)) == F.lit(slice_)
    column, cut = F.col(slicing.column or key[0]), slicing.cuts
    if slice_ == 0:
        return (column < F.lit(cut[0])) | column.isNull()
    if slice_ > len(cut):  # the files cut the keys into fewer slices: this one is empty
        return F.lit(False)
    lo = column >= F.lit(cut[slice_ - 1])
    return lo & (column < F.lit(cut[slice_])) if slice_ < len(cut) else lo


def derived_rows(ctx: BatchContext, kind: ViewKindLogic, *, on_driver: int = 0) -> DataFrame:
    return derived(ctx, kind, on_driver=on_driver).rows


def audit(
    ctx: BatchContext, kind: ViewKindLogic, output_version: int, slice_: int | None, cut: Slicing
) -> AuditResult:
    """Compare the slice of the derived rows with the output at `output_version`, in one job."""
    from pyspark.sql import functions as F

    whole = _whole_on_driver(ctx, kind, output_version, whole_max_rows(ctx.spark), cut.slices)
    if whole is not None:
        return whole
    key = list(kind.output_key)
    chosen = in_slice(tuple(key), slice_, cut)
    scope = cut.text(slice_) if slice_ is not None else "every key"
    if cut.slices == 1:  # no round to cut by: every key
        slice_ = None
    output = ctx.spark.read.format("delta").option("versionAsOf", output_version).load(ctx.view.path)
    columns = output.columns

    def digest(rows: DataFrame, name: str) -> DataFrame:
        return rows.where(chosen).select(*key, F.xxhash64(*spark_columns(columns)).alias(name))

    expected = digest(derived_rows(ctx, kind).select(*spark_columns(columns)), _EXPECTED)
    found = digest(output, _FOUND)
    differ = expected.join(found, on=key, how="full_outer").where(~F.col(_EXPECTED).eqNullSafe(F.col(_FOUND)))
    row = differ.agg(
        F.count(F.lit(1)).alias("n"),
        F.slice(F.sort_array(F.collect_list(F.struct(*key))), 1, SHOWN).alias("keys"),
    ).first()
    assert row is not None, "an aggregate without grouping returns one row"
    keys = [tuple(k[c] for c in key) for k in row["keys"] or []]
    return AuditResult(slice_, cut.slices, int(row["n"]), keys, scope)


def whole_max_rows(spark: SparkSession) -> int:
    return int(spark.conf.get(WHOLE_MAX_ROWS, None) or WHOLE_MAX_ROWS_DEFAULT)


def _whole_on_driver(
    ctx: BatchContext, kind: ViewKindLogic, version: int, most: int, slices: int
) -> AuditResult | None:
    """Every key of a small output (at most `most` rows at `version`) against the kind's full
    recompute, compared on the driver; its small inputs are read there too, and enter the
    recompute as local relations. None: the output is not small (or not one delta-rs reads)."""
    found = lookups.whole_rows(ctx.view.path, version, most) if most > 0 else None
    if found is None:
        return None
    expected = derived_rows(ctx, kind, on_driver=most).select(*spark_columns(found.column_names)).toArrow()
    differ = differing_keys(expected, found, tuple(kind.output_key))
    scope = f"every key (a small output, {found.num_rows} rows, compared on the driver)"
    return AuditResult(None, slices, len(differ), differ[:SHOWN], scope)


def differing_keys(expected: pa.Table, found: pa.Table, key: Key) -> list[tuple[Any, ...]]:
    """The keys whose rows differ between `expected` and `found` (a key's rows as a multiset of
    values: a duplicate differs too), in key order, nulls first. `expected` is taken in `found`'s
    types where Arrow casts it (a timestamp's zone, a string's width)."""
    from collections import Counter

    try:
        expected = expected.select(found.column_names).cast(found.schema)
    except (ValueError, TypeError, NotImplementedError):  # pyarrow's errors derive from these
        expected = expected.select(found.column_names)
    rows: dict[tuple[Any, ...], list[Counter]] = {}
    for side, table in enumerate((expected, found)):
        for row in table.to_pylist():
            at = tuple(_comparable(row[c]) for c in key)
            value = tuple(_comparable(v) for v in row.values())
            rows.setdefault(at, [Counter(), Counter()])[side][value] += 1
    differ = [k for k, (want, have) in rows.items() if want != have]
    return sorted(differ, key=lambda k: tuple((v is not None, v) for v in k))


def _comparable(value: Any) -> Any:
    """A value as a hashable that is equal where the two sides hold the same value: lists and
    structs as tuples, NaN equal to itself, a zoned timestamp as UTC without its zone."""
    import datetime
    import math

    if isinstance(value, float) and math.isnan(value):
        return ("NaN",)
    if isinstance(value, list):
        return tuple(_comparable(v) for v in value)
    if isinstance(value, tuple):  # a map's entry
        return tuple(_comparable(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _comparable(v)) for k, v in value.items())
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.UTC).replace(tzinfo=None)
    return value


def audit_view(spark: SparkSession, spec: PipelineSpec, view: View) -> AuditResult | None:
    """`lakejoin audit --full`: every key of the view's output as it stands now against the
    inputs at the pins of its last committed batch (None: no batch has committed). An edit made
    after that batch is found at once, not only when its slice comes round."""
    from deltalake import DeltaTable

    found = last_batch(spark, spec, view)
    if found is None:
        return None
    ctx, kind = found
    return audit(ctx, kind, int(DeltaTable(view.path).version()), None, Slicing(view.audit.slices))


def last_batch(
    spark: SparkSession, spec: PipelineSpec, view: View
) -> tuple[BatchContext, ViewKindLogic] | None:
    """What an audit outside a batch derives from: the view's kind at the pins of its last
    committed batch (None: no batch has committed)."""
    last = BatchLog.of(spec).last_committed(view.name)
    if last is None:
        return None
    newest = output_batches(view.path, app_id(spec.name, view.name)).last_committed
    if newest is not None and newest > last.batch_id:
        raise BatchStateError(
            f"batch {newest} committed into the output of view '{view.name}' but the batch log "
            f"stops at batch {last.batch_id}, so the pins the output stands on are not known",
            where=f"batch log of pipeline '{spec.name}'",
            fix=f"let a run catch the log up first: lakejoin run {spec.file} --view {view.name}",
        )
    kind = view_logic(spec, view)
    why = stale_pins(spec, view, kind, last, output=False)
    if why:  # a recompute at the pins would read tables that are gone: no finding either way
        raise InputReplacedError(
            f"view '{view.name}' cannot be audited at batch {last.batch_id}'s pins: {'; '.join(why)}; "
            "a recompute at those pins would read what is there now, not what the batch read",
            where=f"{spec.file}:{view.line} (at 'views.{view.name}')" if view.line else f"view '{view.name}'",
            fix=f"let the view's next batch take the new table first (as its on_input_replaced says): "
            f"lakejoin run {spec.file} --view {view.name}, then audit",
        )
    pinned = dict(last.pinned_versions)
    plan = BatchPlan(view.name, last.batch_id, BatchMode.FULL_REFRESH, {}, pinned)
    ctx = BatchContext(
        spark, spec, view, plan, state_path(spec, view), input_columns(spec, view, kind, pinned)
    )
    return ctx, kind
