"""`lakejoin plan SPEC [--view V] [--json]`: what the next batch of each view would do and why,
before it runs, from the Delta logs alone (engine/next_batch.py; delta-rs: no JVM, no Spark
job). `--full-refresh` and `--repair-from/--repair-to` plan what `lakejoin run` would do when
asked the same.

>>> plan_command(console, spec, None, as_json=False)        # doctest: +SKIP
display_products: incremental, batch 8
       why new versions: merchants 5..5
     reads merchants 5..5 (2 change rows), products@9
     ...
"""

from __future__ import annotations

import json
from importlib import resources
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from lakejoin.engine.next_batch import Action, NextBatch, plan_views
from lakejoin.spec.model import PipelineSpec

if TYPE_CHECKING:
    from rich.console import Console

    from lakejoin.engine.repair import RepairRange

COLOURS = {
    Action.NOTHING_NEW: "dim",
    Action.INCREMENTAL: "green",
    Action.FULL_RECOMPUTE: "yellow",
    Action.FULL_REFRESH: "yellow",
    Action.REPAIR: "cyan",
    Action.REFUSED: "bold red",
    Action.SKIPPED: "red",
}


def plan_command(
    console: Console,
    spec: PipelineSpec,
    views: list[str] | None,
    *,
    as_json: bool,
    full_refresh: bool = False,
    repair: RepairRange | None = None,
) -> int:
    unknown = [v for v in views or [] if v not in spec.views]
    if unknown:
        raise spec.error("views", f"unknown view(s) {unknown}", f"use one of: {', '.join(spec.views)}")
    plans = plan_views(spec, views, full_refresh=full_refresh, repair=repair)
    if as_json:
        print(json.dumps(document(spec, plans.values()), indent=2))
        return 0
    console.print(f"[bold]pipeline {escape(spec.name)}[/]: the next batch of each view", highlight=False)
    for plan in plans.values():
        render(console, plan)
    console.print("[dim]estimates are labelled; every decision is the run's own (docs: lakejoin plan)[/]")
    return 0


def document(spec: PipelineSpec, plans: Any) -> dict[str, Any]:  # noqa: ANN401 - Iterable[NextBatch]
    """The plans as `--json` prints them; they validate against `schema()`."""
    return {"pipeline": spec.name, "spec": spec.file, "views": [p.document() for p in plans]}


def schema() -> dict[str, Any]:
    """The JSON Schema of `lakejoin plan --json`'s document (shipped beside this module)."""
    return json.loads(resources.files("lakejoin.cli").joinpath("plan.schema.json").read_text())


def facts(plan: NextBatch) -> dict[str, str]:
    """The plan's lines, by label (the CLI's block of a view; the plugin's page)."""
    lines = {"why": plan.reason}
    if plan.inputs and plan.has_work:
        lines["reads"] = ", ".join(i.text() for i in plan.inputs)
    if plan.fanout is not None:
        lines["fan-out"] = plan.fanout.text()
    if plan.write is not None:
        lines["write"] = plan.write
    if plan.has_work and plan.batch_id is not None:  # a view waiting for another is planned after it
        lines["time"] = plan.estimate.text() if plan.estimate is not None else "no earlier batch like it"
    if plan.fix:
        lines["fix"] = plan.fix
    return lines


def render(console: Console, plan: NextBatch) -> None:
    head = plan.action.value + (f", batch {plan.batch_id}" if plan.batch_id and plan.has_work else "")
    colour = COLOURS[plan.action]
    console.print(f"[bold]{escape(plan.view)}[/] ({plan.kind}): [{colour}]{escape(head)}[/]", highlight=False)
    grid = Table.grid(padding=(0, 1, 0, 0))
    grid.add_column(width=7, justify="right", style="dim")
    grid.add_column(overflow="fold")
    for label, text in facts(plan).items():
        grid.add_row(label, escape(text))
    console.print(grid)
