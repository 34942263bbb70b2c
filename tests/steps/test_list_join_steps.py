"""views/list_join.py's steps on in-memory frames: a list flattened into composite rows under
each duplicates policy, the composite rows joined back into lists, and the signature that tells
a list that did not change."""

from __future__ import annotations

import json

import pytest

from lakejoin.spec.model import Duplicates, ListJoin
from lakejoin.views.list_join import composite_rows, joined_lists, signatures
from tests.steps.frames import ordered, rows

pytestmark = pytest.mark.steps

PERSONS = "person_id string, name string, address_ids array<string>"
ADDRESSES = "address_id string, street string"
LISTS = [
    ("p1", "Ann", ["a1", "a2"]),
    ("p2", "Bob", ["a2", "a1", "a2"]),  # a2 twice
    ("p3", "Cat", []),
    ("p4", "Dan", None),
    ("p5", "Eve", ["a9", "a1"]),  # no address a9 (yet)
]
STREETS = [("a1", "High St"), ("a2", "Low St"), ("a3", "Unread St")]
HIGH, LOW = ("a1", "High St"), ("a2", "Low St")


def join(duplicates: Duplicates) -> ListJoin:
    return ListJoin("persons", "address_ids", "addresses", "addresses", duplicates, None)


# The composite rows of LISTS under `drop`: p2's second a2 is gone; under `keep` it stays.
DROPPED = [
    ("p1", 0, "a1"),
    ("p1", 1, "a2"),
    ("p2", 0, "a2"),
    ("p2", 1, "a1"),
    ("p5", 0, "a9"),
    ("p5", 1, "a1"),
]


@pytest.mark.parametrize(
    ("duplicates", "outer", "expected"),
    [
        (Duplicates.KEEP, False, [*DROPPED, ("p2", 2, "a2")]),
        (Duplicates.DROP, False, DROPPED),
        # With `outer`, an empty or null list keeps a place: one row with no position.
        (Duplicates.DROP, True, [*DROPPED, ("p3", None, None), ("p4", None, None)]),
    ],
    ids=["keep", "drop_keeps_the_first", "outer"],
)
def test_a_list_flattens_into_composite_rows(spark, duplicates, outer, expected):
    composite = composite_rows(
        spark.createDataFrame(LISTS, PERSONS), join(duplicates), ("person_id",), outer=outer
    )

    assert composite.columns == ["left_key", "pos", "right_key"]
    assert rows(composite) == ordered(expected)


@pytest.mark.parametrize(
    ("duplicates", "expected"),
    [
        (
            Duplicates.KEEP,
            [
                ("p1", [HIGH, LOW]),
                ("p2", [LOW, HIGH, LOW]),
                ("p3", []),
                ("p4", []),
                ("p5", [("a9", None), HIGH]),
            ],
        ),
        (
            Duplicates.DROP,
            [("p1", [HIGH, LOW]), ("p2", [LOW, HIGH]), ("p3", []), ("p4", []), ("p5", [("a9", None), HIGH])],
        ),
    ],
    ids=["keep", "drop"],
)
def test_composite_rows_join_back_into_lists_in_list_order(spark, duplicates, expected):
    """Each element joins on its own (no address: null columns); an empty or null list gives an
    empty list."""
    composite = composite_rows(
        spark.createDataFrame(LISTS, PERSONS), join(duplicates), ("person_id",), outer=True
    )

    lists = joined_lists(
        composite,
        spark.createDataFrame(STREETS, ADDRESSES),
        left_key=("person_id",),
        right_key=("address_id",),
        right_columns=["street"],
        into="addresses",
    )

    assert lists.columns == ["left_key", "addresses"]
    assert rows(lists) == ordered(expected)


@pytest.mark.parametrize(
    ("duplicates", "before", "after", "same"),
    [
        (Duplicates.KEEP, ["a", "b"], ["a", "b"], True),
        (Duplicates.KEEP, ["a", "b"], ["b", "a"], False),  # reordered
        (Duplicates.KEEP, ["a", "b"], ["a", "b", "c"], False),  # added
        (Duplicates.KEEP, ["a", "b", "a"], ["a", "b"], False),  # a duplicate removed, kept by `keep`
        (Duplicates.DROP, ["a", "b", "a", "c"], ["a", "b", "c"], True),  # the same elements under `drop`
        (Duplicates.DROP, ["a", "b"], ["b", "a"], False),
    ],
    ids=["same", "reordered", "added", "keep_counts_duplicates", "drop_ignores_duplicates", "drop_reordered"],
)
def test_a_signature_tells_whether_the_joined_list_changes(spark, duplicates, before, after, same):
    frame = spark.createDataFrame([("before", "x", before), ("after", "x", after)], PERSONS)

    found = dict(rows(signatures(composite_rows(frame, join(duplicates), ("person_id",)), ("person_id",))))

    assert (found["before"] == found["after"]) is same
    kept = list(dict.fromkeys(after)) if duplicates is Duplicates.DROP else after
    assert found["after"] == json.dumps(kept, separators=(",", ":"))  # the element keys, in order
