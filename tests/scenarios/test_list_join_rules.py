"""Truth tables of list_join on real Delta tables (DESIGN §1, issue 3).

Each batch below exercises several rules at once on different persons, so a few batches cover
every rule. After every batch the output must equal the plain-Python oracle at the pinned
versions, and the output's change feed must name exactly the persons the rules say changed.
"""

from __future__ import annotations

from typing import Any

import pytest
from deltalake import DeltaTable

from lakejoin.spec.layout import state_path
from tests.lakehouse import (
    ADDRESSES,
    PERSONS,
    fanout,
    found_by_spark,
    list_join_oracle,
    output_rows,
    run_and_watch,
    write_spec,
)

pytestmark = pytest.mark.scenario

VIEW = "person_addresses"


def spec_of(lake, duplicates: str = "keep", right_columns: str = "[street]", fanout: float = 1.0):
    """The rules below are about routing: on these tiny tables any right change reaches more
    than the default 20 % of the persons, so the fan-out fallback is off unless asked for (and then
    the share alone decides: no floor of rows)."""
    views = f"""\
  {VIEW}:
    list_join: {{left: persons, list: address_ids, right: addresses, into: addresses,
                duplicates: {duplicates}, right_columns: {right_columns}, fanout_threshold: {fanout},
                fanout_min_rows: 0}}
"""
    return write_spec(lake, {"persons": "person_id", "addresses": "address_id"}, views)


def run(lake, spec, **kwargs: Any):
    """One batch; returns its summary and the persons whose output rows changed, by change type."""
    summary, rows = run_and_watch(lake, spec, VIEW, **kwargs)
    changed: dict[str, set[str]] = {}
    for r in rows:
        changed.setdefault(r["_change_type"], set()).add(r["person_id"])
    assert output_rows(lake, spec, VIEW) == list_join_oracle(lake, spec, VIEW)
    return summary, changed


def lists(lake, spec) -> dict[str, list[tuple[str, str | None]]]:
    """person -> [(address_id, street), ...] as the output holds it."""
    return {
        r["person_id"]: [(e["address_id"], e["street"]) for e in r["addresses"]]
        for r in output_rows(lake, spec, VIEW)
    }


