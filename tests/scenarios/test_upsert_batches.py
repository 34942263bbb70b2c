"""Batches written by the one-commit upsert (issue 37): an fk_join whose affected keys' old rows
come from its inputs at the previous pins, not from its output. Each batch ends equal to the
from-scratch oracle; the output's change feed holds only the keys whose row changed; and where
the upsert cannot write the output (row tracking, another Delta, an output someone edited) the
public MERGE writes it, with a note saying so."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.lakehouse import MERCHANTS, PRODUCTS, found_by_spark

pytestmark = pytest.mark.scenario

VIEW = "display_products"
ACME, BOLT = ("m1", "Acme", "a.png"), ("m2", "Bolt", "b.png")
PRODUCT_ROWS = [
    ("p1", "pen", 1.0, "m1"),
    ("p2", "cup", 2.0, "m1"),
    ("p3", "ink", 3.0, "m2"),
    ("p4", "mug", 4.0, None),
]


@contextmanager
def many_keys(spark) -> Iterator[None]:
    """Batches written as a batch of many keys into a large output is: the driver's MERGE,
    which takes a handful of keys into a small table, is off."""
    from lakejoin.sink import driver_merge

    spark.conf.set(driver_merge.MAX_KEYS, "0")
    try:
        yield
    finally:
        spark.conf.unset(driver_merge.MAX_KEYS)


def written_by(lake, spec, view: str = VIEW) -> str | None:
    """Which write made the output's newest commit: the upsert tags its commits."""
    from deltalake import DeltaTable

    from lakejoin.sink.key_upsert import TAG, TAG_VALUE

    info = DeltaTable(spec.views[view].path).history(1)[0]
    return TAG_VALUE if (info.get("tags") or {}).get(TAG) == TAG_VALUE else str(info.get("operation"))


def changes_of(lake, spec, version: int) -> list[tuple[str, str]]:
    return sorted((r["product_id"], r["_change_type"]) for r in lake.output_changes(spec, version))


def merged_with_a_note(lake, spec) -> str:
    """Run a batch of many keys that the upsert declines: the public MERGE writes it, exact;
    the batch's note on its output."""
    with many_keys(lake.spark):
        summary = lake.run(spec)
    assert lake.output(spec) == lake.expected(spec)
    assert written_by(lake, spec) == "MERGE"
    return summary.notes["output"]


def shop(lake):
    lake.create("merchants", MERCHANTS, [ACME, BOLT])
    lake.create("products", PRODUCTS, PRODUCT_ROWS)
    spec = lake.spec("left", right_columns="[display_name]")
    lake.run(spec)  # the first batch: a full build
    return spec


def test_an_incremental_batch_writes_only_the_rows_that_changed(lake):
    """A right change in a column the view does not carry reaches p1 and p2 but changes neither
    row; an fk move, a delete and an insert do change theirs: one commit by the upsert, whose
    change rows are those of the three keys, and the output equals the oracle."""
    spec = shop(lake)
    lake.upsert("merchants", "merchant_id", [("m1", "Acme", "new-logo.png")])
    lake.upsert("products", "product_id", [("p3", "ink", 3.0, "m1"), ("p5", "box", 5.0, "m2")])
    lake.delete("products", "product_id", ["p4"])

    with many_keys(lake.spark):
        summary = lake.run(spec)

    assert lake.output(spec) == lake.expected(spec)
    assert written_by(lake, spec) == "key_upsert"
    assert summary.output_version is not None
    assert changes_of(lake, spec, summary.output_version) == [
        ("p3", "update_postimage"),
        ("p3", "update_preimage"),
        ("p4", "delete"),
        ("p5", "insert"),
    ]
    assert (summary.inserted, summary.updated, summary.deleted) == (1, 1, 1)
    assert summary.affected_keys == 5  # p1 and p2 (reached by m1), p3, p4, p5
    assert "output" not in summary.notes


def test_a_right_delete_and_its_return_follow_the_rows_that_referenced_it(lake):
    """A right row deleted, then back: the rows that reference it lose and regain its columns,
    each batch one upsert commit, exact after each."""
    spec = shop(lake)
    with many_keys(lake.spark):
        lake.delete("merchants", "merchant_id", ["m2"])
        gone = lake.run(spec)
        assert lake.output(spec) == lake.expected(spec)
        assert changes_of(lake, spec, gone.output_version) == [
            ("p3", "update_postimage"),
            ("p3", "update_preimage"),
        ]
        lake.upsert("merchants", "merchant_id", [("m2", "Bolt 2", "b.png")])
        back = lake.run(spec)
    assert lake.output(spec) == lake.expected(spec)
    assert written_by(lake, spec) == "key_upsert"
    assert changes_of(lake, spec, back.output_version) == [
        ("p3", "update_postimage"),
        ("p3", "update_preimage"),
    ]


def test_an_output_with_row_tracking_is_written_by_the_public_merge(lake):
    spec = shop(lake)
    path = spec.views[VIEW].path
    lake.spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    lake.upsert("products", "product_id", [("p1", "pen", 9.0, "m2")])

    note = merged_with_a_note(lake, spec)
    assert "row ids" in note and "public MERGE" in note


def test_a_delta_without_the_classes_takes_the_public_merge(lake, monkeypatch):
    from lakejoin.sink import key_upsert_jvm

    spec = shop(lake)
    monkeypatch.setattr(key_upsert_jvm, "_CHECKED", [])
    monkeypatch.setattr(key_upsert_jvm, "DELTA_VERSION", "9.9.9")
    lake.upsert("products", "product_id", [("p1", "pen", 9.0, "m2")])

    assert "built for 9.9.9" in merged_with_a_note(lake, spec)


