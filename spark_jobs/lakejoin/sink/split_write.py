"""The split write of a batch's output: a MERGE of the keys the output already holds, without
inserts, then an append of the new rows, the last of the two commits the batch commit.

Delta's MERGE turns into an outer join, which shuffles every file a key touches, as soon as it
also inserts; this path is for batches of too many keys for one MERGE with literal keys, and
too few for a shuffle of the whole table to be the cheaper join (write_path.choose_write chooses).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lakejoin.delta.key_ranges import KeyRange
from lakejoin.delta.markers import OutputCommit, failpoint, stamped
from lakejoin.errors import ConcurrentBatchError
from lakejoin.sink.merge_terms import HELD, KEEP, MergeCounts
from lakejoin.sink.output_counts import final_counts
from lakejoin.sink.spark_merge import merge_on_spark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def merge_then_append(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    columns: Sequence[str],
    key: Sequence[str],
    bounds: KeyRange,
    commit: OutputCommit,
    probe: DataFrame | None = None,
) -> MergeCounts:
    """Delta's MERGE joins the source with every file a key touches; once it also inserts, that
    join is an outer join, which shuffles those files whole (with random keys, the whole
    table). So the keys the table already holds are updated and deleted by a MERGE without
    inserts, whose join broadcasts the small source, and the new keys are appended: at 15 M
    rows and 1 % changed 22 s instead of 52 s (docs/bench/analysis.md). The last of the two
    commits is the batch commit, and a batch with nothing to change still makes one (an empty
    append), so that its pins are recorded. An output's write alone takes this path: a state
    table is written by one MERGE (`choice.merge_by_key`)."""
    from pyspark.sql import functions as F

    flagged, held, inserted = _held_by_table(spark, path, source, list(key), bounds, probe)
    has_existing = held > 0
    new_rows = flagged.where(F.col(KEEP) & ~F.col(HELD)).select(*columns)
    present = flagged.where(F.col(HELD)).drop(HELD)
    merged = F.broadcast(present) if has_existing else None
    return _stamped_write(spark, path, merged, new_rows, columns, key, bounds, commit, inserted)


def _held_by_table(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    keys: list[str],
    bounds: KeyRange,
    probe: DataFrame | None = None,
) -> tuple[DataFrame, int, int]:
    """`source` with a `HELD` column (the table holds the row's key), materialised once, and
    how many source rows the table holds and how many are new rows to append, counted in that
    same job. The table is read by key column alone, within the source's key range, and
    probed with `probe` (materialised keys of `source`) when given."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    table_keys = spark.read.format("delta").load(path).where(bounds.covers(F.col(keys[0]))).select(*keys)
    held_keys = (
        table_keys.join(
            F.broadcast((source if probe is None else probe).select(*keys)), on=keys, how="left_semi"
        )
        .dropDuplicates(keys)
        .withColumn(HELD, F.lit(True))
    )
    flagged = source.join(F.broadcast(held_keys), on=keys, how="left").withColumn(
        HELD, F.coalesce(F.col(HELD), F.lit(False))
    )
    observed = Observation()
    done = flagged.observe(
        observed,
        F.sum(F.col(HELD).cast("long")).alias("held"),
        F.sum((F.col(KEEP) & ~F.col(HELD)).cast("long")).alias("new"),
    ).localCheckpoint()
    row = observed.get
    return done, int(row["held"] or 0), int(row["new"] or 0)


def _stamped_write(
    spark: SparkSession,
    path: str,
    present: DataFrame | None,
    new_rows: DataFrame,
    columns: Sequence[str],
    key: Sequence[str],
    bounds: KeyRange,
    commit: OutputCommit,
    inserted: int,
) -> MergeCounts:
    """The output write of a batch: the MERGE of the keys the output holds (`present`, None when
    it holds none) and the append of new rows, the last of them stamped as the batch commit."""
    counts = MergeCounts()
    if present is not None:
        marker = commit.pre if inserted else commit.final
        with stamped(spark, commit.app, marker):
            counts = merge_on_spark(spark, path, present, columns, key, inserts=False, bounds=bounds)
        if marker is commit.pre and not counts.applied and not commit.finishing:
            raise ConcurrentBatchError(
                f"another run is writing batch {marker.batch_id} of this view; this run stopped "
                "before its output commit",
                where=f"output {path}",
                fix="nothing to do: that run commits the batch once; run again for newer changes",
            )
        if inserted:
            failpoint("between_output_commits")
    if inserted or present is None:
        with stamped(spark, commit.app, commit.final):
            new_rows.write.format("delta").mode("append").save(path)
    return final_counts(path, commit, counts)
