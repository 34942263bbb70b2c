"""How fast can a keyed Delta table take a small batch of changes on random keys? The output
write on its own, outside lakejoin: one wide table, one change batch, several ways to apply it.

    python -m bench.write_paths --rows 15000000 --rate 0.001      # -> docs/bench/write-paths.jsonl

Every way starts from the same table version (RESTORE between them) and must leave the same
rows: the script checks that by count and hash and exits 1 when one does not.

- `merge`: Delta's public MERGE as lakejoin runs it (sink/choice.merge_by_key), its write of a
  batch the upsert declines: update a row only when a value differs, delete, insert;
- `driver`: one delta-rs MERGE from the driver, lakejoin's write of a batch of few keys
  (driver_merge.py), forced at any size;
- `delete_append`: MERGE that deletes every batch key the table holds, then append every
  surviving row: no value is compared, so an unchanged row is rewritten (a spurious change);
- `upsert`: lakejoin's write of many keys into a large output (key_upsert.py), one commit whose
  only read of the table is the key column; its change rows (which lakejoin derives from the
  inputs) are made from the table before the clock starts;
- each with the table's Change Data Feed on and off: the feed makes Delta write the preimage of
  every updated or deleted row, so it must read their whole rows.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

KEY = "id"


def base_rows(spark: SparkSession, rows: int, seed: int) -> DataFrame:
    from pyspark.sql import functions as F

    return spark.range(rows).select(
        F.col("id").alias(KEY),
        (F.rand(seed) * 1_500_000).cast("long").alias("customer_id"),
        (F.rand(seed + 1) * 1000).alias("amount"),
        (F.rand(seed + 2) * 10).cast("int").alias("status"),
        F.expr("date_add(date'2020-01-01', cast(id % 2000 as int))").alias("ordered_on"),
        F.sha2(F.col("id").cast("string"), 256).substr(1, 60).alias("note"),
        F.concat(F.lit("customer-"), (F.rand(seed + 3) * 1e6).cast("long")).alias("name"),
    )


def change_batch(spark: SparkSession, rows: int, rate: float, seed: int) -> DataFrame:
    """70 % updates (half of them leave the row as it was), 10 % deletes, 20 % inserts; the
    column `_lj_keep` is false for a delete, as in lakejoin's sink."""
    from pyspark.sql import functions as F

    from lakejoin.sink.choice import KEEP

    n = max(10, int(rows * rate))
    picked = (
        base_rows(spark, rows, seed)
        .where(F.rand(seed + 9) < (0.8 * n) / rows)
        .withColumn("_r", F.rand(seed + 10))
    )
    updates = picked.where("_r < 0.875").withColumn(
        "amount", F.when(F.col("_r") < 0.4375, F.col("amount") + 1).otherwise(F.col("amount"))
    )
    deletes = picked.where("_r >= 0.875")
    inserts = base_rows(spark, int(0.2 * n), seed + 20).withColumn(KEY, F.col(KEY) + rows)
    return (
        updates.drop("_r")
        .withColumn(KEEP, F.lit(True))
        .unionByName(deletes.drop("_r").withColumn(KEEP, F.lit(False)))
        .unionByName(inserts.withColumn(KEEP, F.lit(True)))
    )


def merge(spark: SparkSession, path: str, batch: DataFrame, columns: list[str]) -> None:
    from lakejoin.sink.choice import driver_merge, merge_by_key
    from lakejoin.sink.spark_merge import ONE_MERGE_MAX_KEYS

    spark.conf.set(ONE_MERGE_MAX_KEYS, "0")  # Spark's one MERGE, whatever the batch's size
    spark.conf.set(driver_merge.MAX_KEYS, "0")
    merge_by_key(spark, path, batch, [KEY], columns, full=False)


def driver(spark: SparkSession, path: str, batch: DataFrame, columns: list[str]) -> None:
    """One delta-rs MERGE from the driver (lakejoin's write of a batch of few keys), at any size."""
    from lakejoin.sink.choice import driver_merge, merge_by_key
    from lakejoin.sink.spark_merge import ONE_MERGE_MAX_KEYS

    spark.conf.set(ONE_MERGE_MAX_KEYS, str(10**9))
    spark.conf.set(driver_merge.MAX_KEYS, str(10**9))
    spark.conf.set(driver_merge.MAX_ROWS, str(10**12))
    merge_by_key(spark, path, batch, [KEY], columns, full=False)


def delete_append(spark: SparkSession, path: str, batch: DataFrame, columns: list[str]) -> None:
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from lakejoin.sink.choice import KEEP

    keys = batch.select(KEY)
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(F.broadcast(keys).alias("s"), f"t.{KEY} = s.{KEY}")
        .whenMatchedDelete()
        .execute()
    )
    batch.where(F.col(KEEP)).select(*columns).write.format("delta").mode("append").save(path)