def test_an_output_that_drifted_is_mended_by_the_public_merge(lake):
    """The old rows are derived from the inputs, so an output that lost a row in a way its log
    does not show (someone's plain DELETE shows, and recomputes the view) does not hold them:
    the upsert finds that before it commits, and the public MERGE, which reads the output,
    writes the batch; the output is exact again for the keys the batch touched."""
    from tests.lakehouse import drift

    spec = shop(lake)
    drift(spec.views[VIEW].path, "product_id = 'p1'")
    lake.upsert("products", "product_id", [("p1", "pen", 9.0, "m2")])

    assert "not the batch's old rows" in merged_with_a_note(lake, spec)


@pytest.mark.parametrize("mode", ["propagate", "lookup"])
def test_enrich_batches_are_written_by_the_upsert_in_both_modes(lake, mode):
    """propagate: the output is what its inputs give at the pins, so the old rows are derived.
    lookup keeps each fact as the batch that last wrote it enriched it, which no input holds:
    the batch reads the affected keys' old rows from the output. The upsert writes both."""
    from tests.lakehouse import enrich_oracle, output_rows
    from tests.scenarios.test_enrich_rules import VIEW as ENRICHED
    from tests.scenarios.test_enrich_rules import create_tables, spec_of

    create_tables(lake)
    # propagate: no full recompute when a change reaches 2 of the 4 facts
    spec = spec_of(lake, mode, "\n      fanout_threshold: 1.0" if mode == "propagate" else "")
    lake.run(spec, ENRICHED)
    lake.upsert("customers", "customer_id", [("c1", "Anna", "NO")])
    lake.upsert("purchases", "purchase_id", [("o2", "c2", "p2", 5)])

    with many_keys(lake.spark):
        summary = lake.run(spec, ENRICHED)

    rows = {r["purchase_id"]: r for r in output_rows(lake, spec, ENRICHED)}
    if mode == "propagate":
        assert list(rows.values()) == enrich_oracle(lake, spec, ENRICHED)
    else:  # o1 keeps the name its batch found; o2, rewritten, takes c2's
        assert (rows["o1"]["customer_name"], rows["o2"]["customer_name"]) == ("Ann", "Ben")
    assert written_by(lake, spec, ENRICHED) == "key_upsert"
    assert summary.outcome.value == "committed" and "output" not in summary.notes


def test_list_join_batches_are_written_by_the_upsert_from_their_previous_lists(lake):
    """A right update reaches the lists holding it; a list that changed is re-joined; a row
    whose other columns changed keeps its list (carried): the previous rows of all three are
    derived, and the upsert's change rows are those of the rows that changed."""
    from tests.lakehouse import ADDRESSES, PERSONS
    from tests.scenarios import test_list_join_rules as rules

    lake.create("addresses", ADDRESSES, [("a1", "1 Elm", "Oslo"), ("a2", "2 Oak", "Oslo")])
    people = [("P1", "Ada", ["a2", "a1"]), ("P2", "Bob", ["a2"]), ("P3", "Cy", ["a1"]), ("P4", "Di", [])]
    lake.create("persons", PERSONS, people)
    spec = rules.spec_of(lake)
    rules.run(lake, spec)
    lake.upsert("addresses", "address_id", [("a1", "1 Elm St", "Oslo")])
    lake.upsert(
        "persons", "person_id", [("P2", "Bob", ["a2", "a9"]), ("P4", "Dina", []), ("P5", "Eve", None)]
    )
    lake.delete("persons", "person_id", ["P3"])

    with many_keys(lake.spark), found_by_spark(lake.spark):
        summary, changed = rules.run(lake, spec)  # asserts the output equals the oracle

    assert written_by(lake, spec, rules.VIEW) == "key_upsert"
    assert changed == {  # the helper leaves the pre-images out
        "update_postimage": {"P1", "P2", "P4"},
        "delete": {"P3"},
        "insert": {"P5"},
    }
    assert summary.metrics()["left_rows_carried"] == 1  # P4: its name only


def test_rekey_batches_are_written_by_the_upsert_from_their_index(lake):
    """latest: a master taking a key another holds wins it; the winner's leaving hands the key
    back. The previous rows come from the index at its pin, and the upsert writes the keys
    whose row changed."""
    from tests.lakehouse import MASTERS
    from tests.scenarios import test_rekey_rules as rules

    lake.create("merchants", MASTERS, [("m1", "Acme", "NO", "a.png"), ("m2", "Bolt", "SE", "b.png")])
    spec = rules.spec_of(lake, ", on_conflict: latest")
    rules.run(lake, spec)
    lake.upsert("merchants", "merchant_id", [("m3", "Acme", "DK", "c.png"), ("m2", "Cord", "SE", "b.png")])

    with many_keys(lake.spark):
        _, changed = rules.run(lake, spec)  # asserts the output equals the oracle
        assert written_by(lake, spec, rules.VIEW) == "key_upsert"
        assert changed == {  # the helper leaves the pre-images out
            ("update_postimage", "Acme", "m3"),
            ("delete", "Bolt", "m2"),
            ("insert", "Cord", "m2"),
        }
        lake.delete("merchants", "merchant_id", ["m3"])
        _, changed = rules.run(lake, spec)
    assert written_by(lake, spec, rules.VIEW) == "key_upsert"
    assert changed == {("update_postimage", "Acme", "m1")}
