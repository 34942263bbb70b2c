"""The scripts, styles and fonts Great Expectations' Data Docs pages load from CDNs, shipped with
the site, so that its pages work with no network (air-gapped, CI): offline, GE's index renders
unstyled and its list of validations stays empty (a bootstrap-table drawn by jQuery).

`python -m lakejoin.quality.docs_assets` (run by `make install` and the Airflow image) fetches
each npm package of `PACKAGES` with `npm pack` (npm's own registry configuration: no address
here) and keeps the files the pages use, with the package's licence, under
`<venv>/data-docs-assets/<package>/`. Every Data Docs build then copies them into its site's
`static/vendor/` once and points the pages it wrote at them (`localise`): each CDN address GE's
templates name is matched by its path (`RULES`), never by its host.

>>> local_file("https://cdn.example/npm/vega@5")
('vega', 'build/vega.min.js')
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

FOLDER = Path(os.environ.get("LAKEJOIN_DOCS_ASSETS") or Path(sys.prefix) / "data-docs-assets")
VENDOR = "static/vendor"  # in a Data Docs site
GE = "great_expectations"  # images GE's own package ships (render/view/static/images)


@dataclass(frozen=True)
class Package:
    """An npm package and the files of it the pages load (a path ending in `/`: a folder)."""

    name: str
    version: str
    files: tuple[str, ...]


PACKAGES = (
    Package("jquery", "3.7.1", ("dist/jquery.min.js",)),
    Package("bootstrap", "4.3.1", ("dist/css/bootstrap.min.css", "dist/js/bootstrap.min.js")),
    Package("popper.js", "1.12.9", ("dist/umd/popper.min.js",)),
    Package(
        "bootstrap-table",
        "1.19.1",
        ("dist/bootstrap-table.min.css", "dist/bootstrap-table.min.js", "dist/extensions/filter-control/"),
    ),
    Package("@fortawesome/fontawesome-free", "6.6.0", ("css/all.min.css", "webfonts/")),
    Package(
        "bootstrap-datepicker",
        "1.9.0",
        ("dist/css/bootstrap-datepicker.min.css", "dist/js/bootstrap-datepicker.min.js"),
    ),
    Package("@forevolve/bootstrap-dark", "1.1.0", ("dist/css/bootstrap-prefers-dark.css",)),
    # GE names these by major version only (`vega@5`): the newest release of each, pinned.
    Package("vega", "5.33.1", ("build/vega.min.js",)),
    Package("vega-lite", "5.23.0", ("build/vega-lite.min.js",)),
    Package("vega-embed", "6.29.0", ("build/vega-embed.min.js",)),
)

# The path of each address GE 1.x's templates name (render/view/templates/*.j2) -> the package
# and its file. bootstrap-table's filter-control styles are named at 1.19.0 beside the 1.19.1
# table: 1.19.1 ships the same files.
RULES: tuple[tuple[re.Pattern[str], str, str], ...] = tuple(
    (re.compile(pattern), package, file)
    for pattern, package, file in (
        (r"/jquery-3\.7\.1\.min\.js$", "jquery", "dist/jquery.min.js"),
        (r"/bootstrap/4\.3\.1/(css|js)/(bootstrap\.min\.(?:css|js))$", "bootstrap", r"dist/\1/\2"),
        (r"/popper\.js/1\.12\.9/umd/popper\.min\.js$", "popper.js", "dist/umd/popper.min.js"),
        (r"/bootstrap-table@1\.19\.[01]/(dist/.+)$", "bootstrap-table", r"\1"),
        (r"/font-awesome/6\.6\.0/css/all\.min\.css$", "@fortawesome/fontawesome-free", "css/all.min.css"),
        (r"/bootstrap-datepicker/1\.9\.0/(css|js)/(.+)$", "bootstrap-datepicker", r"dist/\1/\2"),
        (r"/@forevolve/bootstrap-dark@1\.1\.0/(.+)$", "@forevolve/bootstrap-dark", r"\1"),
        (r"/npm/vega@5$", "vega", "build/vega.min.js"),
        (r"/npm/vega-lite@5$", "vega-lite", "build/vega-lite.min.js"),
        (r"/npm/vega-embed@6$", "vega-embed", "build/vega-embed.min.js"),
        # GE's logo in the navigation bar, from GE's web-assets bucket with the data context's
        # id in its query: the same image ships in GE's own package.
        (r"^https://[^/]+/(logo-long\.png|short-logo\.png)$", GE, r"\1"),
    )
)
_ADDRESS = re.compile(r'((?:src|href)=")(https://[^"]+)(")')
_ASSET = re.compile(r"(\.js|\.css|/npm/[^/]+)$")


def local_file(address: str) -> tuple[str, str] | None:
    """The (package, file) that serves a CDN `address` GE's pages name; None: not shipped."""
    path = address.split("?", 1)[0]
    for pattern, package, file in RULES:
        found = pattern.search(path)
        if found:
            return package, found.expand(file)
    return None


