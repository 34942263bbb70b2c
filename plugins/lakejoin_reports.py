"""Airflow plugin: lakejoin's data-quality reports inside the Airflow UI.

- `GET /lakejoin/reports/`: the pipelines (the specs in `$LAKEJOIN_PIPELINES_DIR`), each with a
  link to its report index;
- `GET /lakejoin/reports/<pipeline>/`: the pipeline's index, rendered from the batch log
  and JSON reports as they are now, with a link to the explain page;
- `GET /lakejoin/reports/<pipeline>/explain?view=V&key=K[&key=K2][&at=N][&format=json]`:
  `lakejoin explain`'s answer for one key of a view (a form, then the answer), read in-process
  from the Delta logs with delta-rs; `format=json` gives its JSON document;
- `GET /lakejoin/reports/<pipeline>/plan[?format=json]`: `lakejoin plan`'s answer, what the
  next batch of each view would do and why, read from the Delta logs with delta-rs;
- `GET /lakejoin/reports/<pipeline>/<file>`: the files of that pipeline's reports folder
  (`<storage>/_lakejoin/reports/`), read-only; a folder serves its `index.html`;
- a "Data quality" entry in the navigation bar, showing that index inside the UI;
- a "Data-quality report" extra link on every task of a `lakejoin_<pipeline>` DAG, to the page
  of the view the task runs.

It serves what the batches already wrote, and reads Delta logs with delta-rs: it imports neither
Spark nor Great Expectations.
Airflow does not authenticate a plugin's FastAPI app, so every route asks for the Airflow login
itself (the UI's session cookie, or a bearer token) and, under a pipeline, for read access to
that pipeline's DAG. Every answer carries a Content-Security-Policy: lakejoin's pages may load
their inline styles and the plots beside them and run no script; GE's Data Docs may run their
own inline scripts and load only the site's files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath
from typing import Annotated
from urllib.parse import quote

from airflow.api_fastapi.core_api.security import GetUserDep
from airflow.plugins_manager import AirflowPlugin
from airflow.sdk import BaseOperatorLink
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response

from lakejoin.errors import BatchStateError, CommandError, LakejoinError, SpecError
from lakejoin.quality.data_docs import DOCS_FOLDER
from lakejoin.quality.report_pages import POLICY, document, link, table
from lakejoin.spec.layout import reports_root
from lakejoin.spec.model import PipelineSpec, find_specs
from lakejoin.spec.parse import load_spec

URL_PREFIX = "/lakejoin"
DAG_PREFIX = "lakejoin_"
SERVED = {".html", ".svg", ".json", ".css", ".js", ".png", ".jpg", ".gif", ".ico", ".woff", ".woff2", ".ttf"}
# The pages' own policy; only Airflow's UI may frame them (its "Data quality" entry does).
PAGES_POLICY = f"{POLICY}; frame-ancestors 'self'"
# GE's templates run inline scripts and Vega compiles its expressions with `new Function`; the
# scripts, styles and fonts come with the site (static/vendor), and Bootstrap's icons are data:.
DATA_DOCS_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; object-src 'none'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'self'"
)


def pipelines_dir() -> Path:
    default = Path(__file__).resolve().parent.parent / "pipelines"
    return Path(os.environ.get("LAKEJOIN_PIPELINES_DIR", default))


def pipeline_specs() -> dict[str, PipelineSpec]:
    """The pipelines by name; a spec that does not load is left out (its DAG shows the error)."""
    specs = {}
    for file in find_specs(pipelines_dir()):
        try:
            spec = load_spec(file)
        except LakejoinError:
            continue
        specs[spec.name] = spec
    return specs


def reports_folder(spec: PipelineSpec) -> Path:
    return reports_root(spec).resolve()


def can_read_dag(dag_id: str, user: object) -> bool:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    return get_auth_manager().is_authorized_dag(method="GET", details=DagDetails(id=dag_id), user=user)


def reader(request: Request, user: GetUserDep) -> None:
    """Every route: a logged-in Airflow user; under a pipeline, one who may read its DAG."""
    pipeline = request.path_params.get("pipeline")
    if pipeline and not can_read_dag(DAG_PREFIX + pipeline, user):
        raise HTTPException(status_code=403, detail=f"no read access to DAG {DAG_PREFIX}{pipeline}")


app = FastAPI(title="lakejoin data-quality reports", dependencies=[Depends(reader)])


@app.middleware("http")
async def content_security_policy(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    """Every answer, a refusal too, gets the pages' policy unless its route set another."""
    response = await call_next(request)
    response.headers.setdefault("Content-Security-Policy", PAGES_POLICY)
    return response


