"""Data-quality checks of every batch, with Great Expectations' own expectations.

Each view kind declares its validations (views/*.py): expectations on the rows the batch wrote
(keys unique and not null, references that resolve at the pinned versions, list lengths) and on
the output table at its new version (row counts against the sources). A user suite
(`expectations/<pipeline>/<view>.json`, see suites.py) runs on the output table too.

Every batch leaves, under `<storage>/_lakejoin/reports/`: a JSON report
(`<view>/batch-NNNNNN.json`), GE's Data Docs pages of its validations (`data_docs/`), and
lakejoin's report pages and plots (reports.py). The JSON report is written at the check; the
pages of a run's passing batches are built once, after its last view (`pages_once_per_run`).
A failed critical check raises QualityCheckError before the commit, after its pages are
written, naming the failed expectations and the report. A failed expectation of severity
`warning` is reported only.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakejoin.delta.change_feed import null_key
from lakejoin.errors import QualityCheckError
from lakejoin.quality.data_docs import DataDocs, Validated, on_driver
from lakejoin.quality.reports import write_batch_pages, write_run_pages
from lakejoin.quality.suites import user_suite
from lakejoin.quality.validations import CheckResult, QualityReport, Validation
from lakejoin.spec.layout import reports_folder, reports_root
from lakejoin.spec.model import Columns, PipelineSpec, View

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakejoin.delta.plans import BatchPlan
FK_RESOLVED = "_lj_fk_resolved"
USER_SUITE = "user_suite"

log = logging.getLogger(__name__)
# Held while a batch validates with Great Expectations (GX's context is shared by the views a
# run has in threads, engine/pipeline.py), and while a batch's pages are written at once.
GX_LOCK = threading.RLock()


@dataclass
class _RunPages:
    """What the passing batches of a run leave for one build after its last view: their
    validations' Data Docs pages and their report pages (each view's last batch number, whose
    older results `DataDocs.prune` forgets)."""

    runs: list[Validated] = field(default_factory=list)
    reports: list[Path] = field(default_factory=list)
    batches: dict[str, int] = field(default_factory=dict)


_RUNS: dict[str, _RunPages] = {}  # a reports folder -> its run's pages, while a run is on


def _folder(spec: PipelineSpec) -> str:
    return str(reports_root(spec).resolve())


@contextmanager
def pages_once_per_run(spec: PipelineSpec) -> Iterator[None]:
    """Inside it, a passing batch of `spec` validates and writes its JSON report, and its Data
    Docs and report pages (its own, its view's trends and index, the pipeline's index) are
    built once for the whole run when the block ends: one Data Docs build and one read of the
    batch log, not one a batch. A failing batch still writes its pages at once. Nested, the
    outermost block builds."""
    key = _folder(spec)
    with GX_LOCK:
        outer = key not in _RUNS
        if outer:
            _RUNS[key] = _RunPages()
    try:
        yield
    finally:
        if outer:
            with GX_LOCK:
                pending = _RUNS.pop(key)
            _build_run(spec, pending)


def _build_run(spec: PipelineSpec, pending: _RunPages) -> None:
    """The run's pages, after its last view; like every page, never why a run fails."""
    if pending.runs:
        with GX_LOCK:
            docs = DataDocs.at(reports_root(spec))
            try:
                for view, batch_id in pending.batches.items():
                    docs.prune(view, batch_id)
                docs.build(pending.runs)
            except Exception:
                log.exception("lakejoin: could not build the Data Docs of the run of %s", spec.name)
    if pending.reports:
        try:
            write_run_pages(spec, pending.reports)
        except Exception:
            log.exception("lakejoin: could not write the report pages of the run of %s", spec.name)


def key_expectations(key: Columns) -> list[Any]:
    """A key's expectations: no null in any of its columns, and unique (one column: Great
    Expectations' column uniqueness; several: their compound uniqueness)."""
    import great_expectations as gx

    nulls = [gx.expectations.ExpectColumnValuesToNotBeNull(column=c) for c in key]
    if len(key) == 1:
        return [*nulls, gx.expectations.ExpectColumnValuesToBeUnique(column=key[0])]
    return [*nulls, gx.expectations.ExpectCompoundColumnsToBeUnique(column_list=list(key))]


