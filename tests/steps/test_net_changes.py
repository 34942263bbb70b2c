"""delta/change_feed.py's `net_changes` as a truth table: Change Data Feed rows of one range, in
any order, collapsed to each key's last change. In-memory feeds, no Delta table."""

from __future__ import annotations

import pytest

from lakejoin.delta.change_feed import net_changes, no_changes, upserts
from tests.steps.frames import ordered, rows

pytestmark = pytest.mark.steps

FEED = "id string, v string, _change_type string, _commit_version bigint, _commit_timestamp timestamp"
INS, DEL, PRE, POST = "insert", "delete", "update_preimage", "update_postimage"
UPDATE_CHAIN = [
    ("k", "a", INS, 1),
    ("k", "a", PRE, 2),
    ("k", "b", POST, 2),
    ("k", "b", PRE, 3),
    ("k", "c", POST, 3),
]


def feed(spark, changes: list[tuple]):
    """A change feed of (id, v, change type, commit version) rows."""
    return spark.createDataFrame([(*change, None) for change in changes], FEED)


@pytest.mark.parametrize(
    ("changes", "net"),
    [
        pytest.param([], [], id="no_rows"),
        # The key is gone at the end of the range: its net change deletes it, with its last values.
        pytest.param(
            [("k", "a", INS, 1), ("k", "a", DEL, 2)], [("k", "a", "delete", 2)], id="insert_then_delete"
        ),
        pytest.param([("k", "a", DEL, 5)], [("k", "a", "delete", 5)], id="delete"),
        pytest.param(UPDATE_CHAIN, [("k", "c", "upsert", 3)], id="update_chain_keeps_last_postimage"),
        pytest.param(UPDATE_CHAIN[::-1], [("k", "c", "upsert", 3)], id="update_chain_in_any_order"),
        pytest.param(
            [("k", "a", PRE, 2), ("k", "b", POST, 2)], [("k", "b", "upsert", 2)], id="preimage_dropped"
        ),
        pytest.param(
            [("k", "a", INS, 1), ("k", "a", DEL, 2), ("k", "z", INS, 3)],
            [("k", "z", "upsert", 3)],
            id="delete_then_reinsert",
        ),
        # An overwrite writes a delete and an insert of a key it keeps, in one commit.
        pytest.param(
            [("k", "b", INS, 2), ("k", "a", DEL, 2)], [("k", "b", "upsert", 2)], id="overwrite_in_one_commit"
        ),
        pytest.param(
            [
                ("a", "1", INS, 1),
                ("b", "1", INS, 1),
                ("a", "1", DEL, 2),
                ("b", "1", PRE, 3),
                ("b", "2", POST, 3),
                ("c", "1", INS, 3),
            ],
            [("a", "1", "delete", 2), ("b", "2", "upsert", 3), ("c", "1", "upsert", 3)],
            id="several_keys_each_its_own",
        ),
    ],
)
def test_each_key_nets_to_its_last_change(spark, changes, net):
    result = net_changes(feed(spark, changes), "id")

    assert result.columns == ["id", "v", "_lj_change", "_commit_version"]
    assert rows(result) == ordered(net)


def test_the_upserts_of_a_net_change_are_the_rows_that_exist_at_the_pin(spark):
    net = net_changes(feed(spark, [("a", "1", INS, 1), ("b", "1", INS, 1), ("a", "1", DEL, 2)]), "id")

    assert upserts(net).columns == ["id", "v"]
    assert rows(upserts(net)) == [("b", "1")]


def test_no_changes_has_the_columns_of_a_net_change_and_no_row(spark):
    table = spark.createDataFrame([("k", "a")], "id string, v string")

    empty = no_changes(table)

    assert [(f.name, f.dataType.simpleString()) for f in empty.schema.fields] == [
        ("id", "string"),
        ("v", "string"),
        ("_lj_change", "string"),
        ("_commit_version", "bigint"),
    ]
    assert rows(empty) == []