def test_list_join_rules_under_keep(lake):
    lake.create(
        "addresses",
        ADDRESSES,
        [("a1", "1 Elm", "Oslo"), ("a2", "2 Oak", "Oslo"), ("a3", "3 Ash", "Bergen")],
    )
    lake.create(
        "persons",
        PERSONS,
        [
            ("P1", "Ada", ["a3", "a1", "a2"]),  # list order is kept, not key order
            ("P2", "Bob", ["a2", "a9"]),  # a9 has no address yet: kept with nulls
            ("P3", "Cy", []),  # an empty list still gives a row
            ("P4", "Di", None),  # so does a null list
            ("P5", "Ed", ["a1", "a1", "a2"]),  # keep: every occurrence
            ("P6", "Flo", ["a3"]),
        ],
    )
    spec = spec_of(lake)
    summary, _ = run(lake, spec)
    # A recompute counts no composite rows: a count only for a metric would be a second scan.
    assert "composite_rows_rebuilt" not in summary.metrics()
    assert lists(lake, spec) == {
        "P1": [("a3", "3 Ash"), ("a1", "1 Elm"), ("a2", "2 Oak")],
        "P2": [("a2", "2 Oak"), ("a9", None)],
        "P3": [],
        "P4": [],
        "P5": [("a1", "1 Elm"), ("a1", "1 Elm"), ("a2", "2 Oak")],
        "P6": [("a3", "3 Ash")],
    }

    # A right update reaches every list holding that key, and only those; a right insert fills
    # the element that waited for it; a list that gains an element is re-joined.
    lake.upsert("addresses", "address_id", [("a1", "1 Elm St", "Oslo"), ("a9", "9 Yew", "Oslo")])
    lake.upsert("persons", "person_id", [("P3", "Cy", ["a3"])])
    summary, changed = run(lake, spec)
    assert changed == {"update_postimage": {"P1", "P2", "P3", "P5"}}
    after = lists(lake, spec)
    assert after["P1"] == [("a3", "3 Ash"), ("a1", "1 Elm St"), ("a2", "2 Oak")]
    assert after["P2"] == [("a2", "2 Oak"), ("a9", "9 Yew")]
    assert after["P3"] == [("a3", "3 Ash")]
    assert after["P5"] == [("a1", "1 Elm St"), ("a1", "1 Elm St"), ("a2", "2 Oak")]

    # A right delete nulls that element everywhere; a left delete deletes the row; a change to
    # other columns is carried through without re-joining (in a batch of many keys, which Spark
    # finds); a reorder is a list change.
    lake.delete("addresses", "address_id", ["a2"])
    lake.delete("persons", "person_id", ["P4"])
    lake.upsert("persons", "person_id", [("P6", "Flora", ["a3"]), ("P5", "Ed", ["a2", "a1", "a1"])])
    with found_by_spark(lake.spark):
        summary, changed = run(lake, spec)
    assert changed == {"update_postimage": {"P1", "P2", "P5", "P6"}, "delete": {"P4"}}
    metrics = summary.metrics()
    assert metrics["left_rows_carried"] == 1  # P6: only its name changed
    assert metrics["composite_rows_rebuilt"] == 3 + 2 + 3  # P1, P2, P5; none of P6's
    after = lists(lake, spec)
    assert "P4" not in after
    assert after["P1"] == [("a3", "3 Ash"), ("a1", "1 Elm St"), ("a2", None)]
    assert after["P2"] == [("a2", None), ("a9", "9 Yew")]
    assert after["P5"] == [("a2", None), ("a1", "1 Elm St"), ("a1", "1 Elm St")]
    assert {r["person_id"]: r["name"] for r in output_rows(lake, spec, VIEW)}["P6"] == "Flora"

    # A re-insert fills the element again, everywhere; nothing else is written.
    lake.upsert("addresses", "address_id", [("a2", "2 Oak Rd", "Oslo")])
    summary, changed = run(lake, spec)
    assert changed == {"update_postimage": {"P1", "P2", "P5"}}
    assert lists(lake, spec)["P2"] == [("a2", "2 Oak Rd"), ("a9", "9 Yew")]
    assert summary.unchanged_skipped == 0


def test_duplicates_drop_keeps_the_first_occurrence_and_long_lists_work(lake):
    lake.create("addresses", ADDRESSES, [(f"a{i}", f"{i} Main", "Oslo") for i in range(0, 3000, 2)])
    long_list = [f"a{i}" for i in reversed(range(3000))]  # 3000 elements, half of them unmatched
    lake.create(
        "persons",
        PERSONS,
        [("P1", "Ada", ["a2", "a4", "a2", "a6", "a4"]), ("P2", "Bob", long_list), ("P3", "Cy", ["a8"])],
    )
    spec = spec_of(lake, duplicates="drop")
    run(lake, spec)
    after = lists(lake, spec)
    assert after["P1"] == [("a2", "2 Main"), ("a4", "4 Main"), ("a6", "6 Main")]
    assert [e for e, _ in after["P2"]] == long_list
    assert after["P2"][0] == ("a2999", None) and after["P2"][1] == ("a2998", "2998 Main")

    # Under drop, removing a duplicate changes nothing; a reorder does. One address in the middle
    # of the long list changes: only the lists holding it are rewritten.
    lake.upsert("persons", "person_id", [("P1", "Ada", ["a2", "a4", "a6"]), ("P3", "Cy", ["a8", "a8", "a6"])])
    lake.upsert("addresses", "address_id", [("a1500", "1500 Main St", "Oslo")])
    with found_by_spark(lake.spark):
        summary, changed = run(lake, spec)
    assert changed == {"update_postimage": {"P2", "P3"}}
    assert summary.metrics()["left_rows_carried"] == 1  # P1: same list once duplicates are dropped
    after = lists(lake, spec)
    assert after["P3"] == [("a8", "8 Main"), ("a6", "6 Main")]
    assert after["P2"][1499] == ("a1500", "1500 Main St")


