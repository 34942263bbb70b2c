"""Join health (issue 40): an fk_join counts its left rows without a right row and with a null
fk in the batch's own jobs, keeps the view's totals from batch to batch (the last total plus the
affected keys' difference), knows how long the oldest row has waited and which rows arrived
late, and holds the spec's limits."""

from __future__ import annotations

import pytest

from lakejoin.errors import QualityCheckError
from lakejoin.quality.health import Health
from lakejoin.quality.reports import reports_root
from tests.lakehouse import MERCHANTS, PRODUCTS, Lakehouse

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
    spec = lake.spec(how)

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
    folder = reports_root(spec) / VIEW
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
