"""Change batches: a share of a source's rows updated (70 %), inserted (20 %) and deleted (10 %),
written as one Delta MERGE per source, as a CDC ingestion would.

Scenarios say which sources change:
- facts: orders and products (the left sides);
- fk_side: customers and tags (the right sides);
- hot_dim: one nation row, plus the most popular tags;
- mixed: all four of facts and fk_side;
- skewed: the Zipf-popular customers (their orders fan out in orders_skewed), and orders_skewed;
- recent: orders and products, as CDC mostly changes them: updates and deletes fall on the newest
  keys (the newest `RECENT_WINDOW` times the rate's share of the table), inserts are new keys.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bench import tables
from bench.tables import KEYS, Sizes, uniform, zipf_rank

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


class Scenario(enum.Enum):
    FACTS = "facts"
    FK_SIDE = "fk_side"
    HOT_DIM = "hot_dim"
    MIXED = "mixed"
    SKEWED = "skewed"
    RECENT = "recent"


UPDATE, INSERT, DELETE = 0.7, 0.2, 0.1
RECENT_WINDOW = 10
OP = "_bench_op"

# For each table: the share of updated rows in which each column takes its fresh value.
CHANGED_COLUMNS: dict[str, dict[str, float]] = {
    "orders": {"customer_id": 0.2, "amount": 1.0, "status": 0.5},
    "orders_skewed": {"customer_id": 0.2, "amount": 1.0, "status": 0.5},
    "customers": {"name": 1.0, "email": 0.1, "nation_id": 0.3, "segment_id": 0.1, "balance": 1.0},
    "products": {"title": 1.0, "price": 0.5, "tag_ids": 0.5},
    "tags": {"label": 1.0},
    "nations": {"name": 1.0},
    "segments": {"name": 1.0},
}


@dataclass
class ChangeMaker:
    """Applies one batch of changes to the shared sources and remembers where ids end."""

    spark: SparkSession
    paths: dict[str, str]
    sizes: Sizes
    seed: int

    def __post_init__(self) -> None:
        self.next_id = {
            "customers": self.sizes.customers,
            "orders": self.sizes.orders,
            "orders_skewed": self.sizes.orders,
            "products": self.sizes.products,
            "tags": self.sizes.tags,
        }

    def fresh(self, table: str, ids: DataFrame, batch: int) -> DataFrame:
        """Rows with the table's columns for `ids`, drawn anew for batch `batch`."""
        s, n = self.seed, self.sizes
        makers: dict[str, Callable[[], DataFrame]] = {
            "customers": lambda: tables.customers(self.spark, ids, s, batch),
            "orders": lambda: tables.orders(ids, s, n.customers, skewed=False, version=batch),
            "orders_skewed": lambda: tables.orders(ids, s, n.customers, skewed=True, version=batch),
            "products": lambda: tables.products(ids, s, n.tags, batch),
            "tags": lambda: tables.tags(ids, batch),
            "nations": lambda: tables.dimension(ids, "nation_id", "nation", batch),
            "segments": lambda: tables.dimension(ids, "segment_id", "segment", batch),
        }
        return makers[table]()

    def apply(self, scenario: Scenario, rate: float, batch: int) -> dict[str, int]:
        """Change the scenario's sources at `rate`; returns table -> rows changed."""
        plan: dict[str, DataFrame]
        if scenario is Scenario.FACTS:
            plan = {t: self.spread(t, rate, batch) for t in ("orders", "products")}
        elif scenario is Scenario.FK_SIDE:
            plan = {t: self.spread(t, rate, batch) for t in ("customers", "tags")}
        elif scenario is Scenario.RECENT:
            plan = {t: self.spread(t, rate, batch, recent=True) for t in ("orders", "products")}
        elif scenario is Scenario.MIXED:
            plan = {t: self.spread(t, rate, batch) for t in ("orders", "products", "customers", "tags")}
        elif scenario is Scenario.HOT_DIM:
            popular = max(1, round(rate * self.sizes.tags))
            plan = {
                "nations": self.updates(
                    "nations", self.spark.range(batch % tables.NATIONS, 1 + batch % 25), batch
                ),
                "tags": self.updates("tags", self.spark.range(0, popular), batch),
            }
        else:
            plan = {
                "customers": self.hot_customers(rate, batch),
                "orders_skewed": self.spread("orders_skewed", rate, batch),
            }
        counts = {}
        for table, change in plan.items():
            change = change.localCheckpoint()
            counts[table] = change.count()
            self.merge(table, change)
        return counts

    def current(self, table: str) -> DataFrame:
        return self.spark.read.format("delta").load(self.paths[table])

    def spread(self, table: str, rate: float, batch: int, *, recent: bool = False) -> DataFrame:
        """Uniformly chosen rows: updates and deletes of existing keys (with `recent`, of the
        newest keys only, at the same count), and new keys."""
        from pyspark.sql import functions as F

        key = KEYS[table]
        count = self.spark.read.format("delta").load(self.paths[table]).count()
        start = self.next_id[table]
        draw = uniform(self.seed * 7919 + batch, F.col(key))
        existing = self.current(table).select(F.col(key).alias("id"), draw.alias("u"))
        share = rate  # of the rows drawn from
        if recent and rate * RECENT_WINDOW < 1:
            existing = existing.where(F.col("id") >= start - round(count * rate * RECENT_WINDOW))
            share = 1 / RECENT_WINDOW
        updated = existing.where(F.col("u") < share * UPDATE).select("id")
        deleted = existing.where((F.col("u") >= share * UPDATE) & (F.col("u") < share * (UPDATE + DELETE)))
        self.next_id[table] = start + round(count * rate * INSERT)
        inserted = self.fresh(table, self.spark.range(start, self.next_id[table]), batch)
        return (
            self.updates(table, updated, batch)
            .unionByName(self.deletes(table, deleted.select("id")))
            .unionByName(inserted.withColumn(OP, F.lit("i")))
        )

    def hot_customers(self, rate: float, batch: int) -> DataFrame:
        """Updates of customers drawn by popularity (the low ids), plus uniform inserts and deletes."""
        from pyspark.sql import functions as F

        draws = round(self.sizes.customers * rate * UPDATE)
        hot = (
            self.spark.range(0, draws)
            .select(zipf_rank(uniform(self.seed * 31 + batch, F.col("id")), self.sizes.customers).alias("id"))
            .distinct()
        )
        existing = self.current("customers").select(F.col("customer_id").alias("id"))
        hot = hot.join(existing, on="id", how="left_semi")
        others = self.spread("customers", rate * (INSERT + DELETE), batch).where(F.col(OP) != "u")
        return self.updates("customers", hot, batch).unionByName(others)

    def updates(self, table: str, ids: DataFrame, batch: int) -> DataFrame:
        """The current rows of `ids`, each column replaced by its fresh value at its share."""
        from pyspark.sql import functions as F

        key = KEYS[table]
        old = self.current(table).join(
            ids.select(F.col("id").cast("bigint").alias(key)), on=key, how="left_semi"
        )
        new = self.fresh(table, ids, batch).select(
            key, *[F.col(c).alias(f"new_{c}") for c in CHANGED_COLUMNS[table]]
        )
        columns: list[Column] = [F.col(key)]
        for column in old.columns:
            if column == key:
                continue
            share = CHANGED_COLUMNS[table].get(column, 0.0)
            pick = uniform(self.seed + batch, F.col(key), F.lit(column)) < share
            columns.append(F.when(pick, F.col(f"new_{column}")).otherwise(F.col(column)).alias(column))
        return old.join(new, on=key, how="inner").select(*columns, F.lit("u").alias(OP))

    def deletes(self, table: str, ids: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        key = KEYS[table]
        old = self.current(table).join(ids.select(F.col("id").alias(key)), on=key, how="left_semi")
        return old.withColumn(OP, F.lit("d"))

    def merge(self, table: str, change: DataFrame) -> None:
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        key = KEYS[table]
        columns = [c for c in change.columns if c != OP]
        values: dict[str, str | Column] = {c: F.col(f"s.{c}") for c in columns}
        (
            DeltaTable.forPath(self.spark, self.paths[table])
            .alias("t")
            .merge(change.alias("s"), F.col(f"t.{key}") == F.col(f"s.{key}"))
            .whenMatchedDelete(condition=F.col(f"s.{OP}") == "d")
            .whenMatchedUpdate(condition=F.col(f"s.{OP}") == "u", set=values)
            .whenNotMatchedInsert(condition=F.col(f"s.{OP}") == "i", values=values)
            .execute()
        )
