"""Data Docs offline (issue 40): every script, style and font Great Expectations' page templates
load from a CDN is shipped (`make install` fetched it with npm), and a built page points at the
site's own copy. tests/airflow/test_browser.py opens a real site with the network cut off."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lakejoin.quality import docs_assets
from lakejoin.quality.docs_assets import FOLDER, PACKAGES, VENDOR, local_file, localise

pytestmark = pytest.mark.unit

ASSET = re.compile(r'(?:src|href)="(https://[^"]+?(?:\.js|\.css|/npm/[^/"]+))"')


def template_addresses() -> set[str]:
    """The CDN addresses of the scripts and styles in the installed GE's page templates."""
    import importlib.util

    spec = importlib.util.find_spec("great_expectations")  # found, not imported (it brings py4j)
    assert spec is not None and spec.origin is not None
    templates = Path(spec.origin).parent / "render" / "view" / "templates"
    found = {a for t in templates.glob("*.j2") for a in ASSET.findall(t.read_text(encoding="utf-8"))}
    assert len(found) >= 10, f"no CDN addresses found in {templates}: did GE move its templates?"
    return found


def test_every_asset_ges_templates_load_from_a_cdn_is_shipped():
    packages = {p.name: p for p in PACKAGES}
    for address in template_addresses():
        served = local_file(address)
        assert served is not None, f"GE's templates load {address}, which docs_assets does not ship"
        package, file = served
        assert any(file == f or (f.endswith("/") and file.startswith(f)) for f in packages[package].files)


def test_make_install_fetched_every_file_the_rules_serve():
    assert docs_assets.installed(), f"the Data Docs assets are missing from {FOLDER}: run make install"
    for address in template_addresses():
        package, file = local_file(address) or ("", "")
        assert (FOLDER / package / file).is_file(), address
    fonts = (FOLDER / "@fortawesome/fontawesome-free/css/all.min.css").read_text(encoding="utf-8")
    for font in set(re.findall(r"url\(\.\./(webfonts/[^)?#]+)", fonts)):
        assert (FOLDER / "@fortawesome/fontawesome-free" / font).is_file(), font


def test_a_built_page_points_at_the_sites_own_copies(tmp_path):
    site = tmp_path / "data_docs"
    page = site / "validations" / "v" / "scope" / "batch-000001" / "run" / "page.html"
    page.parent.mkdir(parents=True)
    vega = "https://cdn.example/npm/vega@5"
    table = "https://cdn.example/bootstrap-table@1.19.0/dist/extensions/filter-control/bootstrap-table-filter-control.css"
    page.write_text(
        f'<script src="{vega}"></script><link href="{table}" rel="stylesheet">'
        '<a href="https://greatexpectations.io">GE</a><script src="https://cdn.example/other.js"></script>',
        encoding="utf-8",
    )

    unshipped = localise(site, [page, site / "index.html"])  # an index not written is no error

    text = page.read_text(encoding="utf-8")
    local = re.findall(r'(?:src|href)="([^"]+)"', text)
    assert local[:2] == [
        f"../../../../../{VENDOR}/vega/build/vega.min.js",
        f"../../../../../{VENDOR}/bootstrap-table/dist/extensions/filter-control/bootstrap-table-filter-control.css",
    ]
    assert all((page.parent / p).resolve().is_file() for p in local[:2])
    assert "https://greatexpectations.io" in text  # a link to a web page stays
    assert unshipped == ["https://cdn.example/other.js"]  # an asset no rule serves is said
    assert (site / VENDOR / "jquery" / "LICENSE.txt").is_file()  # the licence travels with it


def test_ges_logo_comes_from_its_own_package_not_its_bucket_with_the_context_id(tmp_path):
    page = tmp_path / "index.html"
    logo = "https://assets.example/logo-long.png?d=20261129T011951Z&dataContextId=d597"
    page.write_text(f'<img src="{logo}">', encoding="utf-8")

    assert localise(tmp_path, [page]) == []

    assert page.read_text(encoding="utf-8") == f'<img src="{VENDOR}/great_expectations/logo-long.png">'
    assert (tmp_path / VENDOR / "great_expectations" / "logo-long.png").is_file()


def test_without_the_assets_installed_the_pages_say_they_load_from_cdns(tmp_path):
    page = tmp_path / "index.html"
    page.write_text('<script src="https://cdn.example/npm/vega@5"></script>', encoding="utf-8")

    said = localise(tmp_path, [page], folder=tmp_path / "none")

    missing = tmp_path / "none"
    assert said == [f"the Data Docs assets are not installed in {missing}: pages load them from CDNs"]
    assert "https://cdn.example/npm/vega@5" in page.read_text(encoding="utf-8")
