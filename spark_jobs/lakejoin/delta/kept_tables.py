"""Where lakejoin keeps a view's own tables, beside its output: the state tables a kind keeps
(rekey's index) and join health's flagged keys. Both are pinned with the view's batches."""

from __future__ import annotations

from pathlib import Path

from lakejoin.spec.model import PipelineSpec, View


def state_path(spec: PipelineSpec, view: View) -> str:
    """Where a view keeps its state (rekey's re-keyed index)."""
    return str(Path(spec.state_path) / "routing" / view.name)


def health_path(spec: PipelineSpec, view: View) -> str:
    """Where a view keeps its flagged keys (engine/health.py)."""
    return str(Path(spec.state_path) / "health" / view.name)