def test_a_popular_element_falls_back_to_a_full_recompute_with_the_same_result(lake):
    """An element held by many lists (a popular tag) reaches a large share of the output; above
    `fanout_threshold` of the left rows the batch recomputes the whole view (then MERGEs only
    what changed), and later batches still find the lists that hold an element."""
    lake.create(
        "addresses", ADDRESSES, [("a1", "1 Elm", "Oslo"), ("a2", "2 Oak", "Oslo"), ("a3", "3 Ash", None)]
    )
    holders = [["a1", "a3"]] * 6 + [["a2"]] * 2 + [["a3"]] * 2
    lake.create("persons", PERSONS, [(f"P{i}", f"n{i}", ids) for i, ids in enumerate(holders)])
    spec = spec_of(lake, fanout=0.35)
    run(lake, spec)

    # 2 of 10 lists reached: within 35 %, incremental.
    lake.upsert("addresses", "address_id", [("a2", "2 Oak Rd", "Oslo")])
    summary, changed = run(lake, spec)
    assert fanout(summary) == (0, 2, 200)
    assert summary.notes["strategy"] == (
        "incremental: the changed right keys reach 2 of 10 left rows (20.0%), "
        "within the fan-out threshold of 35%"
    )
    assert changed == {"update_postimage": {"P6", "P7"}}

    # a1 is on 6 of 10 lists: above 35 %, the whole view is recomputed, yet only the lists
    # holding a1 are written, and a left change in the same batch is not lost.
    lake.upsert("addresses", "address_id", [("a1", "1 Elm St", "Oslo")])
    lake.upsert("persons", "person_id", [("P9", "n9", ["a2", "a3"])])
    summary, changed = run(lake, spec)
    assert fanout(summary) == (1, 6, 600)
    assert summary.notes["strategy"].startswith("full recompute: the changed right keys reach 6 of 10")
    assert summary.recomputed_rows == 10 and summary.unchanged_skipped == 3
    assert changed == {"update_postimage": {"P0", "P1", "P2", "P3", "P4", "P5", "P9"}}
    assert lists(lake, spec)["P0"] == [("a1", "1 Elm St"), ("a3", "3 Ash")]

    # The lists that hold an element are read from the pinned left table (no state table): a
    # later change to an element on three lists (30 %), one of which just gained it, is
    # incremental and reaches exactly those.
    lake.upsert("addresses", "address_id", [("a2", "2 Oak Ave", "Oslo")])
    summary, changed = run(lake, spec)
    assert fanout(summary) == (0, 3, 300)
    assert changed == {"update_postimage": {"P6", "P7", "P9"}}
    assert not DeltaTable.is_deltatable(state_path(spec, spec.views[VIEW]))


def test_a_batch_of_few_keys_re_joins_a_list_as_it_was_to_the_same_row(lake):
    """A batch the driver finds re-joins every affected list, one whose list is as it was
    included (no read of the output to carry it): the row is the same, only its other columns
    change."""
    lake.create("addresses", ADDRESSES, [("a1", "1 Elm", "Oslo"), ("a2", "2 Oak", "Oslo")])
    lake.create("persons", PERSONS, [("P1", "Ann", ["a2", "a1"]), ("P2", "Bob", ["a1"])])
    spec = spec_of(lake)
    run(lake, spec)

    lake.upsert("persons", "person_id", [("P1", "Ann Lee", ["a2", "a1"])])
    summary, changed = run(lake, spec)

    assert changed == {"update_postimage": {"P1"}}
    assert (summary.metrics()["left_rows_carried"], summary.metrics()["composite_rows_rebuilt"]) == (0, 2)
    assert lists(lake, spec)["P1"] == [("a2", "2 Oak"), ("a1", "1 Elm")]
