"""The Content-Security-Policy of the report pages: each page a batch writes carries it in a
<meta> tag (it holds on file:// too), and the reports plugin sends it with every answer; GE's
Data Docs, which run their own inline scripts, get one that loads nothing from outside the site.
No Spark: the reports folder is written by hand, and the plugin is loaded as Airflow loads it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lakejoin.cli.explain_html import explain_page
from lakejoin.quality.report_pages import POLICY, document
from lakejoin.spec.layout import reports_root
from lakejoin.spec.parse import load_spec
from tests.reports_plugin import api_server, load_plugin, logged_in
from tests.unit.shop import SHOP, shop

pytestmark = pytest.mark.unit


def directives(policy: str) -> dict[str, set[str]]:
    """`default-src 'none'; img-src 'self'` -> {"default-src": {"'none'"}, "img-src": {"'self'"}}."""
    parts = (d.split() for d in policy.split(";") if d.strip())
    return {name: set(sources) for name, *sources in parts}


def meta_policy(page: str) -> str:
    found = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert found, page[:300]
    return found[1]


def test_the_pages_policy_allows_their_inline_styles_and_plots_and_no_script():
    policy = directives(POLICY)
    assert policy["default-src"] == {"'none'"}  # so no script-src: no script of any kind
    assert "script-src" not in policy and "connect-src" not in policy
    assert policy["style-src"] == {"'unsafe-inline'"}  # the page's own <style>
    assert policy["img-src"] == {"'self'"}  # trends.svg beside the page
    assert policy["form-action"] == {"'self'"}  # the explain form asks its own page
    assert policy["base-uri"] == {"'none'"}


def test_every_page_carries_the_policy_in_its_head():
    for page in (document("t", "<p>x</p>"), explain_page(shop())):
        head = page.split("</head>")[0]
        assert meta_policy(head) == POLICY
        assert head.index("Content-Security-Policy") < head.index("<style>")


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The plugin, serving the shop pipeline, whose reports folder holds a batch page, a plot
    and a Data Docs page."""
    (tmp_path / "shop.yaml").write_text(SHOP)
    reports = reports_root(load_spec(tmp_path / "shop.yaml"))
    (reports / "display_products").mkdir(parents=True)
    (reports / "display_products" / "batch-000001.html").write_text(document("batch 1", "<p>1</p>"))
    (reports / "display_products" / "trends.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    (reports / "data_docs").mkdir()
    (reports / "data_docs" / "index.html").write_text("<html><script>1</script></html>")
    plugin = load_plugin(monkeypatch, tmp_path, tmp_path / "airflow")
    return plugin, api_server(plugin)


def test_the_plugin_sends_the_pages_policy_and_data_docs_their_own(served):
    plugin, client = served
    pages = directives(plugin.PAGES_POLICY)
    assert pages == {**directives(POLICY), "frame-ancestors": {"'self'"}}  # framed by Airflow's UI only
    refused = client.get("/lakejoin/reports/")
    assert refused.status_code == 401 and refused.headers["content-security-policy"] == plugin.PAGES_POLICY
    with logged_in(plugin):
        for path in (
            "",
            "shop/explain",
            "shop/display_products/batch-000001.html",
            "shop/display_products/trends.svg",
        ):
            answer = client.get(f"/lakejoin/reports/{path}")
            assert answer.status_code == 200, path
            assert answer.headers["content-security-policy"] == plugin.PAGES_POLICY, path
        docs = client.get("/lakejoin/reports/shop/data_docs/index.html")
    assert docs.status_code == 200 and docs.headers["content-security-policy"] == plugin.DATA_DOCS_POLICY
    policy = directives(plugin.DATA_DOCS_POLICY)
    assert policy["default-src"] == {"'self'"} and policy["object-src"] == {"'none'"}
    # GE's inline scripts, Vega's compiled expressions; every source the site's own, or data:
    assert policy["script-src"] == {"'self'", "'unsafe-inline'", "'unsafe-eval'"}
    assert all(
        s in ("'self'", "'unsafe-inline'", "'unsafe-eval'", "'none'", "data:")
        for v in policy.values()
        for s in v
    )
