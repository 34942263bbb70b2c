"""The points the benchmark's pages, plot and targets judge: each (size, scenario, rate) on its
newest batch, and the batches in which the fan-out fallback chose a strategy (below report, plot
and targets, which all read them)."""

from __future__ import annotations

from typing import Any

# The views with a fan-out fallback: enrich in propagate mode, the two fk_joins, the list_join.
FANOUT_VIEWS = ("orders_enriched", "orders_customers", "skewed_orders_customers", "products_tagged")


def newest(
    table: dict[tuple[int, int], dict[str, dict[str, Any]]],
) -> dict[tuple[int, str, float], dict[str, dict[str, Any]]]:
    """(orders, scenario, rate) -> the variants of its newest batch with an INC outcome: the
    targets judge lakejoin as it is now; older batches of the same point stay in the tables."""
    chosen: dict[tuple[int, str, float], dict[str, dict[str, Any]]] = {}
    for (orders, _), v in sorted(table.items()):
        if "inc" in v:
            chosen[(orders, v["inc"]["scenario"], v["inc"]["rate"])] = v
    return chosen


def fanout_decisions(
    table: dict[tuple[int, int], dict[str, dict[str, Any]]],
) -> list[tuple[int, int, str, dict[str, Any], str, float, float]]:
    """(orders, batch, view, inc outcome, strategy chosen, always-incremental s, always-full s)
    of every batch in which the default threshold chose a strategy for a view with a fallback."""
    decisions = []
    for (orders, batch), v in sorted(table.items()):
        if not {"inc", "inc_nofallback", "inc_alwaysfull"} <= set(v):
            continue
        for view in FANOUT_VIEWS:
            chosen = v["inc"]["views"].get(view, {}).get("strategy")
            inc_t = v["inc_nofallback"]["views"].get(view, {}).get("seconds")
            full_t = v["inc_alwaysfull"]["views"].get(view, {}).get("seconds")
            # Judged only where there was a choice: a change on the one side reached some rows
            # of the many side, so the pinned variants really took different strategies.
            pinned = (
                v["inc_nofallback"]["views"].get(view, {}).get("strategy"),
                v["inc_alwaysfull"]["views"].get(view, {}).get("strategy"),
            )
            if chosen and inc_t is not None and full_t is not None and pinned == ("incremental", "full"):
                decisions.append((orders, batch, view, v["inc"], chosen, inc_t, full_t))
    return decisions
