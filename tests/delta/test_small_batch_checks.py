"""A failing check in a small batch (issue 52): its changes read on the driver, no data file
scanned, it still stops before its commit and writes its data-quality page at once. For a user
suite in each kind, in a run of the pipeline (whose pages are otherwise built once after its last
view), and for a built-in check with a `fail` policy (join health's limit) in a batch run alone.
The lakehouse is test_small_batch_scans's: 40 rows a source in four delta-rs commits, one row
changed a source. Real Delta tables, real Spark, real Great Expectations."""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable

from lakejoin.delta.records import BatchStatus
from lakejoin.engine.batch import BatchOutcome, batch_log, recompute_view, run_view
from lakejoin.engine.kinds import view_logic
from lakejoin.engine.pipeline import run_pipeline
from lakejoin.errors import QualityCheckError
from lakejoin.spec.layout import health_path, reports_folder, state_path
from tests import scans
from tests.delta.test_small_batch_scans import KEYS, ROWS, VIEWS, _create, _upsert
from tests.lakehouse import ADDRESSES, CUSTOMERS, ITEMS, MASTERS, PERSONS, PRODUCTS, PURCHASES, write_spec

pytestmark = pytest.mark.delta

# The tables each view reads, and the one change a source that test_small_batch_scans makes.
SOURCES = {
    "display_products": ("products", "merchants"),
    "person_addresses": ("persons", "addresses"),
    "merchants_by_name": ("merchants",),
    "enriched_purchases": ("purchases", "customers", "items"),
}
CHANGES = {
    "merchants": ("m01", "shop one", "SE", "1.png"),
    "products": ("p03", "thing three", 3.5, "m02"),
    "addresses": ("a05", "new street", "Bergen"),
    "persons": ("u07", "person 7", ["a09"]),
    "customers": ("c04", "customer four", "SE"),
    "items": ("p06", "item six", 6.5),
    "purchases": ("o08", "c09", "p10", 2),
}


def _tables() -> dict[str, tuple[str, list[tuple]]]:
    merchants = ROWS // 5
    return {
        "merchants": (MASTERS, [(f"m{i:02}", f"shop {i}", "NO", f"{i}.png") for i in range(merchants)]),
        "products": (
            PRODUCTS,
            [(f"p{i:02}", f"thing {i}", float(i), f"m{i % merchants:02}") for i in range(ROWS)],
        ),
        "addresses": (ADDRESSES, [(f"a{i:02}", f"street {i}", "Oslo") for i in range(ROWS)]),
        "persons": (
            PERSONS,
            [(f"u{i:02}", f"person {i}", [f"a{i:02}", f"a{(i + 1) % ROWS:02}"]) for i in range(ROWS)],
        ),
        "customers": (CUSTOMERS, [(f"c{i:02}", f"customer {i}", "NO") for i in range(ROWS)]),
        "items": (ITEMS, [(f"p{i:02}", f"item {i}", float(i)) for i in range(ROWS)]),
        "purchases": (
            PURCHASES,
            [(f"o{i:02}", f"c{i:02}", f"p{(i * 3) % ROWS:02}", 1) for i in range(ROWS)],
        ),
    }


def _view_yaml(view: str) -> str:
    """The view's block of test_small_batch_scans.VIEWS."""
    blocks: dict[str, str] = {}
    current = ""
    for line in VIEWS.splitlines(keepends=True):
        if line.startswith("  ") and not line.startswith("   "):
            current = line.strip().rstrip(":")
            blocks[current] = ""
        blocks[current] += line
    return blocks[view]


def _lakehouse(lake, views: list[str], extra: str = ""):  # noqa: ANN001, ANN202 - Lakehouse -> spec
    """The tables `views` read, the spec of those views (`extra` appended to the last), and a
    first batch of each (every key, committed)."""
    tables = _tables()
    needed = list(dict.fromkeys(t for v in views for t in SOURCES[v]))
    for table in needed:
        _create(lake, table, *tables[table])
    spec = write_spec(lake, {t: KEYS[t] for t in needed}, "".join(_view_yaml(v) for v in views) + extra)
    for view in views:
        assert run_view(lake.spark, spec, view).outcome is BatchOutcome.COMMITTED
    return spec


FAILING = {
    "display_products": (
        {
            "type": "expect_column_values_to_not_be_in_set",
            "kwargs": {"column": "display_name", "value_set": ["shop one"]},
        },
        5,  # the products of m01: p01, p09, p17, p25, p33
    ),
    "person_addresses": (
        {
            "type": "expect_column_values_to_not_be_in_set",
            "kwargs": {"column": "person_id", "value_set": ["u07"]},
        },
        1,
    ),
    "merchants_by_name": (
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "country", "value_set": ["NO"]}},
        1,
    ),
    "enriched_purchases": (
        {
            "type": "expect_column_values_to_not_be_in_set",
            "kwargs": {"column": "customer_name", "value_set": ["customer four"]},
        },
        1,  # o04
    ),
}


def _written(spec, view: str) -> dict[str, int]:  # noqa: ANN001
    """The version of each table a batch of `view` writes (delta-rs, no Spark job): its output,
    its state tables, its flagged keys (-1: none)."""
    v = spec.views[view]
    paths = {
        "output": v.path,
        "health": health_path(spec, v),
        **view_logic(spec, v).state_tables(state_path(spec, v)),
    }
    return {
        name: int(DeltaTable(p).version()) if DeltaTable.is_deltatable(p) else -1 for name, p in paths.items()
    }


