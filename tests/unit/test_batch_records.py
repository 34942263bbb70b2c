"""A batch's records and texts without Spark: the newest record of a status, the figures a batch
hands Airflow, the error an unreadable change range becomes, and the line numbers of a spec."""

from __future__ import annotations

import pytest

from lakejoin.delta.change_feed import translate_read_error
from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus, last_of
from lakejoin.engine.batch import BatchOutcome, BatchSummary
from lakejoin.errors import ChangesUnreadableError, SpecError
from lakejoin.spec.yaml_lines import SpecReader, compose_with_lines

pytestmark = pytest.mark.unit

C, A = BatchStatus.COMMITTED, BatchStatus.ABANDONED


def record(batch_id: int, status: BatchStatus) -> BatchRecord:
    return BatchRecord("v", batch_id, status, BatchMode.INCREMENTAL, {}, {})


@pytest.mark.parametrize(
    ("statuses", "wanted", "found"),
    [
        ([], None, None),
        ([C, A], None, 2),
        ([C, A], C, 1),
        ([C, A, C, A], C, 3),
        ([C], A, None),
    ],
)
def test_the_last_record_of_a_status_is_the_newest_of_them(statuses, wanted, found):
    records = [record(i + 1, s) for i, s in enumerate(statuses)]

    last = last_of(records, wanted)

    assert (last.batch_id if last else None) == found


def test_a_batch_hands_its_figures_as_plain_numbers():
    summary = BatchSummary(
        "display_products",
        BatchOutcome.COMMITTED,
        batch_id=4,
        pinned_versions={"products": 9},
        changed_keys={"products": 3, "merchants": 0},
        affected_keys=5,
        inserted=1,
        updated=2,
        deleted=1,
        phase_seconds={"plan": 0.25},
        kind_metrics={"fanout_facts": 2},
    )

    assert summary.figures() == {
        "view": "display_products",
        "outcome": "committed",
        "batch_id": 4,
        "pinned_versions": {"products": 9},
        "metrics": {
            "changed_keys.products": 3,
            "changed_keys.merchants": 0,
            "affected_keys": 5,
            "recomputed_rows": 0,
            "inserted": 1,
            "updated": 2,
            "deleted": 1,
            "unchanged_skipped": 0,
            "output_version": -1,  # no output version: none committed
            "fanout_facts": 2,
            "ms.plan": 250,
        },
    }


@pytest.mark.parametrize(
    "text",
    [
        "[DELTA_CHANGE_DATA_FILE_NOT_FOUND] File ... referenced in the transaction log cannot be found",
        "java.io.FileNotFoundException: /lake/products/_change_data/cdc-00000.parquet",
        "[DELTA_CANNOT_TIME_TRAVEL] ...",
        "[DELTA_MISSING_CHANGE_DATA] Error getting change data for range [3 , 7]",
        "[DELTA_CHANGE_TABLE_FEED_DISABLED] Cannot record change data while the feed is off",
    ],
)
def test_an_unreadable_change_range_asks_for_a_full_refresh(text):
    error = translate_read_error(
        RuntimeError(text), role="view 'v', source 's'", path="/lake/s", first=3, last=7
    )

    assert isinstance(error, ChangesUnreadableError)
    assert "the changes of /lake/s between versions 3 and 7 can no longer be read" in str(error)
    assert "--full-refresh" in str(error) and "view 'v', source 's'" in str(error)


def test_any_other_error_is_left_as_it_is():
    cause = RuntimeError("executor lost")

    assert translate_read_error(cause, role="r", path="/p", first=1, last=2) is cause


SPEC = """\
pipeline: shop
sources:
  products:
    path: ./products
    key: product_id
views: {}
"""


def test_every_key_of_a_spec_has_its_line():
    raw, lines = compose_with_lines(SPEC, "shop.yaml")

    assert raw["sources"]["products"] == {"path": "./products", "key": "product_id"}
    assert {
        k: lines[k] for k in ("pipeline", "sources", "sources.products", "sources.products.key", "views")
    } == {
        "pipeline": 1,
        "sources": 2,
        "sources.products": 3,
        "sources.products.key": 5,
        "views": 6,
    }


def test_an_error_at_a_key_without_a_line_points_at_its_nearest_parent():
    _, lines = compose_with_lines(SPEC, "shop.yaml")

    error = SpecReader("shop.yaml", lines).fail("sources.products.columns.x", "what", "fix")

    assert isinstance(error, SpecError)
    assert (error.line, error.key) == (3, "sources.products.columns.x")  # sources.products's line
    assert str(error) == "shop.yaml:3 (at 'sources.products.columns.x'): what\n  fix: fix"
