"""The demo marketplace: products -> merchants, persons -> addresses, purchases enriched with
their buyer and their product as displayed, persons' favourite products, order lines (keyed by
two columns: purchase and line number) with their product, and a few realistic change batches.

Used by `make demo` and by the end-to-end tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MERCHANTS = "merchant_id STRING, display_name STRING, photo_url STRING, country STRING"
PRODUCTS = "product_id STRING, title STRING, price DECIMAL(10,2), merchant_id STRING, updated_at TIMESTAMP"
PERSONS = "person_id STRING, name STRING, address_ids ARRAY<STRING>"
ADDRESSES = "address_id STRING, street STRING, city STRING"
PURCHASES = "purchase_id STRING, person_id STRING, product_id STRING, qty INT"
FAVOURITES = "person_id STRING, product_ids ARRAY<STRING>"
ORDER_LINES = "purchase_id STRING, line_no INT, product_id STRING, qty INT"
ORDER_LINE_KEY = ("purchase_id", "line_no")


def order_lines() -> list[tuple]:
    """The lines of some purchases, keyed by (purchase_id, line_no); o09's second line names a
    product that is not listed yet."""
    return [
        ("o01", 1, "p01", 1),
        ("o01", 2, "p06", 2),
        ("o02", 1, "p02", 1),
        ("o03", 1, "p07", 3),
        ("o03", 2, "p08", 1),
        ("o09", 1, "p21", 1),
        ("o09", 2, "p22", 1),
    ]


def purchases() -> list[tuple]:
    # o09 buys a product that is not listed yet; o10's buyer is unknown.
    bought = [("u1", "p01"), ("u1", "p02"), ("u2", "p07"), ("u3", "p03"), ("u3", "p12"), ("u5", "p20")]
    rows = [(f"o{i + 1:02d}", person, product, 1 + i % 3) for i, (person, product) in enumerate(bought)]
    return [
        *rows,
        ("o07", "u2", "p05", 1),
        ("o08", "u5", "p18", 2),
        ("o09", "u1", "p21", 1),
        ("o10", "u9", "p11", 1),
    ]


def favourites() -> list[tuple]:
    return [("u1", ["p02", "p03"]), ("u2", ["p07"]), ("u3", ["p12", "p21", "p03"]), ("u5", [])]


def persons() -> list[tuple]:
    return [
        ("u1", "Ada", ["a1", "a2"]),
        ("u2", "Bram", ["a3"]),
        ("u3", "Cato", ["a2", "a4", "a2"]),  # a duplicate: the view drops it
        ("u4", "Dirk", []),
        ("u5", "Eva", ["a5", "a9"]),  # a9 is not an address (yet)
    ]


def addresses() -> list[tuple]:
    return [
        ("a1", "Keizersgracht 1", "Amsterdam"),
        ("a2", "Unter den Linden 2", "Berlin"),
        ("a3", "Coolsingel 3", "Rotterdam"),
        ("a4", "Zeil 4", "Frankfurt"),
        ("a5", "Neude 5", "Utrecht"),
    ]


def merchants() -> list[tuple]:
    names = ["Acme Tools", "Bolt & Nut", "Copper Kettle", "Dune Outdoor", "Ember Candles"]
    return [
        (f"m{i + 1}", name, f"https://img.example/m{i + 1}.png", "NL" if i % 2 else "DE")
        for i, name in enumerate(names)
    ]


def products() -> list[tuple]:
    from datetime import datetime
    from decimal import Decimal

    titles = [
        "hammer",
        "wrench",
        "kettle",
        "tent",
        "candle",
        "pliers",
        "teapot",
        "lantern",
        "saw",
        "mug",
        "stove",
        "drill",
        "wick",
        "rope",
        "bolt",
        "screw",
        "lamp",
        "tap",
        "jug",
        "sleeping bag",
    ]
    stamp = datetime(2026, 11, 1)
    return [
        (f"p{i + 1:02d}", title, Decimal(f"{5 + i * 1.5:.2f}"), f"m{i % 5 + 1}" if i != 19 else None, stamp)
        for i, title in enumerate(titles)
    ]


@dataclass(frozen=True)
class ChangeBatch:
    title: str
    apply: Callable[[SparkSession, str], None]


def _merge(
    spark: SparkSession, path: str, key: str | tuple[str, ...], rows: list[tuple], schema: str
) -> None:
    from functools import reduce

    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    columns = (key,) if isinstance(key, str) else key
    same = reduce(lambda a, b: a & b, (F.col(f"t.{c}") == F.col(f"s.{c}") for c in columns))
    source = spark.createDataFrame(rows, schema)
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), same)
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )


def _products_update(spark: SparkSession, root: str, changes: dict[str, dict]) -> None:
    from datetime import datetime

    current = {
        r["product_id"]: r.asDict() for r in spark.read.format("delta").load(f"{root}/products").collect()
    }
    rows = []
    for key, values in changes.items():
        row = {**current[key], **values, "updated_at": datetime(2026, 11, 21)}
        rows.append(tuple(row[c] for c in ("product_id", "title", "price", "merchant_id", "updated_at")))
    _merge(spark, f"{root}/products", "product_id", rows, PRODUCTS)


def _price_updates(spark: SparkSession, root: str) -> None:
    from decimal import Decimal

    _products_update(
        spark,
        root,
        {
            "p01": {"price": Decimal("4.99")},
            "p02": {"price": Decimal("7.25")},
            "p07": {"price": Decimal("15.00")},
        },
    )
    # A customer buys two more of a line's product.
    _merge(spark, f"{root}/order_lines", ORDER_LINE_KEY, [("o01", 2, "p06", 4)], ORDER_LINES)


def _products_update_new(spark: SparkSession, root: str, rows: list[tuple]) -> None:
    from datetime import datetime
    from decimal import Decimal

    stamp = datetime(2026, 11, 21)
    typed = [(key, title, Decimal(price), merchant, stamp) for key, title, price, merchant in rows]
    _merge(spark, f"{root}/products", "product_id", typed, PRODUCTS)


def _fk_move_and_rename(spark: SparkSession, root: str) -> None:
    _products_update(spark, root, {"p03": {"merchant_id": "m2"}, "p20": {"merchant_id": "m4"}})
    rows = [("m2", "Bolt & Nut Co.", "https://img.example/m2-new.png", "NL")]
    _merge(spark, f"{root}/merchants", "merchant_id", rows, MERCHANTS)
    # An address is corrected (every list holding it follows); a person moves house; the
    # missing address arrives.
    fixed = [("a2", "Unter den Linden 2a", "Berlin"), ("a9", "Domplein 9", "Utrecht")]
    _merge(spark, f"{root}/addresses", "address_id", fixed, ADDRESSES)
    _merge(spark, f"{root}/persons", "person_id", [("u2", "Bram", ["a3", "a1"])], PERSONS)
    # The product o09 bought gets listed; o04 changes to another product.
    _products_update_new(spark, root, [("p21", "teacup", "3.50", "m3")])
    _merge(spark, f"{root}/purchases", "purchase_id", [("o04", "u3", "p06", 2)], PURCHASES)
    # A line swaps its product, and a purchase gets a third line.
    lines = [("o02", 1, "p03", 1), ("o01", 3, "p21", 2)]
    _merge(spark, f"{root}/order_lines", ORDER_LINE_KEY, lines, ORDER_LINES)


def _deletes(spark: SparkSession, root: str) -> None:
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    DeltaTable.forPath(spark, f"{root}/merchants").delete(F.col("merchant_id") == "m5")
    DeltaTable.forPath(spark, f"{root}/products").delete(F.col("product_id").isin("p04", "p09"))
    DeltaTable.forPath(spark, f"{root}/addresses").delete(F.col("address_id") == "a4")
    DeltaTable.forPath(spark, f"{root}/persons").delete(F.col("person_id") == "u4")
    DeltaTable.forPath(spark, f"{root}/purchases").delete(F.col("purchase_id") == "o10")
    # One line of a purchase is returned: only that (purchase_id, line_no) goes.
    DeltaTable.forPath(spark, f"{root}/order_lines").delete(
        (F.col("purchase_id") == "o03") & (F.col("line_no") == 2)
    )
    # A new merchant registers under a name already taken: merchants_by_name keeps the latest
    # and reports the conflict.
    rows = [("m6", "Acme Tools", "https://img.example/m6.png", "BE")]
    _merge(spark, f"{root}/merchants", "merchant_id", rows, MERCHANTS)


CHANGE_BATCHES = [
    ChangeBatch("price updates of three products; an order line's quantity changes", _price_updates),
    ChangeBatch(
        "a product moves to another merchant, another gets one, a merchant is renamed; "
        "an address is corrected, one arrives, and a person moves; a product is listed and a "
        "purchase changes product; an order line swaps its product and a purchase gets a line",
        _fk_move_and_rename,
    ),
    ChangeBatch(
        "merchant m5 closes and two products are delisted; an address and a person are deleted; "
        "a new merchant takes an existing name; a purchase is cancelled and an order line returned",
        _deletes,
    ),
]


def create_marketplace(spark: SparkSession, root: str) -> None:
    """Write the demo's tables (CDF on) under `root`."""
    for name, schema, rows in (
        ("merchants", MERCHANTS, merchants()),
        ("products", PRODUCTS, products()),
        ("persons", PERSONS, persons()),
        ("addresses", ADDRESSES, addresses()),
        ("purchases", PURCHASES, purchases()),
        ("favourites", FAVOURITES, favourites()),
        ("order_lines", ORDER_LINES, order_lines()),
    ):
        (
            spark.createDataFrame(rows, schema)
            .write.format("delta")
            .mode("overwrite")
            .option("delta.enableChangeDataFeed", "true")
            .save(f"{root}/{name}")
        )
