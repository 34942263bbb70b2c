"""The small Spark steps the view kinds and the write share, on in-memory frames: routes (which
left keys a right change reaches), the write's row predicates (same key, values differ, key in
a list), and the duplicate-key check inside a job."""

from __future__ import annotations

import pytest

from lakejoin.delta.routing import routed_left_keys, routes
from lakejoin.sink.merge_terms import any_of, same_key, values_differ
from lakejoin.views.context import DUPLICATE_KEY, checked_unique
from tests.steps.frames import ordered, rows

pytestmark = pytest.mark.steps

PRODUCTS = [("p1", "m1"), ("p2", "m1"), ("p3", "m2"), ("p4", None)]


@pytest.mark.parametrize(
    ("changed", "reached"),
    [
        ([], []),
        (["m1"], ["p1", "p2"]),
        (["m2", "m3"], ["p3"]),  # m3 is held by no left row
        (["m1", "m2"], ["p1", "p2", "p3"]),
        ([None], []),  # a null key reaches nothing, not the rows without an fk
    ],
    ids=["none", "one_key_two_rows", "unheld_key", "two_keys", "null_key"],
)
def test_a_right_change_reaches_the_left_rows_whose_route_holds_its_key(spark, changed, reached):
    left = spark.createDataFrame(PRODUCTS, "product_id string, merchant_id string")
    index = routes(left, ("product_id",), {"route": ("merchant_id",)})
    changes = spark.createDataFrame([(k,) for k in changed], "merchant_id string")

    found = routed_left_keys(
        index, changes, ("merchant_id",), route="route", left_key=("product_id",), changed=len(changed)
    )

    assert index.columns == ["left_key", "route"]
    assert found.columns == ["product_id"]
    assert rows(found) == [(k,) for k in reached]


@pytest.mark.parametrize(
    ("new", "old", "differs"),
    [
        (("1", "x"), ("1", "x"), False),
        (("1", "x"), ("1", "y"), True),
        ((None, "x"), (None, "x"), False),  # null equals null
        (("1", None), ("1", "x"), True),
        (("1", "x"), (None, "x"), True),
    ],
)
def test_values_differ_null_safely_between_rows_of_one_key(spark, new, old, differs):
    n = spark.createDataFrame([("k", *new)], "id string, a string, b string").alias("n")
    o = spark.createDataFrame([("k", *old)], "id string, a string, b string").alias("o")

    joined = n.join(o, same_key("n", "o", ["id"])).select(values_differ("n", "o", ["a", "b"]).alias("d"))

    assert rows(joined) == [(differs,)]


@pytest.mark.parametrize(
    ("listed", "held"),
    [([3], [3]), ([1, 4], [1, 4]), ([0, 2, 4, 6, 8], [0, 2, 4]), (list(range(9)), [0, 1, 2, 3, 4])],
)
def test_a_key_is_in_a_listed_set_of_keys(spark, listed, held):
    keys = spark.range(5)

    assert rows(keys.where(any_of(keys["id"], listed))) == [(k,) for k in held]


def test_two_rows_of_one_key_fail_the_job_that_reads_them(spark):
    unique = spark.createDataFrame([("a", 1), ("b", 2)], "k string, v int")
    twice = spark.createDataFrame([("a", 1), ("b", 2), ("a", 3)], "k string, v int")

    assert rows(checked_unique(unique, ("k",))) == ordered([("a", 1), ("b", 2)])
    with pytest.raises(Exception, match=DUPLICATE_KEY):
        checked_unique(twice, ("k",)).collect()