def installed(folder: Path = FOLDER) -> bool:
    return all((folder / p.name / "package.json").is_file() for p in PACKAGES)


def install(folder: Path = FOLDER) -> None:
    """Fetch every package with `npm pack` and keep its files the pages use (and its licence)."""
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit(
            "docs_assets: npm is not on PATH, so the Data Docs pages will load their scripts and "
            "styles from CDNs (blank offline). Install Node.js with npm, then run: "
            f"{sys.executable} -m lakejoin.quality.docs_assets"
        )
    with tempfile.TemporaryDirectory() as scratch:
        for package in PACKAGES:
            stamp = folder / package.name / ".version"
            if stamp.is_file() and stamp.read_text() == package.version:
                continue
            done = subprocess.run(
                [npm, "pack", f"{package.name}@{package.version}", "--pack-destination", scratch],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                said = done.stderr.strip()
                raise SystemExit(f"docs_assets: npm pack {package.name}@{package.version} failed: {said}")
            archive = Path(scratch) / done.stdout.strip().splitlines()[-1]
            _keep(archive, package, folder / package.name)
    print(f"docs_assets: Data Docs' scripts, styles and fonts in {folder}")


def _keep(archive: Path, package: Package, target: Path) -> None:
    wanted = (*package.files, "package.json", "LICENSE", "LICENSE.txt", "LICENSE.md")
    shutil.rmtree(target, ignore_errors=True)
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            inner = member.name.removeprefix("package/")
            kept = any(inner == w or (w.endswith("/") and inner.startswith(w)) for w in wanted)
            if member.isfile() and kept:
                member.name = inner
                tar.extract(member, target, filter="data")
    missing = [f for f in package.files if not (target / f).exists()]
    if missing:
        raise SystemExit(f"docs_assets: {package.name}@{package.version} has no {missing}")
    (target / ".version").write_text(package.version)


def localise(site: Path, pages: list[Path], folder: Path = FOLDER) -> list[str]:
    """Point the CDN addresses of `pages` (files of the Data Docs site at `site`) at the shipped
    files, copied into the site's `static/vendor/` when missing. Returns what it could not
    ship: the addresses no rule serves, or every address when the assets were not installed."""
    if not installed(folder):
        return [f"the Data Docs assets are not installed in {folder}: pages load them from CDNs"]
    vendor = site / VENDOR
    for package in PACKAGES:
        copied = vendor / package.name
        if not (copied / ".version").is_file() or (copied / ".version").read_text() != package.version:
            shutil.rmtree(copied, ignore_errors=True)
            shutil.copytree(folder / package.name, copied)
    if not (vendor / GE).is_dir():
        shutil.copytree(_ge_images(), vendor / GE)
    unknown: list[str] = []
    for page in pages:
        if not page.is_file():
            continue
        text = page.read_text(encoding="utf-8")

        def local(found: re.Match[str], page: Path = page) -> str:
            served = local_file(found[2])
            if served is None:
                if _ASSET.search(found[2].split("?", 1)[0]):  # not a link to a web page
                    unknown.append(found[2])
                return found[0]
            path = os.path.relpath(vendor / served[0] / served[1], page.parent)
            return f"{found[1]}{Path(path).as_posix()}{found[3]}"

        changed = _ADDRESS.sub(local, text)
        if changed != text:
            page.write_text(changed, encoding="utf-8")
    return sorted(set(unknown))


def _ge_images() -> Path:
    """GE's own images, found without importing GE (which brings py4j)."""
    import importlib.util

    spec = importlib.util.find_spec(GE)
    assert spec is not None and spec.origin is not None, "great_expectations is not installed"
    return Path(spec.origin).parent / "render" / "view" / "static" / "images"


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    install()
