"""One Spark MERGE into a keyed table: delete the keys whose `KEEP` is false, update the rows
whose values differ, insert new ones if asked, and leave unchanged rows untouched (no spurious
change rows).

Every write path that takes Spark's MERGE (writers.py's batches the one-commit upsert does not
write, and state tables) runs this one; the driver's MERGE of a batch of few keys is
driver_merge.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lakejoin.delta.key_ranges import KeyRange
from lakejoin.delta.sql_text import spark_column, spark_quoted
from lakejoin.sink.merge_terms import KEEP, MergeCounts, any_of, same_key, values_differ

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# Whether Delta's MERGE materialises its source first ("auto": whenever the source's plan holds
# anything but Delta scans, as a local checkpoint does).
MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"

# At most this many keys (the default; a Spark conf may set it) a MERGE lists as literals in its
# condition: Delta then reads only the files that hold them. The literals are equalities joined
# by OR: Delta 4.4 skips files on those, not on an IN list.
ONE_MERGE_MAX_KEYS = "spark.lakejoin.write.oneMergeMaxKeys"
ONE_MERGE_DEFAULT = 100


def one_merge_max_keys(spark: SparkSession) -> int:
    """Up to how many keys a batch's MERGE lists in its condition (`ONE_MERGE_MAX_KEYS`)."""
    return int(spark.conf.get(ONE_MERGE_MAX_KEYS, None) or ONE_MERGE_DEFAULT)


def merge_on_spark(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    columns: Sequence[str],
    key: Sequence[str],
    *,
    bounds: KeyRange | None = None,
    listed: list[Any] | None = None,
) -> MergeCounts:
    """One MERGE. `bounds`, the source's key range, and `listed`, every value the source holds
    in the key's first column, let Delta skip the target's files that hold none of them."""
    from delta.tables import DeltaTable

    values = [c for c in columns if c not in key]
    changed = values_differ("t", "s", values)
    on = same_key("t", "s", key)
    if bounds is not None:
        on = bounds.covers(lambda c: spark_column(c, "t")) & on
    if listed:
        on = any_of(spark_column(key[0], "t"), listed) & on
    keep = spark_column(KEEP, "s")
    updated: dict[str, str | Column] = {spark_quoted(c): spark_column(c, "s") for c in values}
    inserted: dict[str, str | Column] = {spark_quoted(c): spark_column(c, "s") for c in columns}
    merge = (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), on)
        .whenMatchedDelete(condition=~keep)
        .whenMatchedUpdate(condition=keep & changed, set=updated)
        .whenNotMatchedInsert(condition=keep, values=inserted)
    )
    # Every source lakejoin merges is a local checkpoint, or a join of checkpoints and pinned
    # snapshots: deterministic and materialised already. Delta's "auto" would materialise it a
    # second time (2 Spark jobs per MERGE) because a checkpoint is not a Delta scan.
    previous = spark.conf.get(MATERIALIZE_SOURCE, None)
    spark.conf.set(MATERIALIZE_SOURCE, "none")
    try:
        result = merge.execute()
    finally:
        if previous is None:
            spark.conf.unset(MATERIALIZE_SOURCE)
        else:
            spark.conf.set(MATERIALIZE_SOURCE, previous)
    rows = result.collect() if result is not None else []
    if not rows:
        return MergeCounts(applied=False)
    row = rows[0].asDict()
    return MergeCounts(
        inserted=int(row.get("num_inserted_rows", 0)),
        updated=int(row.get("num_updated_rows", 0)),
        deleted=int(row.get("num_deleted_rows", 0)),
    )