@app.get("/reports/", response_class=HTMLResponse)
def pipelines() -> HTMLResponse:
    rows = []
    for name, spec in sorted(pipeline_specs().items()):
        written = (reports_folder(spec) / "index.html").is_file()
        rows.append(
            [
                link(f"{quote(name)}/", name),
                "" if written else "no batch has written a report yet",
            ]
        )
    body = "<h1>Data quality</h1>" + table(["pipeline", ""], rows)
    return HTMLResponse(document("lakejoin data quality", body))


@app.get("/reports/{pipeline}")
def pipeline_without_slash(pipeline: str) -> RedirectResponse:
    # The index's links are relative: they need the trailing slash.
    return RedirectResponse(f"{quote(pipeline)}/", status_code=307)


def pipeline_spec(pipeline: str) -> PipelineSpec:
    spec = pipeline_specs().get(pipeline)
    if spec is None:
        raise HTTPException(status_code=404, detail=f"no pipeline named {pipeline!r}")
    return spec


# Before report_file, whose path would take it: a view named `explain` keeps its folder's pages.
@app.get("/reports/{pipeline}/explain", response_model=None)
def explain_row(
    pipeline: str,
    view: str = "",
    key: Annotated[list[str] | None, Query()] = None,
    at: str = "",
    format: str = "html",
) -> Response:
    """`lakejoin explain`'s answer for `view` and its `key` (one value per key column, in order)
    at output version `at` (empty: the latest): a page with the form, or its JSON document."""
    # delta-rs and rich, no Spark: lakejoin explain runs where pyspark cannot be imported.
    from lakejoin.cli.explain import explain
    from lakejoin.cli.explain_html import explain_page, output_version

    spec = pipeline_spec(pipeline)
    texts = key or []
    as_json = format == "json"
    found, error = None, None
    # A known view without a key is the form for its key columns; anything else is asked.
    if as_json or (view and (view not in spec.views or any(texts))):
        try:
            if not view:
                raise CommandError(
                    "no view given",
                    where="explain",
                    fix="give a view and its key: explain?view=VIEW&key=VALUE&format=json",
                )
            found = explain(spec, view, texts, at=output_version(at))
        except LakejoinError as exc:
            error = exc
    status = 200 if error is None else error_status(error)
    headers = {"Cache-Control": "no-cache"}
    if as_json:
        if error is not None:
            fields = {"what": error.what, "where": error.where, "fix": error.fix}
            return JSONResponse({"error": fields}, status_code=status, headers=headers)
        assert found is not None
        # As `lakejoin explain --json` prints it.
        return Response(json.dumps(found.document()), media_type="application/json", headers=headers)
    pages: set[int] = set()
    if found is not None:
        folder = reports_folder(spec) / found.view
        batches = {b.batch_id for b in (found.last_change, found.read_at) if b and b.batch_id is not None}
        pages = {b for b in batches if (folder / f"batch-{b:06d}.html").is_file()}
    page = explain_page(spec, view=view, texts=texts, at=at, found=found, error=error, pages=pages)
    return HTMLResponse(page, status_code=status, headers=headers)


