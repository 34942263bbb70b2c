"""Join health (issue 40): an fk_join counts its left rows without a right row and with a null
fk in the batch's own jobs, keeps the view's totals from batch to batch (the last total plus the
affected keys' difference), knows how long the oldest row has waited and which rows arrived
late, and holds the spec's limits. A list_join's list carried from the output keeps its missing
elements; a rekey's conflict resolved arrives late; a rekey's masters without a derived key are
counted from the master's changes."""

from __future__ import annotations

import pytest

from lakejoin.errors import QualityCheckError
from lakejoin.quality.health import Health
from lakejoin.spec.layout import reports_folder
from tests.lakehouse import (
    ADDRESSES,
    MASTERS,
    MERCHANTS,
    PERSONS,
    PRODUCTS,
    Lakehouse,
    found_by_spark,
    health_recount,
    write_spec,
)

pytestmark = pytest.mark.scenario

VIEW = "display_products"


def counted(lake: Lakehouse) -> dict[str, int]:
    """The health a from-scratch count of the current tables gives."""
    merchants = {
        r["merchant_id"] for r in lake.spark.read.format("delta").load(lake.path("merchants")).collect()
    }
    products = lake.spark.read.format("delta").load(lake.path("products")).collect()
    return {
        "missing_right": sum(
            p["merchant_id"] is not None and p["merchant_id"] not in merchants for p in products
        ),
        "null_fk": sum(p["merchant_id"] is None for p in products),
        "rows": len(products),
    }


def health_of(summary) -> Health:  # noqa: ANN001 - a BatchSummary
    found = Health.from_metrics(summary.metrics())
    assert found is not None, summary.metrics()
    return found


@pytest.mark.parametrize("how", ["left", "inner"])
def test_health_counts_equal_a_recount_after_every_batch_and_waiting_rows_age(lake, how):
    lake.create("merchants", MERCHANTS, [("m1", "Acme", "a.png")])
    lake.create(
        "products",
        PRODUCTS,
        [("p1", "pen", 1.0, "m1"), ("p2", "cup", 2.0, "m9"), ("p3", "lid", 3.0, None)],
    )
    spec = lake.spec(how, audit=None)  # the page shows the audit's coverage

    def batch() -> Health:
        summary = lake.run(spec)
        assert summary.outcome.value == "committed"
        health = health_of(summary)
        truth = counted(lake)
        assert (dict(health.totals), health.rows) == (
            {"missing_right": truth["missing_right"], "null_fk": truth["null_fk"]},
            truth["rows"],
        )
        assert lake.output(spec) == lake.expected(spec)
        return health

    first = batch()  # p2 waits for m9 from batch 1
    assert (first.waiting_batches, first.late) == (0, 0)

    lake.upsert("products", "product_id", [("p4", "hat", 4.0, "m8"), ("p1", "pen", 1.0, "m7")])
    second = batch()
    assert (second.totals["missing_right"], second.waiting_batches, second.late) == (3, 1, 0)

    lake.upsert("merchants", "merchant_id", [("m9", "Nine", "n.png")])
    lake.upsert("products", "product_id", [("p3", "lid", 3.0, "m1")])
    third = batch()  # p2 arrived late; p1 and p4 still wait (since batch 2)
    assert (third.totals, third.waiting_batches, third.late) == ({"missing_right": 2, "null_fk": 0}, 1, 1)

    lake.delete("products", "product_id", ["p4"])  # a waiting row deleted: gone, not late
    fourth = batch()
    assert (fourth.totals["missing_right"], fourth.waiting_batches, fourth.late) == (1, 2, 0)

    refreshed = health_of(lake.run(spec, full_refresh=True))  # counts every key; p1 keeps its since
    assert (refreshed.totals["missing_right"], refreshed.waiting_batches) == (1, 3)

    # The view's page says it, with the audit's coverage, and plots the totals over the batches.
    folder = reports_folder(spec, VIEW)
    page = (folder / "index.html").read_text(encoding="utf-8")
    assert "<b>join health</b>: missing_right 1, null_fk 0 of 3 rows; oldest waiting 3 batches" in page
    assert "<b>audit</b>: every key checked within the last 1 batches; last difference: none" in page
    assert "join health (rows)" in (folder / "trends.svg").read_text(encoding="utf-8")


