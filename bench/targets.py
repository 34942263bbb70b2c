"""The matrix's targets (issue 23): judged on the batches protocol version 2 measured.

Each target becomes one entry of `targets.json`, `{"target", "measured", "limit", "met", "batch",
"commit"}`, beside the entries of `bench.fixed_cost`; the report shows the same entries as a
table. A batch measured before protocol version 2 (the runs before commit `PROTOCOL_V2`) stays in
the report's tables and is not judged: the targets are about lakejoin as it is.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

from bench.points import fanout_decisions, newest

Table = dict[tuple[int, int], dict[str, dict[str, Any]]]

# The first commit of protocol version 2 (DESIGN §2): a batch is its output's own commit.
PROTOCOL_V2 = "0629992"
# INC/FULL limits at the largest size, by (rate, scenario).
RATIO_LIMITS = {
    (0.01, "facts"): 0.4,
    (0.01, "fk_side"): 0.5,
    (0.01, "recent"): 0.2,
    (0.001, "facts"): 0.25,
    (0.001, "fk_side"): 0.35,
    (0.001, "recent"): 0.1,
}
FLOOR_MEDIAN_LIMIT = 10.0
CROSSOVER_LIMIT = 5_000_000  # orders: INC < FULL at 1 % from this size on, facts and fk_side
CROSSOVER_SCENARIOS = ("facts", "fk_side")
FALLBACK_SHARE = 0.9
# The write phase of each changed order view at the largest size, 1 % facts, against that view's
# FULL in the same batch (issue 37).
ORDER_VIEWS = ("orders_customers", "orders_enriched", "skewed_orders_customers")
WRITE_SHARE_LIMIT = 0.2
MATRIX = "matrix"  # what the entries' `batch` field starts with (fixed_cost's entries keep theirs)


@cache
def is_v2(commit: str) -> bool:
    """Whether the measured commit (`abc1234` or `abc1234-dirty`) has protocol version 2 in it."""
    sha = commit.removesuffix("-dirty")
    found = subprocess.run(
        ["git", "merge-base", "--is-ancestor", PROTOCOL_V2, sha], capture_output=True, check=False
    )
    return found.returncode == 0


def run_commits(records: list[dict[str, Any]]) -> dict[tuple[int, int], str]:
    """(orders, batch) -> the lakejoin commit of the run that measured it ("?" when unrecorded)."""
    commits: dict[tuple[int, int], str] = {}
    commit = "?"
    for record in records:
        if record.get("event") == "tables":
            commit = record.get("commit", "?")
        elif "batch" in record:
            commits[(record["orders"], record["batch"])] = commit
    return commits


def _ratio(v: dict[str, dict[str, Any]], of: str) -> float | None:
    inc, other = v.get("inc", {}).get("seconds"), v.get(of, {}).get("seconds")
    return inc / other if inc is not None and other else None


def write_share(v: dict[str, dict[str, Any]]) -> float | None:
    """The largest share of an order view's FULL seconds its INC write phase took in one batch
    (None: the batch recorded no phases of its views, as runs before issue 37 did not)."""
    inc, full = v.get("inc", {}).get("views") or {}, v.get("full", {}).get("views") or {}
    shares = [
        inc[view]["phases"]["merge"] / full[view]["seconds"]
        for view in ORDER_VIEWS
        if "merge" in (inc.get(view, {}).get("phases") or {}) and full.get(view, {}).get("seconds")
    ]
    return max(shares) if shares else None


def entries(table: Table, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per target, judged on the protocol version 2 batches of `table` (side runs left
    out by the caller); a target nothing measured has `measured` None and is not met."""
    commits = run_commits(records)
    v2 = {point: v for point, v in table.items() if is_v2(commits.get(point, "?"))}
    points = newest(v2)
    largest = max((orders for orders, _ in v2), default=15_000_000)
    found: list[dict[str, Any]] = []

    def add(target: str, measured: float | None, limit: float, batches: list[tuple[int, int]]) -> None:
        found.append(
            {
                "target": target,
                "measured": None if measured is None else round(measured, 3),
                "limit": limit,
                "met": measured is not None and measured <= limit,
                "batch": f"{MATRIX} " + (", ".join(f"{o:,} orders #{b}" for o, b in batches) or "none"),
                "commit": ", ".join(sorted({commits[p] for p in batches})) or "?",
            }
        )

    for (rate, scenario), limit in RATIO_LIMITS.items():
        v = points.get((largest, scenario, rate), {})
        measured = _ratio(v, "full")
        point = [(largest, v["inc"]["batch"])] if measured is not None else []
        add(f"INC/FULL, {scenario} at {rate:.1%}, {largest / 1e6:g} M orders", measured, limit, point)

    v = points.get((largest, "facts", 0.01), {})
    share = write_share(v)
    add(
        f"write phase of a changed order view, facts at 1.0%, {largest / 1e6:g} M orders: slowest "
        "view's write as a share of its FULL in the same batch",
        share,
        WRITE_SHARE_LIMIT,
        [(largest, v["inc"]["batch"])] if share is not None else [],
    )

    floors = [(r, (o, v["inc"]["batch"])) for (o, _, _), v in points.items() if (r := _ratio(v, "floor"))]
    median = statistics.median(r for r, _ in floors) if floors else None
    add("INC/FLOOR, median over the newest batches", median, FLOOR_MEDIAN_LIMIT, [p for _, p in floors])

    # The smallest size from which INC beat FULL at 1 %, in every scenario and at every larger
    # size measured (a crossing at the smallest size measured says "at or below it").
    sizes = sorted({o for o, _, _ in points})
    crossings: list[int | None] = []
    used: list[tuple[int, int]] = []
    for scenario in CROSSOVER_SCENARIOS:
        ratios = [
            (o, r, points[(o, scenario, 0.01)]["inc"]["batch"])
            for o in sizes
            if (r := _ratio(points.get((o, scenario, 0.01), {}), "full")) is not None
        ]
        used += [(o, b) for o, _, b in ratios]
        crossings.append(
            next((o for i, (o, _, _) in enumerate(ratios) if all(r < 1 for _, r, _ in ratios[i:])), None)
        )
    crossover = None if not crossings or None in crossings else float(max(c or 0 for c in crossings))
    # A crossing at the smallest size measured says only "at or below it".
    below = (
        " (at or below: no smaller size measured)" if crossover is not None and crossover == sizes[0] else ""
    )
    add(
        "crossover: the smallest orders table measured from which INC < FULL at 1 %, facts and fk_side"
        + below,
        crossover,
        CROSSOVER_LIMIT,
        sorted(used),
    )

    decisions = fanout_decisions(v2)
    right = sum((chosen == "full") == (full_t <= inc_t) for *_, chosen, inc_t, full_t in decisions)
    add(
        f"the fan-out fallbacks pick the faster strategy: share of {len(decisions)} decisions",
        right / len(decisions) if decisions else None,
        FALLBACK_SHARE,
        sorted({(o, b) for o, b, *_ in decisions}),
    )
    for entry in found:  # the share is met from above, the others from below
        if entry["target"].startswith("the fan-out") and entry["measured"] is not None:
            entry["met"] = entry["measured"] >= FALLBACK_SHARE
    return found


