"""The benchmark's plot: INC, FULL and FLOOR time against change rate, and INC against size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.points import newest

LINES = (
    ("inc", "INC (lakejoin)", "tab:blue"),
    ("full", "FULL", "tab:red"),
    ("floor", "FLOOR", "tab:gray"),
    ("naive", "NAIVE", "tab:orange"),
)
STYLES = (("facts", "-o"), ("recent", ":^"), ("fk_side", "--s"))


def plot(table: dict[tuple[int, int], dict[str, dict[str, Any]]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Each (size, scenario, rate) once, as its newest batch measured it (lakejoin as it is now).
    points_of = newest(table)
    figure, (by_rate, by_size) = plt.subplots(1, 2, figsize=(12, 4.5))
    largest = max((orders for orders, _ in table), default=0)
    for scenario, style in STYLES:
        for variant, label, colour in LINES:
            points = sorted(
                (rate * 100, v[variant]["seconds"])
                for (orders, name, rate), v in points_of.items()
                if orders == largest and variant in v and name == scenario
            )
            if points:
                by_rate.plot(*zip(*points, strict=True), style, color=colour, label=f"{label}, {scenario}")
    by_rate.set(
        xscale="log",
        yscale="log",
        xlabel="change rate (% of the changed source)",
        ylabel="seconds per batch (all views)",
        title=f"{largest:,} orders",
    )
    if by_rate.lines:
        by_rate.legend(fontsize=7)
    for scenario, style in STYLES:
        by_delta: dict[int, list[tuple[int, float]]] = {}
        for (orders, name, rate), v in points_of.items():
            if name == scenario:
                delta = round(rate * orders)
                by_delta.setdefault(delta, []).append((orders, v["inc"]["seconds"]))
        for delta, sizes in sorted(by_delta.items()):
            if len(sizes) > 1:
                by_size.plot(
                    *zip(*sorted(sizes), strict=True),
                    style,
                    label=f"{scenario}, Δ = {delta:,} orders' worth",
                )
    by_size.set(xscale="log", xlabel="orders", ylabel="INC seconds per batch", title="INC at a fixed Δ")
    by_size.set_ylim(bottom=0)
    if by_size.lines:
        by_size.legend(fontsize=7)
    else:
        by_size.text(0.5, 0.5, "one size measured", ha="center", transform=by_size.transAxes)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
