"""Data-quality reports: each batch writes its JSON, GE's Data Docs, a report page and plots; a
user suite runs on the rows a batch writes; `lakejoin report` rewrites the pages; the Airflow plugin serves
them, behind the login, and nothing outside them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lakejoin.engine.pipeline import ViewState, run_pipeline
from lakejoin.errors import ExpectationSuiteError, QualityCheckError
from lakejoin.quality import data_docs
from lakejoin.spec.layout import reports_folder, reports_root
from tests.lakehouse import MERCHANTS, PRODUCTS, Lakehouse
from tests.reports_plugin import api_server, load_plugin, logged_in

pytestmark = pytest.mark.delta

VIEW = "display_products"


def text_of(page: Path) -> str:
    """A page's text, without its tags, scripts and extra spaces."""
    html = re.sub(r"<(script|style).*?</\1>", " ", page.read_text(), flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def suite(*expectations: dict) -> str:
    return json.dumps({"name": VIEW, "expectations": list(expectations)})


PRICE_UNDER_10 = {
    "type": "expect_column_values_to_be_between",
    "kwargs": {"column": "price", "max_value": 10},
}


@pytest.fixture(scope="module")
def reported(spark, tmp_path_factory):
    """A shop with two committed batches (a full refresh, then an incremental one) and a user
    suite that passes. The first batch runs alone and writes its pages at its commit; the
    second runs in a run of the pipeline, whose pages are built once after its last view."""
    lake = Lakehouse(spark, tmp_path_factory.mktemp("reports"))
    expectations = lake.root / "expectations"
    (expectations / "shop").mkdir(parents=True)
    (expectations / "shop" / f"{VIEW}.json").write_text(suite(PRICE_UNDER_10))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAKEJOIN_EXPECTATIONS_DIR", str(expectations))
        patch.setattr("lakejoin.quality.data_docs.KEPT_BATCHES", 1)
        lake.create("merchants", MERCHANTS, [("m1", "Acme", "a.png"), ("m2", "Bolt", "b.png")])
        lake.create("products", PRODUCTS, [("p1", "pen", 1.0, "m1"), ("p2", "cup", 2.0, "m2")])
        spec = lake.spec("left")
        lake.run(spec)
        lake.upsert("merchants", "merchant_id", [("m1", "Acme Inc", "a.png")])
        lake.upsert("products", "product_id", [("p3", "lid", 3.0, "m2")])
        [result] = run_pipeline(spark, spec, [VIEW], fail_fast=True)
        assert result.state is ViewState.COMMITTED
    return lake, spec, reports_root(spec)


def test_a_batch_writes_json_data_docs_page_and_plots(reported):
    _, _, reports = reported
    report = json.loads((reports / VIEW / "batch-000002.json").read_text())
    assert report["mode"] == "incremental" and report["success"] is True
    assert report["metrics"]["inserted"] == 1 and report["metrics"]["updated"] == 1
    # Version 2 checks the rows a batch writes, before its commit; no whole-output scan (issue 23).
    assert {c["scope"] for c in report["checks"]} == {"changed_rows", "user_suite"}

    # GE's own Data Docs render each validation, with its expectations.
    docs = {c["scope"]: text_of(reports / c["data_docs"]) for c in report["checks"]}
    # (GE heads each column's expectations with the column's name.)
    assert "product_id" in docs["changed_rows"] and "values must never be null" in docs["changed_rows"]
    assert "values must be unique" in docs["changed_rows"]
    assert "price" in docs["user_suite"] and "values must be less than or equal to 10" in docs["user_suite"]
    assert (reports / "data_docs" / "index.html").is_file()
    # Only the last KEPT_BATCHES batches (1 here) keep their GE results and Data Docs pages.
    assert not list((reports / "data_docs" / "validations" / VIEW).glob("*/batch-000001/*/*.html"))
    assert not list((reports / "_gx" / "validations" / VIEW).glob("*/batch-000001"))

    page = (reports / VIEW / "batch-000002.html").read_text()
    # versions: products read from 1 (exclusive) to 2, merchants likewise
    assert "<td>products</td><td class=n>1</td><td class=n>2</td><td class=n>1</td>" in page
    assert "<td>inserted</td><td class=n>1</td>" in page and "<td>updated</td><td class=n>1</td>" in page
    for expectation in ("expect_column_values_to_be_unique", "expect_column_values_to_be_between"):
        assert expectation in page
    assert 'href="../data_docs/validations/display_products/changed_rows/batch-000002/' in page
    assert 'href="index.html"' in page and 'href="../index.html"' in page
    assert "<script" not in page and "://" not in page  # self-contained

    plot = (reports / VIEW / "trends.svg").read_text()
    assert plot.startswith("<?xml") and "lag (versions)" in plot and "rows changed" in plot
    assert "batches 1 to 2" in plot
    assert 'src="trends.svg"' in page
    assert "batch-000002.html" in (reports / VIEW / "index.html").read_text()
    index = (reports / "index.html").read_text()
    assert 'href="display_products/index.html"' in index and "passed: " in index


def test_a_failed_user_expectation_stops_the_batch_and_its_page_shows_it(lake, monkeypatch):
    https_photos = {
        "type": "expect_column_values_to_match_regex",
        "kwargs": {"column": "photo_url", "regex": "^https://"},
        "severity": "warning",
    }
    expectations = lake.root / "expectations"
    (expectations / "shop").mkdir(parents=True)
    (expectations / "shop" / f"{VIEW}.json").write_text(suite(PRICE_UNDER_10, https_photos))
    monkeypatch.setenv("LAKEJOIN_EXPECTATIONS_DIR", str(expectations))
    lake.create("merchants", MERCHANTS, [("m1", "Acme", "a.png")])
    lake.create("products", PRODUCTS, [("p1", "pen", 1.0, "m1")])
    spec = lake.spec("left")
    folder = reports_folder(spec, VIEW)

    # A failed expectation of severity warning is reported, and the batch commits. This batch is
    # validated by GE's Spark engine, the next (a few rows, as usual) on the driver.
    driver_rows = data_docs.DRIVER_ROWS
    monkeypatch.setattr(data_docs, "DRIVER_ROWS", 0)
    assert lake.run(spec).outcome.value == "committed"
    assert "passed, 1 warning(s)" in (folder / "batch-000001.html").read_text()
    monkeypatch.setattr(data_docs, "DRIVER_ROWS", driver_rows)
    # GE's Spark engine rendered no condition as a SQL query: for the uniqueness check (a
    # window) that rendering analysed a filter that cannot be, and Spark's listener bus logged
    # an ERROR with a JVM stack trace for a batch that was fine (issue 40).
    first = json.loads((folder / "batch-000001.json").read_text())
    assert any(c["expectation"].endswith("_unique") for c in first["checks"]), first["checks"]
    assert not [c for c in first["checks"] if "unexpected_index_query" in (c.get("observed") or {})]

    # In a run of the pipeline too, a failing batch writes its pages at once.
    lake.upsert("products", "product_id", [("p2", "gold pen", 50.0, "m1")])
    with pytest.raises(QualityCheckError, match=r"user_suite: expect_column_values_to_be_between\(") as err:
        run_pipeline(lake.spark, spec, [VIEW], fail_fast=True)
    assert "batch-000002.html" in str(err.value) and f"fix the suite {expectations}" in str(err.value)
    report = json.loads((folder / "batch-000002.json").read_text())
    assert report["success"] is False
    failed = [c for c in report["checks"] if not c["success"]]
    assert [(c["expectation"], c["observed"]["unexpected_count"]) for c in failed] == [
        ("expect_column_values_to_be_between", 1),
        ("expect_column_values_to_match_regex", 1),  # the written row (p2), not the whole output
    ]
    # This lakehouse's own GE store and Data Docs (the module's other lakehouse has its own).
    assert (folder.parent / failed[0]["data_docs"]).is_file()
    page = (folder / "batch-000002.html").read_text()
    assert "failed: 2 of" in page and "FAIL (critical)" in page and "FAIL (warning)" in page
    assert "partial_unexpected_list=[50.0]" in page
    assert "failed: 2 of" in (folder.parent / "index.html").read_text()


def test_a_malformed_suite_names_the_file_and_the_expectation(tmp_path):
    from lakejoin.quality.suites import load_suite

    bad = tmp_path / f"{VIEW}.json"
    bad.write_text(suite(PRICE_UNDER_10, {"type": "expect_prices_to_be_fair", "kwargs": {}}))
    with pytest.raises(ExpectationSuiteError, match=r"expectations\[1\] \(expect_prices_to_be_fair\)") as err:
        load_suite(bad)
    assert err.value.where == str(bad) and "Great Expectations' format" in err.value.fix

    bad.write_text('{"name": "x", "expectations": [')
    with pytest.raises(ExpectationSuiteError, match="not valid JSON"):
        load_suite(bad)
    yaml = tmp_path / f"{VIEW}.yaml"
    yaml.write_text("expectations:\n  - type: expect_column_values_to_not_be_null\n    kwargs: {colum: id}\n")
    with pytest.raises(ExpectationSuiteError, match=r"expectations\[0\].*colum"):
        load_suite(yaml)


def test_lakejoin_report_rewrites_the_pages(reported, capsys, monkeypatch):
    from lakejoin.cli.main import main

    lake, _, reports = reported
    monkeypatch.setenv("COLUMNS", "250")
    for page in (reports / "index.html", reports / VIEW / "batch-000002.html", reports / VIEW / "index.html"):
        page.unlink()

    assert main(["report", str(lake.root / "shop.yaml")]) == 0
    assert str(reports / "index.html") in capsys.readouterr().out.replace("\n", "")
    assert "display_products/batch-000002.html" in (reports / "index.html").read_text()
    page = (reports / VIEW / "batch-000002.html").read_text()
    assert "expect_column_values_to_be_unique" in page and "<td>inserted</td><td class=n>1</td>" in page
    assert (reports / VIEW / "index.html").is_file()


@pytest.fixture
def plugin(reported, monkeypatch, tmp_path):
    return load_plugin(monkeypatch, reported[0].root, tmp_path / "airflow")


def test_the_plugin_serves_the_reports_to_logged_in_users_only(plugin, reported):
    client = api_server(plugin)
    assert client.get("/lakejoin/reports/").status_code == 401  # no Airflow session

    with logged_in(plugin):
        root = client.get("/lakejoin/reports/")
        assert root.status_code == 200 and 'href="shop/"' in root.text
        index = client.get("/lakejoin/reports/shop/")
        assert index.status_code == 200 and 'href="display_products/index.html"' in index.text
        assert 'href="explain?view=display_products"' in index.text  # the explain page, the view chosen
        view = client.get("/lakejoin/reports/shop/display_products/index.html")
        assert view.status_code == 200 and "batch-000002.html" in view.text
        page = client.get("/lakejoin/reports/shop/display_products/batch-000002.html")
        assert page.status_code == 200 and "expect_column_values_to_be_unique" in page.text
        assert (
            client.get("/lakejoin/reports/shop/display_products/trends.svg")
            .headers["content-type"]
            .startswith("image/svg")
        )
        assert client.get("/lakejoin/reports/shop/data_docs/index.html").status_code == 200
        assert client.get("/lakejoin/reports/shop", follow_redirects=False).headers["location"] == "shop/"

        for escape in (
            "..%2F..%2Fshop.yaml",
            "display_products/..%2F..%2F..%2Fshop.yaml",
            "%2Fetc%2Fpasswd",
            "_gx/expectations/display_products/changed_rows.json",
            ".index.html.tmp",
        ):
            assert client.get(f"/lakejoin/reports/shop/{escape}").status_code == 404, escape
        dotted = client.get("/lakejoin/reports/shop/display_products/../../shop.yaml", follow_redirects=True)
        assert dotted.status_code == 404
        leak = reported[2] / VIEW / "leak.html"
        leak.symlink_to(reported[0].root / "shop.yaml")
        assert client.get("/lakejoin/reports/shop/display_products/leak.html").status_code == 404
        leak.unlink()
        assert client.get("/lakejoin/reports/nope/").status_code == 404
        plugin.can_read_dag = lambda dag_id, user: False
        assert client.get("/lakejoin/reports/shop/").status_code == 403

    link = plugin.DataQualityReportLink()
    key = type("Key", (), {"dag_id": "lakejoin_shop", "task_id": VIEW})()
    assert link.get_link(None, ti_key=key).endswith("/lakejoin/reports/shop/display_products/index.html")
