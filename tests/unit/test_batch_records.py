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


@pytest.mark.parametrize(
    "text",
    [  # Delta 4.4's words: one rename or drop (column mapping) in the range, or two of them
        "[DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA] Retrieving table changes between version 3 "
        "and 7 failed because of an incompatible data schema.",
        "[DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE] Retrieving table changes between version 3 "
        "and 7 failed because of an incompatible schema change.",
    ],
    ids=["data_schema", "schema_change"],
)
def test_an_incompatible_schema_change_in_the_range_asks_for_a_full_refresh(text):
    """A column renamed or dropped, or its type changed, even one the view does not read: Delta
    reads no change feed across it."""
    error = translate_read_error(
        RuntimeError(text), role="view 'v', source 's'", path="/lake/s", first=3, last=7
    )

    assert isinstance(error, ChangesUnreadableError)
    said = str(error)
    assert "a column of /lake/s was renamed, dropped or changed its type between versions 3 and 7" in said
    assert "--full-refresh" in said and "view 'v', source 's'" in said


def test_any_other_error_is_left_as_it_is():
    cause = RuntimeError("executor lost")

    assert translate_read_error(cause, role="r", path="/p", first=1, last=2) is cause


def test_a_batch_log_row_lakejoin_cannot_read_is_named_with_the_fix(tmp_path, capsys):
    """A row another writer put in the batch log (a status lakejoin does not know) stops what
    reads the log, `lakejoin status` and a run's plan alike, with the row and the fix, not a
    traceback (issue 51)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from lakejoin.cli.main import main
    from lakejoin.delta.log import BatchLog
    from lakejoin.engine.plan import view_batches
    from lakejoin.errors import BatchStateError
    from lakejoin.spec.parse import load_spec
    from tests.unit.shop import SHOP

    file = tmp_path / "shop.yaml"
    file.write_text(SHOP.replace("./store", str(tmp_path / "store")), encoding="utf-8")
    spec = load_spec(file)
    log = BatchLog.of(spec)
    log.append(BatchRecord("logos", 1, C, BatchMode.FULL_REFRESH, {}, {"products": 0}))
    row = {"pipeline": "shop", "view": "logos", "batch_id": 2, "status": "bogus", "mode": "incremental"}
    schema = pa.schema(DeltaTable(log.path).schema().to_arrow())
    write_deltalake(log.path, pa.Table.from_pylist([row], schema=schema), mode="append")

    with pytest.raises(BatchStateError) as raised:
        log.history("logos")
    said = " ".join(str(raised.value).split())
    for phrase in (
        f"batch log {log.path}",
        "view 'logos', batch 2",
        "status 'bogus'",
        "lakejoin writes one of: committed, abandoned, unchanged",
        f"DELETE FROM delta.`{log.path}` WHERE view = 'logos' AND batch_id = 2 AND status = 'bogus')",
        "rebuilds",
    ):
        assert phrase in said, f"{phrase!r} not in {said!r}"
    with pytest.raises(BatchStateError, match="status 'bogus'"):
        view_batches(spec, spec.views["logos"], log)  # a run's first step
    capsys.readouterr()
    assert main(["status", str(file)]) == 2
    printed = " ".join(capsys.readouterr().out.split())
    assert "BatchStateError" in printed and "status 'bogus'" in printed and "Traceback" not in printed


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


def test_the_write_that_made_a_batch_is_logged_and_older_rows_read_none(tmp_path):
    """The batch log's `write` column (issue 53): a batch's strategy read back as written; a
    log written before the column, and a row that wrote no output, read None."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from lakejoin.delta.log import BatchLog, _schema

    path = str(tmp_path / "log")
    older = _schema().remove(_schema().get_field_index("write"))
    row = {"pipeline": "p", "view": "v", "batch_id": 1, "status": "committed", "mode": "full_refresh"}
    row.update(start_versions=[], pinned_versions=[], output_version=1, metrics=[], notes="{}")
    write_deltalake(path, pa.Table.from_pylist([{**row, "recorded_at": None}], schema=older))
    log = BatchLog("p", path)
    log.append(
        BatchRecord("v", 2, C, BatchMode.INCREMENTAL, {}, {}, output_version=2, write="upsert"),
        BatchRecord("v", 3, A, BatchMode.INCREMENTAL, {}, {}),
    )

    assert [r.write for r in log.history("v")] == [None, "upsert", None]
    figures = BatchSummary("v", BatchOutcome.COMMITTED, batch_id=2, write="upsert").figures()
    assert figures["write"] == "upsert"
