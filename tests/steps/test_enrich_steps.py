"""views/enrich.py's recompute on in-memory frames: a fact's columns, then each dimension's
chosen columns with its prefix; a `left` dimension keeps a fact it does not match, an `inner`
one drops it; broadcast or shuffled, the rows are the same."""

from __future__ import annotations

import pytest

from lakejoin.spec.model import Dimension, JoinHow
from lakejoin.views.enrich import DimensionRows, recompute
from tests.steps.frames import ordered, rows

pytestmark = pytest.mark.steps

LEFT, INNER = JoinHow.LEFT, JoinHow.INNER
PURCHASES = "purchase_id string, customer_id string, product_id string, qty int"
FACTS = [
    ("u1", "c1", "p1", 1),  # both dimensions match
    ("u2", "c9", "p1", 2),  # no such customer
    ("u3", None, "p2", 3),  # no customer
    ("u4", "c1", "p9", 4),  # no such product
    ("u5", "c2", None, 5),  # no product
]
CUSTOMERS = [("c1", "Ann", "FR"), ("c2", "Bob", "DE")]
PRODUCTS = [("p1", "pen", 1.5), ("p2", "cup", 2.0)]
ENRICHED = {
    "u1": ("u1", "c1", "p1", 1, "Ann", "pen"),
    "u2": ("u2", "c9", "p1", 2, None, "pen"),
    "u3": ("u3", None, "p2", 3, None, "cup"),
    "u4": ("u4", "c1", "p9", 4, "Ann", None),
    "u5": ("u5", "c2", None, 5, "Bob", None),
}


def dimensions(spark, customers: JoinHow, products: JoinHow, *, broadcast: bool) -> list[DimensionRows]:
    return [
        DimensionRows(
            Dimension("customers", ("customer_id",), customers, "customer_", ("name",)),
            spark.createDataFrame(CUSTOMERS, "customer_id string, name string, country string"),
            ("customer_id",),
            ["name"],
            broadcast,
        ),
        DimensionRows(
            Dimension("products", ("product_id",), products, "product_", ("title",)),
            spark.createDataFrame(PRODUCTS, "product_id string, title string, price double"),
            ("product_id",),
            ["title"],
            broadcast,
        ),
    ]


@pytest.mark.parametrize("broadcast", [True, False], ids=["broadcast", "shuffled"])
@pytest.mark.parametrize(
    ("customers", "products", "kept"),
    [
        (LEFT, LEFT, ["u1", "u2", "u3", "u4", "u5"]),
        (LEFT, INNER, ["u1", "u2", "u3"]),
        (INNER, LEFT, ["u1", "u4", "u5"]),
        (INNER, INNER, ["u1"]),
    ],
    ids=["left_left", "left_inner", "inner_left", "inner_inner"],
)
def test_a_fact_is_enriched_by_each_dimension_on_its_own(spark, customers, products, kept, broadcast):
    out = recompute(
        spark.createDataFrame(FACTS, PURCHASES), dimensions(spark, customers, products, broadcast=broadcast)
    )

    assert out.columns == [
        "purchase_id",
        "customer_id",
        "product_id",
        "qty",
        "customer_name",
        "product_title",
    ]
    assert rows(out) == ordered(ENRICHED[fact] for fact in kept)


def test_a_fact_with_no_dimension_is_its_own_row(spark):
    facts = spark.createDataFrame(FACTS[:2], PURCHASES)

    assert rows(recompute(facts, [])) == ordered(FACTS[:2])