def upsert_changes(spark: SparkSession, path: str, batch: DataFrame, columns: list[str]) -> DataFrame:
    """The batch as change rows against the table's rows of its keys (lakejoin derives those
    old rows from its inputs; here they are read, before the clock starts)."""
    from pyspark.sql import functions as F

    from lakejoin.sink.choice import KEEP, change_rows

    old = spark.read.format("delta").load(path).join(F.broadcast(batch.select(KEY)), on=KEY, how="left_semi")
    return change_rows(
        batch.where(F.col(KEEP)).select(*columns), old.select(*columns), [KEY]
    ).localCheckpoint()


def upsert(spark: SparkSession, path: str, changes: DataFrame, columns: list[str]) -> None:
    """lakejoin's one-commit upsert (key_upsert.py) of change rows made beforehand."""
    from lakejoin.sink import key_upsert

    assert key_upsert.upsert(spark, path, changes, [KEY], columns, None) is not None


WAYS = {"merge": merge, "driver": driver, "delete_append": delete_append, "upsert": upsert}


def main(argv: list[str] | None = None) -> int:
    from delta.tables import DeltaTable

    from bench.measure import fingerprint
    from lakejoin.delta.markers import operation_metrics
    from lakejoin.delta.session import spark_session
    from lakejoin.delta.sources import latest_version
    from lakejoin.sink.keyed_tables import nullable

    parser = argparse.ArgumentParser(prog="python -m bench.write_paths", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=15_000_000)
    parser.add_argument("--rate", type=float, default=0.001)
    parser.add_argument("--work", default="build/bench-write-paths")
    parser.add_argument("--out", default="docs/bench/write-paths.jsonl")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeat", type=int, default=2, help="runs of each way; the fastest counts")
    parser.add_argument("--ways", default=",".join(WAYS), help="comma-separated")
    parser.add_argument("--feeds", default="true,false", help="Change Data Feed on, off, or both")
    args = parser.parse_args(argv)

    spark = spark_session(app_name="lakejoin-write-paths", extra={"spark.driver.memory": "10g"})
    work = Path(args.work).resolve()
    batch = change_batch(spark, args.rows, args.rate, args.seed).localCheckpoint()
    changes = batch.count()
    columns = [c for c in batch.columns if not c.startswith("_lj_")]
    results: list[dict[str, Any]] = []
    expected = None
    for feed in [f == "true" for f in args.feeds.split(",")]:
        path = str(work / f"table_cdf_{str(feed).lower()}")
        if not DeltaTable.isDeltaTable(spark, path):
            rows = base_rows(spark, args.rows, args.seed)
            # Version 0 holds the table's properties, version 1 its rows: every way restores 1.
            (
                DeltaTable.create(spark)
                .location(path)
                .addColumns(nullable(rows.schema))  # as lakejoin creates its tables
                .property("delta.enableChangeDataFeed", str(feed).lower())
                .property("delta.enableDeletionVectors", "true")
                .execute()
            )
            rows.repartition(16).write.format("delta").mode("append").save(path)
        for name in args.ways.split(","):
            if name == "upsert" and not feed:
                continue  # the upsert writes tables whose change feed is on (key_upsert_rules.py)
            way = WAYS[name]
            seconds = float("inf")
            for _ in range(args.repeat):  # the first run also pays the JVM's warm-up
                spark.sql(f"RESTORE TABLE delta.`{path}` TO VERSION AS OF 1")
                before = latest_version(spark, path, role="write_paths table")
                given = upsert_changes(spark, path, batch, columns) if name == "upsert" else batch
                started = time.perf_counter()
                way(spark, path, given, columns)
                seconds = min(seconds, time.perf_counter() - started)
            history = DeltaTable.forPath(spark, path).history().where(f"version > {before}").collect()
            metrics = [operation_metrics({"operationMetrics": h["operationMetrics"] or {}}) for h in history]
            got = fingerprint(spark, path)
            expected = expected or got
            record = {
                "rows": args.rows,
                "rate": args.rate,
                "changes": changes,
                "way": name,
                "change_data_feed": feed,
                "seconds": round(seconds, 2),
                "commits": len(history),
                "rows_copied": sum(m.get("numTargetRowsCopied", 0) for m in metrics),
                "same_rows": got == expected,
            }
            results.append(record)
            print(json.dumps(record))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as file:
        for record in results:
            file.write(json.dumps(record) + "\n")
    return 0 if all(r["same_rows"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
