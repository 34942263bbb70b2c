"""Step 2 of a batch: each change source's Change Data Feed over (start, pinned], collapsed to
the net change per key. A null key fails inside the same Spark job that materialises the
changes (an observation counts null keys), not in a scan of its own.

A range whose commits' metrics count few change rows (the plan counts them from the log,
`BatchPlan.change_rows`) is read on the driver with delta-rs, once a run for all the views that
read it, and enters Spark as a local relation: the net change is the same Spark rule over it,
without a file scan (delta/change_feed.read_on_driver). Other ranges are read by Spark."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakejoin.delta.change_feed import (
    DRIVER_ROWS as DRIVER_ROWS_SETTING,
)
from lakejoin.delta.change_feed import (
    driver_rows,
    net_changes,
    net_frame,
    net_rows,
    no_changes,
    read_change_feed,
    read_on_driver,
    translate_read_error,
)
from lakejoin.delta.key_ranges import KeyRange, NullKeyFoundError, materialised
from lakejoin.delta.key_ranges import enabled as key_ranges_enabled
from lakejoin.delta.sources import snapshot
from lakejoin.engine.repair import repair_changes
from lakejoin.errors import NullKeyError
from lakejoin.spec.model import Key, Source, shown

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from lakejoin.delta.plans import BatchPlan
    from lakejoin.engine.health import ChangeCounts

DRIVER, SPARK = "driver", "spark"  # who read a source's change range


@dataclass(frozen=True)
class SourceChanges:
    """A source's net changes in the batch, materialised: the rows, how many keys changed, their
    range, who read the range (`DRIVER`, `SPARK`; "" when there was none to read) and why, and
    the changed keys when they are on the driver already (a range read there: None otherwise)."""

    rows: DataFrame
    count: int
    bounds: KeyRange
    read_by: str = ""
    why: str = ""
    keys: list[tuple[Any, ...]] | None = None


def source_changes(
    spark: SparkSession,
    source: Source,
    plan: BatchPlan,
    *,
    where: str,
    pinned: Callable[[Source], DataFrame],
    also: ChangeCounts | None = None,
    seen: dict[str, Any] | None = None,
) -> SourceChanges:
    """The net change of every key of `source` in the plan's range, materialised once, how
    many keys changed and their range (both taken in the same job: a state write of these keys
    reads only their range). `pinned`: the source's snapshot at the pin (its schema types a
    range read on the driver). `also`: join health's counts of the changes, which that job
    computes too, into `seen` (engine/health.change_counts).

    A range read on the driver is netted there (`change_feed.net_rows`), counted there, and
    enters Spark as a local relation: no Spark job."""
    first = plan.start_versions.get(source.name, -1) + 1
    last = plan.pinned_versions[source.name]
    if first > last:
        return SourceChanges(no_changes(snapshot(spark, source.path, last)), 0, KeyRange(source.key))
    try:
        if plan.repair_ends:
            rows = repair_changes(spark, source, first, plan.repair_ends[source.name], last)
            read_by, why = SPARK, "a repair"
        else:
            local, why = _driver_feed(spark, source, plan, first, last)
            if local is not None:
                return _netted_on_driver(spark, source, local, pinned(source).schema, why, also, seen)
            rows, read_by = net_changes(read_change_feed(spark, source.path, first, last), source.key), SPARK
        aggregates = also.columns() if also else ()
        done, count, bounds = materialised(
            rows, source.key, refuse_null_keys=True, also=aggregates, seen=seen
        )
        return SourceChanges(done, count, bounds, read_by, why)
    except NullKeyFoundError:
        whose = (
            f"whose key '{source.key[0]}' is null"
            if len(source.key) == 1
            else f"whose key {shown(source.key)} has a null in one of its columns"
        )
        raise NullKeyError(
            f"changes between versions {first} and {last} hold a row {whose}",
            where=where,
            fix=f"give every row {_each(source.key)} in the source, or filter null keys out upstream",
        ) from None
    except Exception as exc:  # Delta raises JVM errors; keep only the ones we can explain
        raise translate_read_error(exc, role=where, path=source.path, first=first, last=last) from exc


def _driver_feed(
    spark: SparkSession, source: Source, plan: BatchPlan, first: int, last: int
) -> tuple[pa.Table | None, str]:
    """The range's change feed read on the driver when the plan counted few change rows in it
    and delta-rs reads it as Spark would (None: Spark reads it), and why."""
    logged = plan.change_rows.get(source.name)
    most = driver_rows(spark)
    if most <= 0:
        return None, f"reads on the driver are off ({DRIVER_ROWS_SETTING} = 0)"
    if logged is None:
        return None, "its commits' metrics do not count its change rows"
    if logged > most:
        return None, f"{logged} change rows by its commits' metrics, above {most}"
    identity = plan.identities.get(source.name)
    local = read_on_driver(source.path, first, last, identity.as_json() if identity is not None else ())
    if local is None:
        return (
            None,
            "delta-rs does not read it as Spark would (a reader feature, column mapping, or a schema change)",
        )
    return local, f"{logged} change rows by its commits' metrics"


def _netted_on_driver(
    spark: SparkSession,
    source: Source,
    feed: pa.Table,
    schema: StructType,
    why: str,
    also: ChangeCounts | None,
    seen: dict[str, Any] | None,
) -> SourceChanges:
    """`materialised`'s figures of a net change found on the driver, counted there."""
    key = tuple(source.key)
    net = net_rows(feed, key)
    keys = [tuple(row[c] for c in key) for row in net]
    nulls = sum(1 for k in keys if any(v is None for v in k))
    if nulls:
        raise NullKeyFoundError(nulls)
    frame = net_frame(spark, net, schema)
    if also and seen is not None:
        seen.update(also.of_rows(net))
    bounds = KeyRange(key)
    if keys and key_ranges_enabled(spark):
        ends = {}
        for i in range(len(key)):
            ends[f"_lj_lo{i}"], ends[f"_lj_hi{i}"] = min(k[i] for k in keys), max(k[i] for k in keys)
        bounds = KeyRange.from_row(frame, key, ends)
    return SourceChanges(frame, len(net), bounds, DRIVER, why, keys)


def _each(key: Key) -> str:
    return f"a '{key[0]}'" if len(key) == 1 else "a value in each of " + ", ".join(f"'{c}'" for c in key)