def test_a_fail_limit_stops_the_batch_before_its_commit_and_a_warn_limit_is_a_note(lake):
    lake.create("merchants", MERCHANTS, [("m1", "Acme", "a.png")])
    lake.create("products", PRODUCTS, [("p1", "pen", 1.0, "m1"), ("p2", "cup", 2.0, None)])
    limits = (
        "    health:\n      missing_right: {max_rows: 1, on_breach: fail}\n      null_fk: {max_share: 0.2}\n"
    )
    spec = lake.spec("left", extra=limits)
    summary = lake.run(spec)
    assert summary.notes["health null_fk"] == "null_fk: 1 rows (50 % of 2), over max_share 0.2"

    before = lake.output(spec)
    lake.upsert("products", "product_id", [("p3", "hat", 3.0, "m8"), ("p4", "box", 4.0, "m9")])
    with pytest.raises(QualityCheckError) as raised:
        lake.run(spec)
    said = raised.value.what
    assert "join_health: expect_column_values_to_be_between(column='missing_right', max_value=1.0)" in said
    assert said.endswith("(missing_right: 2 rows (50 % of 4), over max_rows 1 (e.g. 'p3', 'p4'))")
    assert lake.output(spec) == before  # nothing committed

    lake.upsert("merchants", "merchant_id", [("m8", "Eight", "e.png")])  # one left: within the limit
    assert lake.run(spec).outcome.value == "committed"
    assert lake.output(spec) == lake.expected(spec)


@pytest.mark.parametrize("literals", [True, False], ids=["literals", "broadcast"])
def test_a_carried_list_keeps_its_missing_elements_and_a_resolved_conflict_arrives_late(
    lake, monkeypatch, literals
):
    """`literals`: the materialising job tests its rows against the flagged keys as literals;
    else it joins them by broadcast (above `LITERALS` keys)."""
    from lakejoin.engine import health

    if not literals:
        monkeypatch.setattr(health, "LITERALS", 0)
    lake.create("persons", PERSONS, [("P1", "Ada", ["a1", "a9"]), ("P2", "Bob", ["a1"])])
    lake.create("addresses", ADDRESSES, [("a1", "1 Elm", "Oslo")])
    lake.create(
        "merchants",
        MASTERS,
        [("m1", "Bolt", "NO", "b.png"), ("m2", "Bolt", "SE", "c.png"), ("m3", None, "DK", "d.png")],
    )
    views = """\
  person_addresses:
    list_join: {left: persons, list: address_ids, right: addresses, into: addresses, fanout_threshold: 1.0}
  merchants_by_name:
    rekey: {source: merchants, key: display_name, columns: [country], on_conflict: latest}
"""
    spec = write_spec(
        lake, {"persons": "person_id", "addresses": "address_id", "merchants": "merchant_id"}, views
    )

    def batch(view: str) -> Health:
        summary = lake.run(spec, view)
        assert summary.outcome.value == "committed", summary.reason
        recount = health_recount(lake, spec, view)
        assert recount["logged"] == recount["counted"]
        return health_of(summary)

    lists, names = batch("person_addresses"), batch("merchants_by_name")
    assert (lists.totals, lists.waiting_batches) == ({"missing_elements": 1, "lists_with_missing": 1}, 0)
    assert (names.totals, names.waiting_batches) == ({"conflicts": 1, "null_keys": 1}, 0)

    # P1 renamed, its list as it was: carried from the output (a batch Spark finds), it keeps its
    # missing a9 and its age.
    lake.upsert("persons", "person_id", [("P1", "Ada Lovelace", ["a1", "a9"])])
    with found_by_spark(lake.spark):
        carried = lake.run(spec, "person_addresses")
    assert carried.metrics()["left_rows_carried"] == 1
    assert (health_of(carried).totals["missing_elements"], health_of(carried).waiting_batches) == (1, 1)
    # m2 renamed: 'Bolt' is m1's alone, the conflict resolved; m3 deleted: no master without a name.
    lake.upsert("merchants", "merchant_id", [("m2", "Cog", "SE", "c.png")])
    lake.delete("merchants", "merchant_id", ["m3"])
    names = batch("merchants_by_name")
    assert (names.totals, names.late, names.waiting_batches) == ({"conflicts": 0, "null_keys": 0}, 1, None)

    lake.upsert("addresses", "address_id", [("a9", "9 Ash", "Oslo")])  # a9 arrives: P1 was late
    lists = batch("person_addresses")
    assert (lists.totals, lists.late, lists.waiting_batches) == (
        {"missing_elements": 0, "lists_with_missing": 0},
        1,
        None,
    )
