"""The keyed tables lakejoin MERGEs into (a view's output, a state table): how one is created,
and whether an output's columns still match the ones its batches compute.

Apart from the writes (writers.py and the modules it calls) because every writer of a keyed
table needs the same table settings (CDF, deletion vectors, nullable columns), and the schema
check runs before any write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakejoin.errors import SourceError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType, StructType

# Delta's own default for new tables; when a session sets it, lakejoin follows it.
DV_DEFAULT = "spark.databricks.delta.properties.defaults.enableDeletionVectors"


def nullable(kind: DataType) -> Any:
    """`kind` with every field, element and value nullable, at every depth."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    if isinstance(kind, StructType):
        return StructType([StructField(f.name, nullable(f.dataType), True, f.metadata) for f in kind.fields])
    if isinstance(kind, ArrayType):
        return ArrayType(nullable(kind.elementType), True)
    if isinstance(kind, MapType):
        return MapType(nullable(kind.keyType), nullable(kind.valueType), True)
    return kind


def ensure_keyed_table(spark: SparkSession, path: str, schema: StructType) -> None:
    """Create a table lakejoin MERGEs into (an output or a state table) if it does not exist:
    CDF on, deletion vectors on unless the session's Delta default for new tables
    (`DV_DEFAULT`) turns them off.

    Not clustered: lakejoin lays its tables out by key itself (key_ranges), and delta-rs, which
    writes a batch of few keys (driver_merge.py), does not write clustered tables. A table a
    person clusters (ALTER TABLE ... CLUSTER BY) keeps working; its batches take Spark's MERGE.

    A batch's changed keys fall on random rows of every file. Without deletion vectors each
    MERGE rewrites every file it touches, which is the whole table; with them it writes the
    changed rows and marks the old ones (at 15 M rows and 1 % changed, 0 rows copied instead of
    14.9 M, and 23 s instead of 35 s: docs/bench/analysis.md).
    """
    from delta.tables import DeltaTable

    if _exists(path):  # the usual case: decided from the log, without a Spark call
        return
    # Every column nullable in the table, nested ones too (whatever the rows that typed it say):
    # delta-rs 1.6's MERGE, which writes a batch of few keys, fails its NOT NULL check on the
    # rows it deletes.
    schema = nullable(schema)
    deletion_vectors = spark.conf.get(DV_DEFAULT, None) or "true"
    (
        DeltaTable.createIfNotExists(spark)
        .location(path)
        .addColumns(schema)
        .property("delta.enableChangeDataFeed", "true")
        .property("delta.enableDeletionVectors", deletion_vectors)
        .execute()
    )


def ensure_output(spark: SparkSession, path: str, schema: StructType) -> None:
    """Create the output table (see `ensure_keyed_table`) if it does not exist yet."""
    ensure_keyed_table(spark, path, schema)


def schema_drift(spark: SparkSession, path: str, schema: StructType) -> str | None:
    """How the output's columns differ from the ones a batch computes (None: they match)."""
    current = _schema(path)
    wanted = [(f.name, f.dataType.simpleString()) for f in schema.fields]
    have = [(f.name, f.dataType.simpleString()) for f in current.fields]
    if wanted == have:
        return None
    return f"the output has columns {have}, its inputs now give {wanted}"


def _exists(path: str) -> bool:
    from deltalake import DeltaTable

    return bool(DeltaTable.is_deltatable(path))


def _schema(path: str) -> StructType:
    """The table's columns, from its Delta log (delta-rs): no Spark snapshot to load."""
    import json

    from deltalake import DeltaTable
    from pyspark.sql.types import StructType

    return StructType.fromJson(json.loads(DeltaTable(path).schema().to_json()))


def drift_error(drift: str, *, where: str) -> SourceError:
    return SourceError(
        f"the view's columns changed: {drift}",
        where=where,
        fix="run the view with --full-refresh: it rewrites the output with the new columns",
    )
