"""Writing a view's output: a MERGE that inserts new rows, updates changed ones, deletes gone
ones, and leaves rows whose content did not change untouched (no spurious change rows)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakejoin.errors import SourceError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

PRESENT = "_lj_present"


@dataclass(frozen=True)
class MergeCounts:
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    applied: bool = True


def ensure_output(spark: SparkSession, path: str, schema: StructType, key: Sequence[str]) -> None:
    """Create the output table (CDF on, clustered by its key) if it does not exist yet."""
    from delta.tables import DeltaTable

    (
        DeltaTable.createIfNotExists(spark)
        .location(path)
        .addColumns(schema)
        .property("delta.enableChangeDataFeed", "true")
        .clusterBy(*key)
        .execute()
    )


def schema_drift(spark: SparkSession, path: str, schema: StructType) -> str | None:
    """How the output's columns differ from the ones a batch computes (None: they match)."""
    current = spark.read.format("delta").load(path).schema
    wanted = [(f.name, f.dataType.simpleString()) for f in schema.fields]
    have = [(f.name, f.dataType.simpleString()) for f in current.fields]
    if wanted == have:
        return None
    return f"the output has columns {have}, its inputs now give {wanted}"


def drift_error(drift: str, *, where: str) -> SourceError:
    return SourceError(
        f"the view's columns changed: {drift}",
        where=where,
        fix="run the view with --full-refresh: it rewrites the output with the new columns",
    )


def replace_output(path: str, recomputed: DataFrame) -> MergeCounts:
    """Rewrite the whole output with a new schema (the declared policy for a schema change
    under a full refresh: downstream readers see every row deleted and inserted once)."""
    (recomputed.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path))
    return MergeCounts(inserted=recomputed.count())


def merge_affected(
    spark: SparkSession, path: str, recomputed: DataFrame, affected: DataFrame, key: Sequence[str]
) -> MergeCounts:
    """MERGE the recomputed rows of the affected keys; affected keys with no row are deleted."""
    from pyspark.sql import functions as F

    source = affected.select(*key).join(recomputed.withColumn(PRESENT, F.lit(True)), on=list(key), how="left")
    present = F.col(f"s.{PRESENT}").isNotNull()
    return _merge(spark, path, source, recomputed.columns, key, deleted=~present, insert=present)


def merge_full(spark: SparkSession, path: str, recomputed: DataFrame, key: Sequence[str]) -> MergeCounts:
    """MERGE a full recompute: rows missing from it are deleted, unchanged rows are skipped."""
    from pyspark.sql import functions as F

    return _merge(
        spark,
        path,
        recomputed,
        recomputed.columns,
        key,
        deleted=None,
        insert=F.lit(True),
        delete_unmatched=True,
    )


def _merge(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    columns: list[str],
    key: Sequence[str],
    *,
    deleted,  # noqa: ANN001 - Column | None
    insert,  # noqa: ANN001 - Column
    delete_unmatched: bool = False,
) -> MergeCounts:
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    values = [c for c in columns if c not in key]
    changed = F.lit(False)
    for column in values:
        changed = changed | ~F.col(f"t.`{column}`").eqNullSafe(F.col(f"s.`{column}`"))
    on = F.lit(True)
    for column in key:
        on = on & (F.col(f"t.`{column}`") == F.col(f"s.`{column}`"))
    merge = DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), on)
    if deleted is not None:
        merge = merge.whenMatchedDelete(condition=deleted)
        changed = ~deleted & changed
    merge = merge.whenMatchedUpdate(
        condition=changed, set={f"`{c}`": F.col(f"s.`{c}`") for c in values}
    ).whenNotMatchedInsert(condition=insert, values={f"`{c}`": F.col(f"s.`{c}`") for c in columns})
    if delete_unmatched:
        merge = merge.whenNotMatchedBySourceDelete()
    result = merge.execute()
    rows = result.collect() if result is not None else []
    if not rows:
        return MergeCounts(applied=False)
    row = rows[0].asDict()
    return MergeCounts(
        inserted=int(row.get("num_inserted_rows", 0)),
        updated=int(row.get("num_updated_rows", 0)),
        deleted=int(row.get("num_deleted_rows", 0)),
    )