def with_key_resolution(
    rows: DataFrame, target: DataFrame, columns: Columns, target_key: Columns, flag: str
) -> DataFrame:
    """The rows plus a boolean column `flag`: do the row's `columns` match a key of `target`
    (its `target_key` columns, in order)?"""
    from functools import reduce

    from pyspark.sql import functions as F

    refs = [f"_lj_ref{i}" for i in range(len(columns))]
    found = [f"_lj_tk{i}" for i in range(len(columns))]
    # Only the target keys these rows reference: the check stays proportional to the batch. No
    # distinct on either side (a shuffle, each a Spark job of its own): a semi join keeps each
    # target row once whatever the references repeat, and each row is flagged by a semi and an
    # anti join, so a key the target held twice could not double a row either.
    wanted = rows.select(*[F.col(c).alias(r) for c, r in zip(columns, refs, strict=True)]).where(
        ~null_key(refs)
    )
    on = reduce(lambda a, b: a & b, (target[k] == wanted[r] for k, r in zip(target_key, refs, strict=True)))
    keys = F.broadcast(
        target.join(F.broadcast(wanted), on, how="left_semi").select(
            *[F.col(k).alias(t) for k, t in zip(target_key, found, strict=True)]
        )
    )
    match = reduce(lambda a, b: a & b, (rows[c] == keys[t] for c, t in zip(columns, found, strict=True)))
    resolved = rows.join(keys, match, how="left_semi").withColumn(flag, F.lit(True))
    unresolved = rows.join(keys, match, how="left_anti").withColumn(flag, F.lit(False))
    return resolved.unionByName(unresolved)


def check_batch(
    spec: PipelineSpec,
    view: View,
    plan: BatchPlan,
    validations: list[Validation],
    *,
    rows: DataFrame | None = None,
    held: Any = None,
    size: int | None = None,
    metrics: dict[str, int] | None = None,
) -> QualityReport:
    """Run the view's validations and its user suite (on `rows`, the output rows the batch is
    about to write), before the batch's output commit; write the report, its Data Docs and
    pages; raise QualityCheckError on a failed critical check (then nothing is committed).

    `size`: how many rows the batch writes, when known. Every validation's rows are at most that
    many (one per written row, `ViewKindLogic.validations`), so it decides where GE validates them
    (`data_docs.on_driver`) without a count of its own.

    `metrics` (the batch's counts and phase durations so far) go into the report and its page.

    `held`: `rows` already on the driver (a pyarrow Table, a batch of few keys): a validation of
    `rows` themselves validates that copy, with no Spark job.
    """
    suite = user_suite(spec, view)
    if suite is not None and rows is not None:
        validations = [*validations, Validation(USER_SUITE, rows, suite.expectations)]
    if held is not None and rows is not None:
        local = held.to_pandas()
        validations = [replace(v, rows=local) if v.rows is rows else v for v in validations]
    with GX_LOCK:  # a GX context is one thread's at a time (views run in threads)
        docs = DataDocs.at(reports_root(spec))
        driver = on_driver(size)
        runs = [
            docs.validate(view.name, plan.batch_id, v.scope, v.rows, v.expectations, driver=driver)
            for v in validations
        ]
        pending = _RUNS.get(_folder(spec))
        pages = docs.pages(runs) if pending is not None else _data_docs(docs, view, plan.batch_id, runs)
    checks = [check for run, page in zip(runs, pages, strict=True) for check in _checks(run, page)]
    report_path = write_report(
        spec, view, plan, checks, metrics=metrics or {}, user_suite=suite.file if suite else None
    )
    success = not any(c.blocking for c in checks)
    page_path = None
    if success and pending is not None:  # built with the run's (pages_once_per_run)
        with GX_LOCK:
            pending.runs.extend(runs)
            pending.batches[view.name] = plan.batch_id
    elif not success:  # a failing batch's pages at once; a passing one's wait for its commit
        with GX_LOCK:
            if pending is not None:
                _data_docs(docs, view, plan.batch_id, runs)
            page_path = _write_pages(spec, view, Path(report_path))
    report = QualityReport(success, checks, report_path, page_path)
    if not report.success:
        failed = "; ".join(
            f"{c.scope}: {c.expectation}({_brief(c.kwargs)}) observed {_brief(c.observed)}"
            for c in checks
            if c.blocking
        )
        said = [
            n for v in validations if any(c.blocking and c.scope == v.scope for c in checks) for n in v.notes
        ]
        if said:
            failed += f" ({'; '.join(said)})"
        fix = "nothing was committed; fix the source data and run again (the next run plans afresh)"
        if suite is not None and any(c.blocking and c.scope == USER_SUITE for c in checks):
            fix += f" (or, if an expectation is wrong, fix the suite {suite.file})"
        raise QualityCheckError(
            f"batch {plan.batch_id} failed its checks: {failed}",
            where=f"view '{view.name}', report {page_path or report_path}",
            fix=fix,
        )
    return report


