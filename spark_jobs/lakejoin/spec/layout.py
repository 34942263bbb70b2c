"""Where a pipeline keeps its tables and folders under the spec's `storage`:

    views/<view>                  a view's output, when the spec gives it no `path`
    _lakejoin/batch_log           the batch log (delta/log.py)
    _lakejoin/routing/<view>      a view's state table (rekey's index)
    _lakejoin/health/<view>       a view's flagged keys (join health, engine/health.py)
    _lakejoin/reports/            the reports: each view's JSON reports and pages in a folder of
                                  its own (quality/reports.py), GE's Data Docs beside them

The one place that names these paths; the files inside the reports folder are named by the
reports themselves. In the spec's layer, because the parser places a view's output.
"""

from __future__ import annotations

from pathlib import Path

from lakejoin.spec.model import PipelineSpec, View


def output_path(storage: str, view: str) -> str:
    """Where a view writes its output when the spec gives it no `path`."""
    return str(Path(storage) / "views" / view)


def _own_folder(spec: PipelineSpec) -> Path:
    """Where lakejoin keeps its own tables and files (batch log, state tables, flagged keys,
    reports)."""
    return Path(spec.storage) / "_lakejoin"


def batch_log_path(spec: PipelineSpec) -> str:
    """Where the pipeline's batch log is."""
    return str(_own_folder(spec) / "batch_log")


def state_path(spec: PipelineSpec, view: View) -> str:
    """Where a view keeps its state (rekey's re-keyed index)."""
    return str(_own_folder(spec) / "routing" / view.name)


def health_path(spec: PipelineSpec, view: View) -> str:
    """Where a view keeps its flagged keys (engine/health.py)."""
    return str(_own_folder(spec) / "health" / view.name)


def reports_root(spec: PipelineSpec) -> Path:
    """The pipeline's reports folder: the JSON reports, their pages, GE's Data Docs."""
    return _own_folder(spec) / "reports"


def reports_folder(spec: PipelineSpec, view: str) -> Path:
    """The folder of a view's JSON reports and pages."""
    return reports_root(spec) / view
