"""A batch's page names the write that made its output commit (sink/strategy.py), from its
report's "write", next to its mode; a report written before issue 53 has none and gets no row.
No Spark: the report is a dict."""

from __future__ import annotations

import pytest

from lakejoin.quality.report_pages import batch_page

pytestmark = pytest.mark.unit

REPORT = {
    "pipeline": "shop",
    "view": "display_products",
    "kind": "fk_join",
    "batch_id": 3,
    "mode": "incremental",
    "checked_at": "2026-12-07T03:00:00",
    "success": True,
    "checks": [],
    "start_versions": {"products": 1},
    "pinned_versions": {"products": 2},
    "metrics": {"inserted": 1},
}


@pytest.mark.parametrize(("write", "row"), [("upsert", True), (None, False)])
def test_a_batch_page_says_which_write_made_the_batch(write, row):
    report = {**REPORT, **({"write": write} if write else {})}

    page = batch_page(report, None)

    assert ("<td>write</td><td>upsert</td>" in page) is row
    assert "<td>mode</td><td>incremental</td>" in page