def _output(spark, spec, view: str) -> list[str]:  # noqa: ANN001
    """The output's rows (Spark: delta-rs's pyarrow reader refuses deletion vectors)."""
    rows = spark.read.format("delta").load(spec.views[view].path).collect()
    return sorted(json.dumps(r.asDict(recursive=True), sort_keys=True, default=str) for r in rows)


def _assert_blocked_with_page(lake, spec, view: str, raised, before, rows, read, failed_check) -> None:  # noqa: ANN001, PLR0913
    record = batch_log(spec).last(view)
    assert record is not None and (record.batch_id, record.status) == (2, BatchStatus.ABANDONED)
    assert record.notes["abandoned"].startswith("checks failed"), record.notes
    # a small batch: its changes read on the driver, no data file scanned by Spark
    changes = {k: n for k, n in record.notes.items() if k.startswith("changes ")}
    assert changes and all(n.startswith("read by driver") for n in changes.values()), changes
    assert not read, read
    # nothing committed: output, state and flagged keys at their versions, the output's rows as they were
    assert _written(spec, view) == before
    assert _output(lake.spark, spec, view) == rows
    # its JSON report and its page, written at the check, named by the error
    folder = reports_folder(spec, view)
    report = json.loads((folder / "batch-000002.json").read_text())
    assert report["success"] is False
    failed = [(c["scope"], c["expectation"], c["severity"]) for c in report["checks"] if not c["success"]]
    assert failed == [failed_check]
    page = folder / "batch-000002.html"
    assert str(page.name) in raised.value.where
    text = page.read_text()
    assert "failed: 1 of" in text and "(not committed)" in text and "FAIL (critical)" in text
    assert failed_check[1] in text
    assert "failed: 1 of" in (folder.parent / "index.html").read_text()


def _next_run_commits(lake, spec, view: str) -> None:  # noqa: ANN001
    again = run_view(lake.spark, spec, view)
    assert (again.outcome, again.batch_id) == (BatchOutcome.COMMITTED, 3)
    out = lake.spark.read.format("delta").load(spec.views[view].path)
    want = recompute_view(lake.spark, spec, view).select(*out.columns)
    assert sorted(out.collect()) == sorted(want.collect())


@pytest.mark.parametrize("view", list(FAILING))
def test_a_failing_user_suite_in_a_small_batch_blocks_its_commit_and_writes_its_page(lake, monkeypatch, view):
    """In a run of the pipeline (its pages built once after its last view; a failing batch's at
    once, quality/checks.check_batch)."""
    suites = lake.root / "expectations"
    monkeypatch.setenv("LAKEJOIN_EXPECTATIONS_DIR", str(suites))
    spec = _lakehouse(lake, [view])  # no suite yet: the first batch commits
    expectation, unexpected = FAILING[view]
    for table in SOURCES[view]:  # a change on every side, as test_small_batch_scans makes
        _upsert(lake, table, CHANGES[table])
    (suites / spec.name).mkdir(parents=True)
    suite = suites / spec.name / f"{view}.json"
    suite.write_text(json.dumps({"name": view, "expectations": [expectation]}))
    before, rows = _written(spec, view), _output(lake.spark, spec, view)

    mark = scans.mark(lake.spark)
    with pytest.raises(QualityCheckError, match=rf"user_suite: {expectation['type']}\(") as raised:
        run_pipeline(lake.spark, spec, [view], parallel=1, fail_fast=True)
    read = scans.since(lake.spark, mark)

    _assert_blocked_with_page(
        lake, spec, view, raised, before, rows, read, ("user_suite", expectation["type"], "critical")
    )
    report = json.loads((reports_folder(spec, view) / "batch-000002.json").read_text())
    [check] = [c for c in report["checks"] if not c["success"]]
    assert check["observed"]["unexpected_count"] == unexpected  # the written rows, not the output
    assert f"fix the suite {suite}" in raised.value.fix

    suite.unlink()  # the suite fixed: the next run commits the changes, from the same pins on
    _next_run_commits(lake, spec, view)


def test_a_fail_limit_breached_in_a_small_batch_blocks_its_commit_and_writes_its_page(lake, monkeypatch):
    """A built-in check with a `fail` policy (join health's limit, quality/health_checks.py), in a
    batch run alone (its pages written at the check)."""
    monkeypatch.setenv("LAKEJOIN_EXPECTATIONS_DIR", str(lake.root / "no-suites"))
    view = "display_products"
    limit = "    health:\n      missing_right: {max_rows: 0, on_breach: fail}\n"
    spec = _lakehouse(lake, [view], extra=limit)  # every product finds its merchant: within the limit
    _upsert(lake, "merchants", CHANGES["merchants"])
    _upsert(lake, "products", ("p03", "thing three", 3.5, "m99"))  # no merchant m99
    before, rows = _written(spec, view), _output(lake.spark, spec, view)

    mark = scans.mark(lake.spark)
    with pytest.raises(QualityCheckError) as raised:
        run_view(lake.spark, spec, view)
    read = scans.since(lake.spark, mark)

    assert "join_health: expect_column_values_to_be_between(column='missing_right'" in raised.value.what
    assert "missing_right: 1 rows" in raised.value.what and "'p03'" in raised.value.what
    _assert_blocked_with_page(
        lake,
        spec,
        view,
        raised,
        before,
        rows,
        read,
        ("join_health", "expect_column_values_to_be_between", "critical"),
    )

    _upsert(lake, "merchants", ("m99", "shop 99", "NO", "99.png"))  # its merchant arrives
    _next_run_commits(lake, spec, view)
