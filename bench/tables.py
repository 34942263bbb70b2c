"""The benchmark's lakehouse: seeded tables written as Delta with the Change Data Feed on, and
the lakejoin spec of each variant over them.

Every value is a hash of the row's id and the seed, so the same scale and seed give the same
tables on any machine. Popular customers and tags are the low ids: a Zipf-like (log-uniform)
draw of rank r has probability ~1/(r ln N), the shape of real popularity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

NATIONS = 25
SEGMENTS = 5
STATUSES = ("placed", "paid", "shipped", "returned")
MAX_TAGS = 20


@dataclass(frozen=True)
class Sizes:
    """Row counts at a scale: 1.0 is the issue's 15 M orders."""

    orders: int
    customers: int
    products: int
    tags: int

    @classmethod
    def at(cls, orders: int) -> Sizes:
        scale = orders / 15_000_000
        return cls(
            orders=orders,
            customers=max(1000, round(1_500_000 * scale)),
            products=max(1000, round(2_000_000 * scale)),
            tags=20_000,
        )


def uniform(seed: int, *columns: Column) -> Column:
    """A seeded uniform draw in [0, 1) for each row, from the given columns."""
    from pyspark.sql import functions as F

    modulus = 1_000_000_007
    return F.pmod(F.xxhash64(*columns, F.lit(seed)), F.lit(modulus)) / F.lit(float(modulus))


def zipf_rank(u: Column, n: int) -> Column:
    """A popularity rank in [0, n) from a uniform draw: log-uniform, so rank 0 is the hottest."""
    from pyspark.sql import functions as F

    return F.least(F.floor(F.exp(u * F.lit(math.log(n + 1)))) - 1, F.lit(n - 1)).cast("bigint")


def customers(spark: SparkSession, ids: DataFrame, seed: int, version: int = 0) -> DataFrame:
    """Customer rows for the ids in column `id`; `version` varies the name on an update."""
    from pyspark.sql import functions as F

    cid = F.col("id")
    return ids.select(
        cid.cast("bigint").alias("customer_id"),
        F.concat(F.lit("customer "), cid, F.lit(f" v{version}")).alias("name"),
        F.concat(F.lit("c"), cid, F.lit(f".{version}@example.com")).alias("email"),
        F.floor(uniform(seed + version, cid, F.lit(1)) * NATIONS).cast("int").alias("nation_id"),
        F.floor(uniform(seed + version, cid, F.lit(2)) * SEGMENTS).cast("int").alias("segment_id"),
        F.round(uniform(seed + version, cid, F.lit(3)) * 10_000, 2).alias("balance"),
    )


def orders(ids: DataFrame, seed: int, customers_n: int, *, skewed: bool, version: int = 0) -> DataFrame:
    """Order rows for the ids in column `id`, each with an fk into [0, customers_n)."""
    from pyspark.sql import functions as F

    oid = F.col("id")
    draw = uniform(seed + version, oid, F.lit(4))
    fk = zipf_rank(draw, customers_n) if skewed else F.floor(draw * customers_n).cast("bigint")
    status = F.element_at(F.array(*[F.lit(s) for s in STATUSES]), (F.floor(draw * 4) + 1).cast("int"))
    return ids.select(
        oid.cast("bigint").alias("order_id"),
        fk.alias("customer_id"),
        F.round(uniform(seed + version, oid, F.lit(5)) * 500, 2).alias("amount"),
        status.alias("status"),
    )


def products(ids: DataFrame, seed: int, tags_n: int, version: int = 0) -> DataFrame:
    """Product rows with `tag_ids`: 0-20 Zipf-popular tags, 5 on average."""
    from pyspark.sql import functions as F

    pid = F.col("id")
    # floor of an exponential draw with mean 5.5, capped at 20: mean about 5.
    length = F.least(
        F.floor(-F.lit(5.5) * F.log(F.lit(1.0) - uniform(seed + version, pid, F.lit(6)))), F.lit(MAX_TAGS)
    ).cast("int")
    tag = F.transform(
        F.sequence(F.lit(1), F.lit(MAX_TAGS)), lambda i: zipf_rank(uniform(seed + version, pid, i), tags_n)
    )
    return ids.select(
        pid.cast("bigint").alias("product_id"),
        F.concat(F.lit("product "), pid, F.lit(f" v{version}")).alias("title"),
        F.round(uniform(seed + version, pid, F.lit(7)) * 100, 2).alias("price"),
        F.slice(tag, 1, length).alias("tag_ids"),
    )