def finish_report(
    spec: PipelineSpec, view: View, report_path: str, metrics: dict[str, int], write: str | None = None
) -> str | None:
    """After the batch commit: the report gets the batch's final counts and the strategy that
    wrote its output (`write`, sink/strategy.py), then its pages."""
    path = Path(report_path)
    payload = json.loads(path.read_text(encoding="utf-8"))
    payload["metrics"] = metrics
    if write is not None:
        payload["write"] = write
    path.write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
    with GX_LOCK:  # the pages' index is the pipeline's
        pending = _RUNS.get(_folder(spec))
        if pending is not None:  # written with the run's (pages_once_per_run)
            pending.reports.append(path)
            return str(path.with_suffix(".html"))
        return _write_pages(spec, view, path)


def _data_docs(docs: DataDocs, view: View, batch_id: int, runs: list[Validated]) -> list[str | None]:
    """GE's Data Docs pages of the runs (relative paths); like the pages, never why a batch fails."""
    try:
        docs.prune(view.name, batch_id)
        return docs.build(runs)
    except Exception:
        log.exception("lakejoin: could not build the Data Docs of view '%s', batch %s", view.name, batch_id)
        return [None] * len(runs)


def _checks(run: Validated, page: str | None) -> list[CheckResult]:
    return [
        CheckResult(
            scope=run.scope,
            expectation=r.expectation_config.type,
            kwargs={k: v for k, v in r.expectation_config.kwargs.items() if k != "batch_id"},
            success=bool(r.success),
            observed=_jsonable({**(r.result or {}), **_exception(r.exception_info)}),
            severity=_severity(r.expectation_config),
            data_docs=page,
        )
        for r in run.result.results
    ]


def _severity(config: Any) -> str:
    severity = getattr(config, "severity", None)
    return str(getattr(severity, "value", severity or "critical"))


def _exception(info: Any) -> dict[str, str]:
    """GE's exception info, flat or per metric, as {"exception": message} when one was raised."""
    if not isinstance(info, dict):
        return {}
    if info.get("raised_exception"):
        return {"exception": str(info.get("exception_message"))}
    for nested in info.values():
        if isinstance(nested, dict) and nested.get("raised_exception"):
            return {"exception": str(nested.get("exception_message"))}
    return {}


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _brief(values: dict[str, Any]) -> str:
    keep = {k: v for k, v in values.items() if k not in ("partial_unexpected_index_list",)}
    return ", ".join(f"{k}={v!r}" for k, v in keep.items())[:300]


def write_report(
    spec: PipelineSpec,
    view: View,
    plan: BatchPlan,
    checks: list[CheckResult],
    *,
    metrics: dict[str, int] | None = None,
    user_suite: str | None = None,
) -> str:
    folder = reports_folder(spec, view.name)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"batch-{plan.batch_id:06d}.json"
    payload = {
        "pipeline": spec.name,
        "view": view.name,
        "kind": view.kind.value,
        "batch_id": plan.batch_id,
        "mode": plan.mode.value,
        "start_versions": plan.start_versions,
        "pinned_versions": plan.pinned_versions,
        "notes": dict(plan.notes),
        "checked_at": datetime.now(UTC).isoformat(),
        "success": not any(c.blocking for c in checks),
        "metrics": metrics or {},
        "user_suite": user_suite,
        "checks": [asdict(c) for c in checks],
    }
    path.write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
    return str(path)


def _write_pages(spec: PipelineSpec, view: View, report: Path) -> str | None:
    """The batch's report page, its view's and pipeline's index; never the reason a batch fails."""
    try:
        return str(write_batch_pages(spec, report))
    except Exception:  # a page that cannot be drawn must not stop the data: log it loudly instead
        log.exception("lakejoin: could not write the report pages of %s", report)
        return None
