"""views/fk_join.py's steps on in-memory frames: the output keys a batch can change (affected
keys), the right rows a recompute needs, and the recompute itself under `inner` and `left`."""

from __future__ import annotations

import pytest

from lakejoin.spec.model import FkJoin, JoinHow
from lakejoin.views.fk_join import affected_keys, recompute, referenced_right_rows
from tests.steps.frames import ordered, rows

pytestmark = pytest.mark.steps

PRODUCTS = "product_id string, title string, merchant_id string"
MERCHANTS = "merchant_id string, display_name string, logo string"
LEFT = [
    ("p1", "pen", "m"),  # matched
    ("p2", "cup", "mm"),  # matched by its own key only: `m` never matches `mm`
    ("p3", "ink", "m9"),  # no such merchant
    ("p4", "box", None),  # no fk
    ("p5", "mug", "m"),  # a second product of one merchant
]
RIGHT = [("m", "Acme", "a.png"), ("mm", "Bolt", "b.png"), ("m0", "Unread", "c.png")]


def join(how: JoinHow, right_columns: tuple[str, ...] | None = None) -> FkJoin:
    return FkJoin("products", "merchants", ("merchant_id",), how, right_columns, "merchant_")


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        (
            JoinHow.INNER,
            [
                ("p1", "pen", "m", "Acme", "a.png"),
                ("p2", "cup", "mm", "Bolt", "b.png"),
                ("p5", "mug", "m", "Acme", "a.png"),
            ],
        ),
        (
            JoinHow.LEFT,
            [
                ("p1", "pen", "m", "Acme", "a.png"),
                ("p2", "cup", "mm", "Bolt", "b.png"),
                ("p3", "ink", "m9", None, None),
                ("p4", "box", None, None, None),
                ("p5", "mug", "m", "Acme", "a.png"),
            ],
        ),
    ],
    ids=["inner", "left"],
)
def test_a_recompute_joins_each_left_row_on_its_exact_fk(spark, how, expected):
    out = recompute(
        spark.createDataFrame(LEFT, PRODUCTS),
        spark.createDataFrame(RIGHT, MERCHANTS),
        join(how),
        right_key=("merchant_id",),
        right_columns=["display_name", "logo"],
    )

    assert out.columns == [
        "product_id",
        "title",
        "merchant_id",
        "merchant_display_name",
        "merchant_logo",
    ]
    assert rows(out) == ordered(expected)


def test_a_recompute_carries_only_the_chosen_right_columns(spark):
    out = recompute(
        spark.createDataFrame(LEFT[:1], PRODUCTS),
        spark.createDataFrame(RIGHT, MERCHANTS),
        join(JoinHow.LEFT, ("logo",)),
        right_key=("merchant_id",),
        right_columns=["logo"],
    )

    assert out.columns == ["product_id", "title", "merchant_id", "merchant_logo"]
    assert rows(out) == [("p1", "pen", "m", "a.png")]


@pytest.mark.parametrize(
    ("left_changed", "routed", "affected"),
    [
        ([], [], []),
        (["p1"], [], ["p1"]),  # a left change alone
        ([], ["p2", "p5"], ["p2", "p5"]),  # the left rows a right change reached
        (["p1", "p2"], ["p2", "p3"], ["p1", "p2", "p3"]),  # a key both ways is affected once
    ],
    ids=["none", "left_only", "routed_only", "both_once"],
)
def test_the_affected_keys_are_the_changed_and_the_routed_left_keys_once(
    spark, left_changed, routed, affected
):
    changed = spark.createDataFrame(
        [(k, "x", "upsert") for k in left_changed], "product_id string, title string, _lj_change string"
    )
    reached = spark.createDataFrame([(k,) for k in routed], "product_id string")

    keys = affected_keys(changed, reached, ("product_id",))

    assert keys.columns == ["product_id"]
    assert rows(keys) == [(k,) for k in affected]


def test_a_recompute_reads_only_the_right_rows_its_left_rows_reference(spark):
    referenced = referenced_right_rows(
        spark.createDataFrame(RIGHT, MERCHANTS),
        spark.createDataFrame(LEFT, PRODUCTS),
        ("merchant_id",),
        ("merchant_id",),
    )

    assert referenced.columns == ["merchant_id", "display_name", "logo"]
    assert rows(referenced) == ordered([("m", "Acme", "a.png"), ("mm", "Bolt", "b.png")])