# Before report_file too: a view named `plan` keeps its folder's pages.
@app.get("/reports/{pipeline}/plan", response_model=None)
def plan_views_page(pipeline: str, format: str = "html") -> Response:
    """`lakejoin plan`'s answer for every view of the pipeline: a page, or its JSON document."""
    from lakejoin.cli.plan import document as plan_document
    from lakejoin.cli.plan_html import plan_page
    from lakejoin.engine.next_batch import plan_views

    spec = pipeline_spec(pipeline)
    headers = {"Cache-Control": "no-cache"}
    try:
        plans = plan_views(spec)
    except LakejoinError as exc:
        fields = {"what": exc.what, "where": exc.where, "fix": exc.fix}
        if format == "json":
            return JSONResponse({"error": fields}, status_code=500, headers=headers)
        raise HTTPException(status_code=500, detail=str(exc)) from exc
    if format == "json":  # as `lakejoin plan --json` prints it
        body = json.dumps(plan_document(spec, plans.values()))
        return Response(body, media_type="application/json", headers=headers)
    return HTMLResponse(plan_page(spec.name, plans.values()), headers=headers)


def error_status(error: LakejoinError) -> int:
    """A view the spec does not have, or whose output has nothing to explain, is not found (404);
    a key or version that does not fit the view is a bad request (400)."""
    return 404 if isinstance(error, (SpecError, BatchStateError)) else 400


@app.get("/reports/{pipeline}/{path:path}", response_model=None)
def report_file(pipeline: str, path: str) -> Response:
    spec = pipeline_spec(pipeline)
    if path in ("", "index.html"):
        # Rendered now, not served from the file the last batch wrote before its commit.
        from lakejoin.quality.reports import pipeline_index_page

        page = pipeline_index_page(spec, explain="explain", plan="plan")
        return HTMLResponse(page, headers={"Cache-Control": "no-cache"})
    root = reports_folder(spec)
    target = resolve(root, path)
    if target.is_dir():
        if path and not path.endswith("/"):
            return RedirectResponse(f"{quote(PurePosixPath(path).name)}/", status_code=307)
        target = target / "index.html"
    if not target.is_file() or target.suffix not in SERVED:
        raise HTTPException(status_code=404, detail="no such report")
    headers = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
    if target.relative_to(root).parts[0] == DOCS_FOLDER:
        headers["Content-Security-Policy"] = DATA_DOCS_POLICY
    return FileResponse(target, headers=headers)


def resolve(root: Path, path: str) -> Path:
    """`path` inside `root`, or a 404: no `..`, no hidden or internal (`_gx`) part, no way out
    through a symbolic link."""
    relative = PurePosixPath(path)
    parts = relative.parts
    hidden = any(p in ("..", ".") or p[0] in "._" for p in parts)
    if relative.is_absolute() or hidden or "\\" in path or "\x00" in path:
        raise HTTPException(status_code=404, detail="no such report")
    target = (root / Path(*parts)).resolve() if parts else root
    if not target.is_relative_to(root):
        raise HTTPException(status_code=404, detail="no such report")
    return target


class DataQualityReportLink(BaseOperatorLink):
    """The page of the view a lakejoin task runs (its latest batches); none for other DAGs."""

    name = "Data-quality report"

    def get_link(self, operator, *, ti_key) -> str:  # noqa: ANN001 - Airflow's operator and key types
        if not ti_key.dag_id.startswith(DAG_PREFIX):
            return ""
        from airflow.configuration import conf

        base = (conf.get("api", "base_url", fallback="") or "").rstrip("/")
        pipeline = ti_key.dag_id.removeprefix(DAG_PREFIX)
        return f"{base}{URL_PREFIX}/reports/{quote(pipeline)}/{quote(ti_key.task_id)}/index.html"


class LakejoinReportsPlugin(AirflowPlugin):
    name = "lakejoin_reports"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "lakejoin data-quality reports"}]
    external_views = [
        {
            "name": "Data quality",
            # Relative (no leading slash): the UI resolves it against its own base URL.
            "href": "lakejoin/reports/",
            "url_route": "data-quality",
            "destination": "nav",
            "category": "browse",
        }
    ]
    global_operator_extra_links = [DataQualityReportLink()]
