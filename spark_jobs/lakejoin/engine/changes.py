"""Step 2 of a batch: each change source's Change Data Feed over (start, pinned], collapsed to
the net change per key. A null key fails inside the same Spark job that materialises the
changes (an observation counts null keys), not in a scan of its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lakejoin.delta.change_feed import (
    net_changes,
    no_changes,
    read_change_feed,
    translate_read_error,
)
from lakejoin.delta.key_ranges import KeyRange, NullKeyFoundError, materialised
from lakejoin.delta.sources import snapshot
from lakejoin.engine.repair import repair_changes
from lakejoin.errors import NullKeyError
from lakejoin.spec.model import Key, Source, shown

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from lakejoin.engine.plan import BatchPlan


def source_changes(
    spark: SparkSession,
    source: Source,
    plan: BatchPlan,
    *,
    where: str,
    also: Sequence[Column] = (),
    seen: dict[str, Any] | None = None,
) -> tuple[DataFrame, int, KeyRange]:
    """The net change of every key of `source` in the plan's range, materialised once, how
    many keys changed and their range (both taken in the same job: a state write of these keys
    reads only their range). `also`: more aggregates of the changes that job computes, into
    `seen` (join health's, engine/health.change_counts)."""
    first = plan.start_versions.get(source.name, -1) + 1
    last = plan.pinned_versions[source.name]
    if first > last:
        return no_changes(snapshot(spark, source.path, last)), 0, KeyRange(source.key)
    try:
        if plan.repair_ends:
            rows = repair_changes(spark, source, first, plan.repair_ends[source.name], last)
        else:
            rows = net_changes(read_change_feed(spark, source.path, first, last), source.key)
        return materialised(rows, source.key, refuse_null_keys=True, also=also, seen=seen)
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


def _each(key: Key) -> str:
    return f"a '{key[0]}'" if len(key) == 1 else "a value in each of " + ", ".join(f"'{c}'" for c in key)