def tags(ids: DataFrame, version: int = 0) -> DataFrame:
    from pyspark.sql import functions as F

    return ids.select(
        F.col("id").cast("bigint").alias("tag_id"),
        F.concat(F.lit("tag "), F.col("id"), F.lit(f" v{version}")).alias("label"),
    )


def dimension(ids: DataFrame, key: str, word: str, version: int = 0) -> DataFrame:
    from pyspark.sql import functions as F

    return ids.select(
        F.col("id").cast("int").alias(key),
        F.concat(F.lit(f"{word} "), F.col("id"), F.lit(f" v{version}")).alias("name"),
    )


def ids(spark: SparkSession, start: int, end: int, rows_per_file: int = 1_000_000) -> DataFrame:
    return spark.range(start, end, 1, numPartitions=max(1, (end - start) // rows_per_file))


def write_sources(spark: SparkSession, root: Path, sizes: Sizes, seed: int) -> dict[str, str]:
    """Write every source table under `root`; returns name -> path."""
    frames = {
        "customers": customers(spark, ids(spark, 0, sizes.customers), seed),
        "orders": orders(ids(spark, 0, sizes.orders), seed, sizes.customers, skewed=False),
        "orders_skewed": orders(ids(spark, 0, sizes.orders), seed, sizes.customers, skewed=True),
        "products": products(ids(spark, 0, sizes.products), seed, sizes.tags),
        "tags": tags(ids(spark, 0, sizes.tags)),
        "nations": dimension(ids(spark, 0, NATIONS), "nation_id", "nation"),
        "segments": dimension(ids(spark, 0, SEGMENTS), "segment_id", "segment"),
    }
    paths = {}
    for name, frame in frames.items():
        path = str(root / "sources" / name)
        frame.write.format("delta").option("delta.enableChangeDataFeed", "true").save(path)
        paths[name] = path
    return paths


KEYS = {
    "customers": "customer_id",
    "orders": "order_id",
    "orders_skewed": "order_id",
    "products": "product_id",
    "tags": "tag_id",
    "nations": "nation_id",
    "segments": "segment_id",
}

VIEWS_YAML = """\
views:
  orders_customers:
    fk_join: {left: orders, right: customers, fk: customer_id, how: left,
              right_columns: [name, email, nation_id, segment_id], right_prefix: customer_,
              fanout_threshold: %(threshold)s}
  orders_enriched:
    enrich:
      fact: orders_customers
      mode: propagate
      fanout_threshold: %(threshold)s
      dimensions:
        - {table: nations, fk: customer_nation_id, prefix: nation_, columns: [name]}
        - {table: segments, fk: customer_segment_id, prefix: segment_, columns: [name]}
  skewed_orders_customers:
    fk_join: {left: orders_skewed, right: customers, fk: customer_id, how: left,
              right_columns: [name, nation_id], right_prefix: customer_,
              fanout_threshold: %(threshold)s}
  products_tagged:
    list_join: {left: products, list: tag_ids, right: tags, into: tags,
                fanout_threshold: %(threshold)s}
  customers_by_email:
    rekey: {source: customers, key: email, columns: [name, nation_id]}
"""


def spec_text(name: str, storage: Path, sources: dict[str, str], threshold: float = 0.2) -> str:
    """The lakejoin spec of one variant: the shared sources, the variant's own storage."""
    lines = [f"pipeline: {name}", f"storage: {storage}", "sources:"]
    lines += [f"  {n}: {{path: {p}, key: {KEYS[n]}}}" for n, p in sources.items()]
    return "\n".join(lines) + "\n" + VIEWS_YAML % {"threshold": threshold}
