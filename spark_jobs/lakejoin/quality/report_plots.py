"""The trend plots of a view's recent batches (matplotlib, Agg, one SVG per batch page).

Three panels share the batch axis:
- lag: the source versions each incremental batch read (pinned minus start), per source. The
  plan pins each source's latest version, so this is how many commits the view was behind that
  source when the batch started. A full refresh or repair reads snapshots, so it has no point.
- rows changed: inserted, updated and deleted output rows, stacked.
- duration: seconds per phase of the batch protocol, stacked;
- join health (a view that counts it, issue 40): each measure's total in the view after the
  batch (rows without their right row, null fks...), and the oldest waiting row's age in batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

COUNTS = ("inserted", "updated", "deleted")
COLOURS = {"inserted": "#2f9e44", "updated": "#1c7ed6", "deleted": "#e03131"}
PHASES = ("plan", "changes", "affected keys", "recompute", "health", "check", "write", "audit", "commit")
HEALTH = "health."  # quality/health.py's metrics
NOT_TOTALS = ("health.rows", "health.waiting_s", "health.late")


@dataclass(frozen=True)
class BatchPoint:
    """One batch of a view, as the plots need it."""

    batch_id: int
    mode: str
    lag: dict[str, int] = field(default_factory=dict)  # source -> versions read; empty: not incremental
    counts: dict[str, int] = field(default_factory=dict)  # inserted, updated, deleted
    seconds: dict[str, float] = field(default_factory=dict)  # phase -> duration
    failed: bool = False
    health: dict[str, int] = field(default_factory=dict)  # measure -> total; waiting_batches


def batch_point(
    batch_id: int,
    mode: str,
    start: dict[str, int],
    pinned: dict[str, int],
    metrics: dict[str, int],
    *,
    failed: bool = False,
) -> BatchPoint:
    lag = {}
    if mode == "incremental":
        # `_`-pins are the view's own state tables, not sources it lags behind.
        lag = {s: v - start.get(s, -1) for s, v in sorted(pinned.items()) if not s.startswith("_")}
    return BatchPoint(
        batch_id=batch_id,
        mode=mode,
        lag=lag,
        counts={name: int(metrics.get(name, 0)) for name in COUNTS},
        seconds={k[3:]: v / 1000 for k, v in metrics.items() if k.startswith("ms.")},
        failed=failed,
        health={
            k[len(HEALTH) :]: int(v)
            for k, v in metrics.items()
            if k.startswith(HEALTH) and k not in NOT_TOTALS
        },
    )


def write_trends(points: list[BatchPoint], path: Path, title: str) -> Path:
    """Draw the panels for `points` (oldest first) into `path` (.svg, or .png)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context({"svg.fonttype": "none", "font.size": 8, "axes.spines.top": False}):
        measured = any(p.health for p in points)
        panels = 4 if measured else 3
        figure, axes = plt.subplots(panels, 1, figsize=(8, 2.1 * panels + 0.1), sharex=True)
        lag, rows, duration = axes[:3]
        positions = list(range(len(points)))
        if measured:
            _health_panel(axes[3], points, positions)
        _lag_panel(lag, points, positions)
        _stacked(rows, positions, [(n, [p.counts.get(n, 0) for p in points]) for n in COUNTS], COLOURS)
        rows.set_ylabel("rows changed")
        seen = {phase for p in points for phase in p.seconds}
        phases = [ph for ph in PHASES if ph in seen] + sorted(seen - set(PHASES))
        _stacked(duration, positions, [(ph, [p.seconds.get(ph, 0.0) for p in points]) for ph in phases], {})
        duration.set_ylabel("duration (s)")
        bottom = axes[-1]
        bottom.set_xticks(positions, [_label(p) for p in points], rotation=90 if len(points) > 15 else 0)
        bottom.set_xlabel("batch (* full refresh or repair, ! failed its checks)")
        figure.suptitle(title)
        figure.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, format=path.suffix.lstrip(".") or "svg", bbox_inches="tight")
        plt.close(figure)
    return path


def _lag_panel(axes: Any, points: list[BatchPoint], positions: list[int]) -> None:
    sources = list(dict.fromkeys(s for p in points for s in p.lag))
    for source in sources:
        xs = [x for x, p in zip(positions, points, strict=True) if source in p.lag]
        axes.plot(xs, [points[x].lag[source] for x in xs], marker="o", markersize=3, label=source)
    if sources:
        _legend(axes)
    else:
        axes.text(0.5, 0.5, "no incremental batch yet", transform=axes.transAxes, ha="center")
    axes.set_ylabel("lag (versions)")


def _health_panel(axes: Any, points: list[BatchPoint], positions: list[int]) -> None:
    """Each health measure's total after the batch (a line), batches without one skipped."""
    measures = list(dict.fromkeys(m for p in points for m in p.health))
    for measure in measures:
        xs = [x for x, p in zip(positions, points, strict=True) if measure in p.health]
        label = "oldest waiting (batches)" if measure == "waiting_batches" else measure
        axes.plot(xs, [points[x].health[measure] for x in xs], marker="o", markersize=3, label=label)
    _legend(axes)
    axes.set_ylabel("join health (rows)")


def _stacked(axes: Any, positions: list[int], series: list[tuple[str, list[Any]]], colours: dict) -> None:
    bottom = [0.0] * len(positions)
    for name, values in series:
        axes.bar(positions, values, bottom=bottom, label=name, color=colours.get(name), width=0.7)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    if series:
        _legend(axes)


def _legend(axes: Any) -> None:
    axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)


def _label(point: BatchPoint) -> str:
    mark = "" if point.mode == "incremental" else "*"
    return f"{point.batch_id}{mark}{'!' if point.failed else ''}"
