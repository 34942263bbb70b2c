"""quality/checks.py's `with_key_resolution` as a truth table: each written row flagged once with
whether its reference columns name a key of the target (inner fk_join's right rows, an inner
enrich dimension, rekey's master). No shuffle does it (semi and anti joins, no distinct), so a
reference repeated among the rows, or a key the target holds twice, must still flag each row
once."""

from __future__ import annotations

import pytest

from lakejoin.quality.checks import with_key_resolution
from tests.steps.frames import ordered, rows

pytestmark = pytest.mark.steps

WRITTEN = "id string, fk string"
TARGET = "key string, name string"


@pytest.mark.parametrize(
    ("written", "target", "flagged"),
    [
        ([("p1", "m1")], [("m1", "a")], [("p1", "m1", True)]),
        ([("p1", "m9")], [("m1", "a")], [("p1", "m9", False)]),  # no such key
        ([("p1", None)], [("m1", "a")], [("p1", None, False)]),  # a null references nothing
        ([("p1", "m")], [("m1", "a")], [("p1", "m", False)]),  # exact match only
        (  # one key referenced by several rows: each flagged once
            [("p1", "m1"), ("p2", "m1"), ("p3", "m2")],
            [("m1", "a"), ("m3", "c")],
            [("p1", "m1", True), ("p2", "m1", True), ("p3", "m2", False)],
        ),
        ([("p1", "m1")], [("m1", "a"), ("m1", "b")], [("p1", "m1", True)]),  # a target key held twice
        ([], [("m1", "a")], []),
        ([("p1", "m1")], [], [("p1", "m1", False)]),
    ],
)
def test_each_row_is_flagged_once_with_whether_its_reference_resolves(spark, written, target, flagged):
    frame = with_key_resolution(
        spark.createDataFrame(written, WRITTEN),
        spark.createDataFrame(target, TARGET),
        ("fk",),
        ("key",),
        "_resolved",
    )

    assert frame.columns == ["id", "fk", "_resolved"]
    assert rows(frame) == ordered(flagged)


def test_a_reference_of_two_columns_resolves_on_both(spark):
    written = spark.createDataFrame(
        [("p1", "t1", "m1"), ("p2", "t2", "m1"), ("p3", "t1", None)], "id string, tenant string, fk string"
    )
    target = spark.createDataFrame([("t1", "m1", "a")], "tenant_id string, key string, name string")

    frame = with_key_resolution(written, target, ("tenant", "fk"), ("tenant_id", "key"), "_resolved")

    assert rows(frame, "id", "_resolved") == ordered([("p1", True), ("p2", False), ("p3", False)])