def markdown(found: list[dict[str, Any]]) -> list[str]:
    lines = ["| target | limit | measured | verdict | batches |", "|---|---|---|---|---|"]
    for e in found:
        measured = "—" if e["measured"] is None else f"{e['measured']:,.2f}".rstrip("0").rstrip(".")
        verdict = "not measured" if e["measured"] is None else ("met" if e["met"] else "missed")
        batches = e["batch"].removeprefix(f"{MATRIX} ")
        lines.append(f"| {e['target']} | {e['limit']:,} | {measured} | {verdict} | {batches} |")
    return lines


def write(path: Path, found: list[dict[str, Any]]) -> None:
    """Replace the matrix's entries in targets.json, keep the others (bench.fixed_cost's)."""
    replace_entries(path, MATRIX, found)


def owns(owner: str, entry: dict[str, Any]) -> bool:
    """Whether `entry` of targets.json is `owner`'s: its `batch` is the owner's name, or starts
    with the name and a space. A mere prefix is not enough: `audit_cost` does not own
    `audit_cost_dv`'s entries.

    >>> owns("audit_cost", {"batch": "audit_cost"}), owns("audit_cost", {"batch": "audit_cost_dv"})
    (True, False)
    >>> owns("matrix", {"batch": "matrix 15,000,000 orders #57"})
    True
    """
    batch = str(entry.get("batch", ""))
    return batch == owner or batch.startswith(owner + " ")


def replace_entries(path: Path, batch: str, found: list[dict[str, Any]]) -> None:
    """Replace the entries of targets.json that `batch` owns (one script's, see `owns`) by
    `found`, keep the others in their order."""
    kept = json.loads(path.read_text()) if path.exists() else []
    kept = [e for e in kept if not owns(batch, e)]
    path.write_text(json.dumps(kept + found, indent=2) + "\n")
