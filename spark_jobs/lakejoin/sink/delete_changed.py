"""A batch's output write when its keys are too many for one MERGE and the output too large for
the driver's: delete the keys whose row changed or went, then append their new rows.

Delta's MERGE of thousands of random keys touches every file of the output, and with deletion
vectors it reads each touched file to find the matching rows, then again to write the updated
ones (and without a broadcast, shuffles them). Here the driver reads the keys' old rows with
delta-rs (lookups.py) and compares them with the new ones; Spark's DELETE then marks only the
keys whose row changed or went (deletion vectors: it reads the key column of the files that
may hold them, and the deleted rows' values for the change feed), and an append writes the
changed and new rows. A row whose values did not change is not touched: no change rows for it.
At 15 M rows and 15,088 changed keys: 8.5-8.9 s against the split MERGE's 14.7-21.4 s, with
the same rows (bench/write_paths.py, docs/bench/write-paths.jsonl).

An update reaches the change feed as a delete in the first commit and an insert in the batch
commit. lakejoin's own readers net each key's changes over a range that ends at a batch commit
(delta/change_feed.net_changes), so a downstream view sees an update; a reader that takes the table
between the two commits (for a second or two) does not see the keys being rewritten.

It applies to an output (a batch commit carries the write) with a one-column key of an integer,
string or date type, a batch of at most `lookups.max_keys` keys, and a table delta-rs reads as
Spark does. `spark.lakejoin.write.deleteChanged=false` turns it off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lakejoin.delta import lookups
from lakejoin.delta.markers import OutputCommit, failpoint, find_commit, stamped
from lakejoin.errors import ConcurrentBatchError
from lakejoin.sink.merge_terms import KEEP, MergeCounts, values_differ

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ENABLED = "spark.lakejoin.write.deleteChanged"
OLD, DROP, ADD = "_lj_old", "_lj_drop", "_lj_add"


def applies(spark: SparkSession, path: str, source: DataFrame, key: Sequence[str], keys: int) -> bool:
    """Whether this write suits a batch of `keys` keys of `source` into the table at `path`."""
    from deltalake import DeltaTable
    from pyspark.sql.types import DateType, IntegralType, StringType

    if (spark.conf.get(ENABLED, None) or "true").lower() == "false":
        return False
    if len(key) != 1 or not 0 < keys <= lookups.max_keys(spark):
        return False
    if not isinstance(source.schema[key[0]].dataType, (IntegralType, StringType, DateType)):
        return False
    return lookups.readable(DeltaTable(path))


def write(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    values: list[Any],
    columns: Sequence[str],
    key: str,
    commit: OutputCommit,
) -> MergeCounts | None:
    """Make the output's rows under `values` (every key of `source`, one row each, with its
    `KEEP` flag) what `source` says, in at most two commits: the DELETE stamped `commit.pre`
    when an append follows, the last one stamped `commit.final`. None when the keys' old rows
    cannot be read on the driver (the caller takes another write). The counts come from the
    comparison, in the job that materialises it; `version` is left to the caller."""
    from deltalake import DeltaTable
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    if not lookups.literal_keys(values):
        return None
    old_rows = lookups.read_keys(path, int(DeltaTable(path).version()), key, values, columns)
    if old_rows is None:
        return None
    old = lookups.as_spark(spark, old_rows, source.select(*columns).schema).withColumn(OLD, F.lit(True))
    held, keep = F.col(f"o.{OLD}").isNotNull(), F.col(f"n.{KEEP}")
    differs = values_differ("n", "o", [c for c in columns if c != key])
    compared = (
        source.alias("n")
        .join(F.broadcast(old).alias("o"), F.col(f"n.`{key}`") == F.col(f"o.`{key}`"), how="left")
        .select(
            *[F.col(f"n.`{c}`").alias(c) for c in columns],
            (held & (~keep | differs)).alias(DROP),
            (keep & (~held | differs)).alias(ADD),
            (keep & ~held).alias("_lj_new"),
            (keep & held & differs).alias("_lj_changed"),
            (~keep & held).alias("_lj_gone"),
        )
    )
    observed = Observation()
    compared = compared.observe(
        observed,
        *[F.sum(F.col(f"_lj_{c}").cast("long")).alias(c) for c in ("new", "changed", "gone")],
        F.sum(F.col(ADD).cast("long")).alias("appended"),
    ).localCheckpoint()
    counts = observed.get
    appended = int(counts["appended"] or 0)
    dropped = sorted(row[0] for row in compared.where(F.col(DROP)).select(key).collect())
    if dropped:
        marker = commit.pre if appended else commit.final
        with stamped(spark, commit.app, marker):
            _delete(spark, path, key, dropped)
        if marker is commit.pre and not commit.finishing and not _landed(path, commit):
            raise ConcurrentBatchError(
                f"another run is writing batch {marker.batch_id} of this view; this run stopped "
                "before its output commit",
                where=f"output {path}",
                fix="nothing to do: that run commits the batch once; run again for newer changes",
            )
        if appended:
            failpoint("between_output_commits")
    if appended or not dropped:
        with stamped(spark, commit.app, commit.final):
            compared.where(F.col(ADD)).select(*columns).write.format("delta").mode("append").save(path)
    new, changed, gone = (int(counts[c] or 0) for c in ("new", "changed", "gone"))
    return MergeCounts(inserted=new, updated=changed, deleted=gone)


def _delete(spark: SparkSession, path: str, key: str, dropped: list[Any]) -> None:
    """Spark's DELETE of the rows whose key is one of `dropped` (sorted): the range lets Delta
    skip the files whose statistics exclude every key, the list picks the rows."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    column = F.col(f"`{key}`")
    DeltaTable.forPath(spark, path).delete(column.between(dropped[0], dropped[-1]) & column.isin(dropped))


def _landed(path: str, commit: OutputCommit) -> bool:
    """Whether this run's first commit is in the output (Delta skips a write whose txn version
    another run's commit already holds)."""
    return find_commit(path, lambda m: m.run == commit.pre.run and m.part == commit.pre.part) is not None
