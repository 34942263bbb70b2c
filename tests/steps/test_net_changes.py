"""delta/change_feed.py's `net_changes` as a truth table: Change Data Feed rows of one range, in
any order, collapsed to each key's last change of content (issue 36: a commit that writes a row
back as it was is no change). In-memory feeds, no Delta table. Every case is also checked
against the tests' plain-Python model of the rule (tests/content.py), which the oracles use."""

from __future__ import annotations

import pytest

from lakejoin.delta.change_feed import before_rows, net_changes, net_rows, no_changes, upserts
from tests.content import last_changes
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


def arrow_feed(changes: list[tuple], values=None):  # noqa: ANN001, ANN201 - a pyarrow type, a Table
    """The same feed as delta-rs reads it on the driver (a pyarrow Table)."""
    import pyarrow as pa

    names = ("id", "v", "_change_type", "_commit_version")
    types = [pa.string(), values or pa.string(), pa.string(), pa.int64()]
    return pa.table(
        {n: pa.array([c[i] for c in changes], t) for i, (n, t) in enumerate(zip(names, types, strict=True))}
    )


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
        # UPDATE ... SET id = 'j' WHERE id = 'k': the pre-image is k's, the post-image j's.
        pytest.param(
            [("k", "a", INS, 1), ("k", "a", PRE, 2), ("j", "a", POST, 2)],
            [("k", "a", "delete", 2), ("j", "a", "upsert", 2)],
            id="an_update_of_the_key_itself",
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
        # --- writes that leave the row as it was (issue 36) ---
        pytest.param([("k", "a", PRE, 2), ("k", "a", POST, 2)], [], id="a_rewrite_is_no_change"),
        pytest.param([("k", None, PRE, 2), ("k", None, POST, 2)], [], id="null_values_are_equal"),
        pytest.param(
            [*UPDATE_CHAIN, ("k", "c", PRE, 4), ("k", "c", POST, 4)],
            [("k", "c", "upsert", 3)],
            id="a_rewrite_keeps_the_version_of_the_last_change",
        ),
        pytest.param([("k", "a", DEL, 2), ("k", "a", INS, 2)], [], id="an_overwrite_that_keeps_the_row"),
        # The row was gone at version 2: a batch ending there would have deleted it.
        pytest.param(
            [("k", "a", DEL, 2), ("k", "a", INS, 3)],
            [("k", "a", "upsert", 3)],
            id="delete_then_equal_reinsert",
        ),
        pytest.param(
            [("k", "a", PRE, 2), ("k", "a", POST, 2), ("k", "a", DEL, 3)],
            [("k", "a", "delete", 3)],
            id="a_rewrite_then_a_delete",
        ),
        pytest.param(
            [("x", "1", PRE, 2), ("x", "1", POST, 2), ("y", "1", PRE, 2), ("y", "2", POST, 2)],
            [("y", "2", "upsert", 2)],
            id="one_commit_rewrites_one_key_and_changes_another",
        ),
    ],
)
def test_each_key_nets_to_its_last_change(spark, changes, net):
    result = net_changes(feed(spark, changes), ("id",))

    assert result.columns == ["id", "v", "_lj_change", "_commit_version", "_lj_before"]
    assert rows(result, "id", "v", "_lj_change", "_commit_version") == ordered(net)
    # The driver's rule for a range read there (net_rows) gives the same rows, and the same
    # row before the range.
    on_driver = net_rows(arrow_feed(changes), ("id",))
    assert ordered((r["id"], r["v"], r["_lj_change"], r["_commit_version"]) for r in on_driver) == ordered(
        net
    )
    assert {r["id"]: r["_lj_before"] for r in on_driver} == {
        r["id"]: r["_lj_before"].asDict() if r["_lj_before"] else None for r in result.collect()
    }
    # The oracles' model of the rule says the same (tests/content.py).
    model = last_changes(
        [dict(zip(("id", "v", "_change_type", "_commit_version"), c, strict=True)) for c in changes], "id"
    )
    assert {(k, "upsert" if row else "delete", n) for k, (n, row) in model.items()} == {
        (k, change, n) for k, _, change, n in net
    }


@pytest.mark.parametrize(
    ("changes", "before"),
    [
        pytest.param(UPDATE_CHAIN, {"k": None}, id="inserted_in_the_range"),
        pytest.param(UPDATE_CHAIN[1:][::-1], {"k": "a"}, id="updated_in_any_order"),
        pytest.param([("k", "a", DEL, 5)], {"k": "a"}, id="deleted"),
        pytest.param([("k", "b", INS, 2), ("k", "a", DEL, 2)], {"k": "a"}, id="overwritten"),
        pytest.param(
            [("k", "a", PRE, 2), ("k", "a", POST, 2), ("k", "a", PRE, 3), ("k", "b", POST, 3)],
            {"k": "a"},
            id="rewritten_then_changed",
        ),
        pytest.param([("k", "a", DEL, 2), ("k", "a", INS, 3)], {"k": "a"}, id="deleted_then_put_back"),
        pytest.param([("k", "a", INS, 2), ("k", "a", DEL, 3)], {"k": None}, id="born_and_gone"),
    ],
)
def test_a_net_change_keeps_the_keys_row_before_the_range(spark, changes, before):
    """What the write's old rows are derived from (views/joins.previous_rows): the row the
    range's first write of the key found, none when that write inserted it."""
    result = net_changes(feed(spark, changes), ("id",))

    found = {r["id"]: r["_lj_before"]["v"] if r["_lj_before"] else None for r in result.collect()}
    assert found == before
    assert rows(before_rows(result)) == ordered((k, v) for k, v in before.items() if v is not None)


def test_a_rewrite_of_a_map_column_is_no_change_and_a_changed_map_is(spark):
    """Spark does not compare maps: they are compared as their JSON text."""
    schema = "id string, m map<string,int>, " + FEED.split(", ", 2)[2]
    changes = [
        ("a", {"x": 1}, PRE, 2, None),
        ("a", {"x": 1}, POST, 2, None),
        ("b", {"x": 1}, PRE, 2, None),
        ("b", {"x": 2}, POST, 2, None),
    ]

    result = net_changes(spark.createDataFrame(changes, schema), ("id",))

    assert rows(result, "id", "_lj_change", "_commit_version") == [("b", "upsert", 2)]
    import pyarrow as pa

    maps = [(k, list(m.items()), kind, n) for k, m, kind, n, _ in changes]
    on_driver = net_rows(arrow_feed(maps, pa.map_(pa.string(), pa.int32())), ("id",))
    assert [(r["id"], r["_lj_change"], r["_commit_version"]) for r in on_driver] == [("b", "upsert", 2)]


def test_the_upserts_of_a_net_change_are_the_rows_that_exist_at_the_pin(spark):
    net = net_changes(feed(spark, [("a", "1", INS, 1), ("b", "1", INS, 1), ("a", "1", DEL, 2)]), ("id",))

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
        ("_lj_before", "struct<id:string,v:string>"),
    ]
    assert rows(empty) == []
