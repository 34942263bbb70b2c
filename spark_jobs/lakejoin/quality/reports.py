"""Report pages of a pipeline's batches, from the batch records and the JSON reports.

Under `<storage>/_lakejoin/reports/`:
- `index.html`: the pipeline, each view's last checked batch, its result and last commit;
- `<view>/index.html`: the view's recent batches and trends;
- `<view>/batch-NNNNNN.html` (next to its `.json`): one batch, its versions, counts, checks,
  links to GE's Data Docs (`data_docs/`);
- `<view>/trends.svg`: lag, rows changed and duration of the view's last 30 batches, as of its
  latest report, shown on the view's pages.

A batch run alone writes its pages at its commit (a failing one at its checks); a run of a
pipeline writes the pages of its batches once, after its last view (`write_run_pages`, from
quality/checks.pages_once_per_run), and a failing batch's at once. `lakejoin report SPEC`
rewrites them from what is on disk and in the batch records.

>>> write_reports(spec)                               # doctest: +SKIP
PosixPath('lakehouse/_lakejoin/reports/index.html')
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lakejoin.delta.log import BatchLog
from lakejoin.delta.records import BatchRecord, BatchStatus
from lakejoin.quality import report_pages
from lakejoin.quality.report_plots import BatchPoint, batch_point, write_trends
from lakejoin.spec.layout import reports_folder, reports_root
from lakejoin.spec.model import PipelineSpec

log = logging.getLogger(__name__)

PLOTTED_BATCHES = 30
LISTED_BATCHES = 50
TRENDS = "trends.svg"

Histories = dict[str, list[BatchRecord]]


def write_batch_pages(spec: PipelineSpec, report: Path) -> Path:
    """At check time: the batch's page, its view's trends and index, and the pipeline's index."""
    write_run_pages(spec, [report])
    return report.with_suffix(".html")


def write_run_pages(spec: PipelineSpec, reports: list[Path]) -> Path:
    """After a run (quality/checks.pages_once_per_run): the pages of the batches it committed,
    the trends and index of each of their views, and the pipeline's index, from one read of
    the batch log."""
    histories = batch_histories(spec)
    latest: dict[str, dict[str, Any]] = {}
    for file in reports:
        report = _load(file)
        write_batch_page(spec, report)
        latest[report["view"]] = report
    for view, report in latest.items():
        write_trends_of(spec, report, histories.get(view, []))
        write_view_index(spec, view, histories.get(view, []))
    return write_pipeline_index(spec, histories)


def write_reports(
    spec: PipelineSpec,
    *,
    views: list[str] | None = None,
    last: int = 1,
    on_view: Callable[[str], None] | None = None,
) -> Path:
    """Rewrite the pages of each view's `last` batches, its trends and index, and the pipeline's
    index; return the pipeline index's path."""
    histories = batch_histories(spec)
    for view in views or spec.view_order():
        reports = [_load(file) for file in json_reports(spec, view)[-max(last, 1) :]]
        for report in reports[-last:] if last > 0 else []:
            write_batch_page(spec, report)
        if reports:
            write_trends_of(spec, reports[-1], histories.get(view, []))
        write_view_index(spec, view, histories.get(view, []))
        if on_view:
            on_view(view)
    return write_pipeline_index(spec, histories)


def json_reports(spec: PipelineSpec, view: str) -> list[Path]:
    """The view's JSON reports, oldest first."""
    return sorted(reports_folder(spec, view).glob("batch-*.json"))


def write_batch_page(spec: PipelineSpec, report: dict[str, Any]) -> Path:
    page = report_pages.batch_page(report, TRENDS)
    return _write(reports_folder(spec, report["view"]) / f"batch-{report['batch_id']:06d}.html", page)


def write_trends_of(spec: PipelineSpec, report: dict[str, Any], history: list[BatchRecord]) -> Path:
    """The view's trends up to the report's batch, in `<view>/trends.svg`; every page shows them."""
    points = trend_points(report, history)
    title = f"{spec.name} / {report['view']}: batches {points[0].batch_id} to {points[-1].batch_id}"
    return write_trends(points, reports_folder(spec, report["view"]) / TRENDS, title)


def trend_points(report: dict[str, Any], history: list[BatchRecord]) -> list[BatchPoint]:
    """The committed batches before the report's batch (at most 29), then the report's batch."""
    earlier = [
        batch_point(r.batch_id, r.mode.value, r.start_versions, r.pinned_versions, r.metrics)
        for r in history
        if r.status is BatchStatus.COMMITTED and r.batch_id < report["batch_id"]
    ]
    # Once committed, the record has the whole batch's durations; the report stops at the check.
    metrics = _committed_metrics(history, report["batch_id"]) or report.get("metrics") or {}
    this = batch_point(
        report["batch_id"],
        report["mode"],
        report.get("start_versions", {}),
        report.get("pinned_versions", {}),
        metrics,
        failed=not report.get("success", True),
    )
    return [*earlier[-(PLOTTED_BATCHES - 1) :], this]


def write_view_index(spec: PipelineSpec, view: str, history: list[BatchRecord]) -> Path:
    files = json_reports(spec, view)[-LISTED_BATCHES:]
    reports = [_load(f) for f in reversed(files)]
    folder = reports_folder(spec, view)
    plot = TRENDS if (folder / TRENDS).exists() else None
    page = report_pages.view_index(
        spec.name, view, spec.views[view].kind.value, reports, plot, facts=trust_facts(spec, view, history)
    )
    return _write(folder / "index.html", page)


def trust_facts(spec: PipelineSpec, view: str, history: list[BatchRecord]) -> dict[str, str]:
    """What the view's page says of the audit's coverage and the view's join health (issue 40),
    from its batch log."""
    from lakejoin.quality.audit_plan import coverage
    from lakejoin.quality.health import Health

    audit = spec.views[view].audit
    facts = {"audit": coverage(history, audit).text() if audit.enabled else "off"}
    done = next((r for r in reversed(history) if r.status is BatchStatus.COMMITTED), None)
    health = Health.from_metrics(done.metrics) if done is not None else None
    if health is not None:
        facts["join health"] = health.text()
    return facts


def write_pipeline_index(spec: PipelineSpec, histories: Histories) -> Path:
    return _write(reports_root(spec) / "index.html", pipeline_index_page(spec, histories))


def pipeline_index_page(
    spec: PipelineSpec,
    histories: Histories | None = None,
    *,
    explain: str | None = None,
    plan: str | None = None,
) -> str:
    """The pipeline's index as of now (the Airflow plugin renders it on each request, with
    `explain` and `plan`, the addresses of its explain and plan pages)."""
    histories = batch_histories(spec) if histories is None else histories
    rows = []
    for view in spec.view_order():
        files = json_reports(spec, view)
        report = _load(files[-1]) if files else None
        history = histories.get(view, [])
        committed = [r for r in history if r.status is BatchStatus.COMMITTED]
        rows.append(
            report_pages.ViewRow(
                view=view,
                kind=spec.views[view].kind.value,
                report=report,
                committed=(committed[-1].batch_id, _when(committed[-1])) if committed else None,
                record_status=_record_status(history[-1], report) if history else None,
            )
        )
    return report_pages.pipeline_index(spec.name, rows, explain, plan)


def _record_status(last: BatchRecord, report: dict[str, Any] | None) -> str:
    # A batch writes its pages between its checks and its commit: a newer report than the last
    # logged batch is a batch that passed its checks and is writing (or died before its commit).
    checked = report is not None and report["batch_id"] > last.batch_id and report.get("success")
    return last.status.value + (
        f" (batch {report['batch_id']} checked, not committed)" if checked and report else ""
    )


def batch_histories(spec: PipelineSpec) -> Histories:
    """Every view's batch log rows, read without Spark; none (and a warning) when unreadable."""
    batch_log = BatchLog.of(spec)
    try:
        return batch_log.histories()
    except Exception:  # delta-rs cannot read it: pages without the records beat no pages
        log.warning("lakejoin: cannot read the batch log at %s", batch_log.path, exc_info=True)
        return {}


def _committed_metrics(history: list[BatchRecord], batch_id: int) -> dict[str, int]:
    """The metrics the batch's commit recorded; none before (or without) its commit."""
    return next((r.metrics for r in history if r.batch_id == batch_id and r.metrics), {})


def _when(record: BatchRecord) -> str:
    return record.recorded_at.strftime("%Y-%m-%d %H:%M:%S") if record.recorded_at else "-"


def _load(file: Path) -> dict[str, Any]:
    return json.loads(file.read_text(encoding="utf-8"))


def _write(path: Path, text: str) -> Path:
    """Write `text` whole or not at all: views of one pipeline may rewrite its index at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)
    return path
