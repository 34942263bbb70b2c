"""`lakejoin` command line: run batches and show where each view stands.

lakejoin run pipelines/marketplace.yaml [--view NAME] [--full-refresh]
lakejoin run pipelines/marketplace.yaml --repair-from V|TIMESTAMP [--repair-to V|TIMESTAMP]
    [--fail-fast] [--verbose]
lakejoin status pipelines/marketplace.yaml
lakejoin plan pipelines/marketplace.yaml [--view NAME] [--json] [--full-refresh | --repair-from V|TIMESTAMP]
lakejoin report pipelines/marketplace.yaml [--view NAME] [--last N]
lakejoin explain pipelines/marketplace.yaml VIEW KEY... [--at VERSION] [--json]
lakejoin audit pipelines/marketplace.yaml [--view NAME] [--full]
lakejoin schema    (prints the spec's JSON Schema, for an editor: lakejoin/spec/pipeline.schema.json)

A run ends with what committed, had nothing new, failed or was skipped (it reads a view that
failed). Exit status: 0 when no view failed, 1 when one did, 2 for an error in the command or
the spec (nothing ran), or the first failure under `--fail-fast`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from lakejoin.delta.records import BatchMode
from lakejoin.errors import LakejoinError
from lakejoin.spec.model import PipelineSpec
from lakejoin.spec.parse import load_spec
from lakejoin.spec.registry import KINDS

if TYPE_CHECKING:
    from lakejoin.engine.repair import RepairRange


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lakejoin", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run one batch of each view (or of one view)")
    run.add_argument("spec", help="path to the pipeline spec (YAML)")
    run.add_argument("--view", action="append", help="only this view (repeatable)")
    run.add_argument(
        "--full-refresh", action="store_true", help="recompute every key and MERGE the difference"
    )
    run.add_argument(
        "--repair-from",
        metavar="V|TIMESTAMP",
        help="re-derive the keys that source changes from this version or time touched, at the "
        "last committed versions, without moving the checkpoint",
    )
    run.add_argument("--repair-to", metavar="V|TIMESTAMP", help="end of the repair range (default: now)")
    run.add_argument(
        "--no-checks", action="store_true", help="skip the data-quality checks (not recommended)"
    )
    run.add_argument(
        "--fail-fast",
        action="store_true",
        help="stop at the first view that fails (default: run every view that does not read it)",
    )
    run.add_argument(
        "--parallel",
        type=_width,
        metavar="N",
        help="run up to N views that do not read each other at once (default: "
        "engine.pipeline.DEFAULT_PARALLEL; 1: one at a time)",
    )
    run.add_argument("--verbose", action="store_true", help="show Spark's own log (INFO) as well")
    status = commands.add_parser("status", help="last batch, versions and lag of each view")
    status.add_argument("spec", help="path to the pipeline spec (YAML)")
    plan = commands.add_parser(
        "plan", help="what the next batch of each view would do, and why, before it runs (no JVM)"
    )
    plan.add_argument("spec", help="path to the pipeline spec (YAML)")
    plan.add_argument("--view", action="append", help="only this view (repeatable)")
    plan.add_argument("--json", action="store_true", help="print a JSON document for tools")
    plan.add_argument("--full-refresh", action="store_true", help="plan a run asked for a full refresh")
    plan.add_argument("--repair-from", metavar="V|TIMESTAMP", help="plan a run asked for this repair")
    plan.add_argument("--repair-to", metavar="V|TIMESTAMP", help="end of the repair range (default: now)")
    report = commands.add_parser("report", help="write the data-quality report pages and plots")
    report.add_argument("spec", help="path to the pipeline spec (YAML)")
    report.add_argument("--view", action="append", help="only this view's pages (repeatable)")
    report.add_argument(
        "--last", type=int, default=1, metavar="N", help="rewrite the pages of each view's last N batches"
    )
    explain = commands.add_parser(
        "explain", help="why a view's row is what it is, or why there is none (no JVM)"
    )
    explain.add_argument("spec", help="path to the pipeline spec (YAML)")
    explain.add_argument("view", help="the view")
    explain.add_argument(
        "key", nargs="+", metavar="KEY", help="the row's key: one value per key column, in the key's order"
    )
    explain.add_argument(
        "--at",
        type=int,
        metavar="VERSION",
        help="as of this version of the view's output (default: its latest)",
    )
    explain.add_argument("--json", action="store_true", help="print a JSON document for tools")
    audit = commands.add_parser(
        "audit", help="how much of each view the audit has checked; --full: check every key now"
    )
    audit.add_argument("spec", help="path to the pipeline spec (YAML)")
    audit.add_argument("--view", action="append", help="only this view (repeatable)")
    audit.add_argument(
        "--full",
        action="store_true",
        help="compare every key of the output with a recompute at its last batch's pins (Spark)",
    )
    commands.add_parser("schema", help="print the JSON Schema of a pipeline spec (for an editor)")
    return parser


def _width(text: str) -> int:
    """--parallel's value: a whole number of at least 1."""
    try:
        width = int(text)
    except ValueError:
        width = 0
    if width < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of views of at least 1, got {text!r}")
    return width


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    args = _parser().parse_args(argv)
    if args.command == "schema":  # no spec to read
        from lakejoin.spec.json_schema import schema_text

        sys.stdout.write(schema_text())
        return 0
    console = Console()
    # lakejoin's own log lines (a log row not written, a view's failure) at INFO; Spark's own
    # log is set by the session (WARN, or INFO with --verbose).
    logging.basicConfig(
        level=logging.WARNING, format="%(message)s", handlers=[RichHandler(console=console, show_path=False)]
    )
    logging.getLogger("lakejoin").setLevel(logging.INFO)
    try:
        spec = load_spec(args.spec)
        repair = None
        if args.command in ("run", "plan") and (args.repair_from or args.repair_to):
            from lakejoin.engine.repair import RepairRange

            repair = RepairRange.parse(args.repair_from, args.repair_to)
        if args.command == "plan":
            from lakejoin.cli.plan import plan_command

            return plan_command(
                console, spec, args.view, as_json=args.json, full_refresh=args.full_refresh, repair=repair
            )
        if args.command == "run":
            return _run(
                console,
                spec,
                args.view,
                full_refresh=args.full_refresh,
                repair=repair,
                checks=not args.no_checks,
                fail_fast=args.fail_fast,
                parallel=args.parallel,
                verbose=args.verbose,
            )
        if args.command == "explain":
            from lakejoin.cli.explain import explain_command

            return explain_command(console, spec, args.view, args.key, at=args.at, as_json=args.json)
        if args.command == "audit":
            from lakejoin.cli.audit import audit_command

            return audit_command(console, spec, args.view, full=args.full)
        if args.command == "report":
            return _report(console, spec, args.view, last=args.last)
        return _status(console, spec)
    except LakejoinError as exc:
        if getattr(args, "json", False):  # a tool reads stdout: the error as a document, exit 2
            error = {"type": type(exc).__name__, "what": exc.what, "where": exc.where, "fix": exc.fix}
            print(json.dumps({"error": error}, indent=2))
            return 2
        console.print(f"[bold red]error[/] {type(exc).__name__}: {exc}", highlight=False, soft_wrap=True)
        return 2


def _run(
    console: Console,
    spec: PipelineSpec,
    views: list[str] | None,
    *,
    full_refresh: bool,
    repair: RepairRange | None = None,
    checks: bool,
    fail_fast: bool = False,
    parallel: int | None = None,
    verbose: bool = False,
) -> int:
    from lakejoin.delta.session import spark_session
    from lakejoin.engine.batch import Phase
    from lakejoin.engine.pipeline import ViewResult, ViewState, run_pipeline, tally

    unknown = [v for v in views or [] if v not in spec.views]
    if unknown:
        raise spec.error("views", f"unknown view(s) {unknown}", f"use one of: {', '.join(spec.views)}")
    names = [v for v in spec.view_order() if not views or v in views]
    with console.status("starting Spark"):
        spark = spark_session(spec.spark, verbose=verbose)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        tasks: dict[str, TaskID] = {}

        def start(name: str) -> Callable[[Phase], None]:
            tasks[name] = progress.add_task(f"{name}: plan", total=len(Phase))

            def step(phase: Phase) -> None:
                progress.update(tasks[name], description=f"{name}: {phase.value}", advance=1)

            return step

        def end(result: ViewResult) -> None:
            task = tasks.get(result.view) or progress.add_task(result.view, total=len(Phase))
            colour = "red" if result.state is ViewState.FAILED else ""
            label = f"{result.view}: {result.state.value}"
            progress.update(task, completed=len(Phase), description=f"[{colour}]{label}" if colour else label)

        # Views that read views run after them, whatever order they were named in; a view that
        # fails skips only the views that read it (unless --fail-fast).
        results = run_pipeline(
            spark,
            spec,
            names,
            full_refresh=full_refresh,
            repair=repair,
            checks=checks,
            fail_fast=fail_fast,
            parallel=parallel,
            on_view=start,
            on_result=end,
        )
    summaries = [r.summary for r in results if r.summary is not None]
    if summaries:
        console.print(summary_table(summaries))
    for summary in summaries:
        for topic, note in summary.notes.items():
            console.print(f"[yellow]{summary.view}: {topic} {note}[/]")
        if summary.report:
            page = summary.report.removesuffix(".json") + ".html"
            shown = page if os.path.exists(page) else summary.report
            console.print(f"[dim]{summary.view}: data-quality report {shown}[/]")
    for result in results:
        if result.state is ViewState.FAILED:
            console.print(
                f"[bold red]failed[/] {result.view}: {result.error_type}: {result.error}",
                highlight=False,
                soft_wrap=True,
            )
        elif result.state is ViewState.SKIPPED:
            console.print(f"[yellow]skipped[/] {result.view}: {result.error}", highlight=False)
    failed = [r.view for r in results if r.state is ViewState.FAILED]
    console.print(f"pipeline {spec.name}: {tally(results)}", highlight=False)
    return 1 if failed else 0


def _report(console: Console, spec: PipelineSpec, views: list[str] | None, *, last: int) -> int:
    from lakejoin.quality.reports import write_reports

    unknown = [v for v in views or [] if v not in spec.views]
    if unknown:
        raise spec.error("views", f"unknown view(s) {unknown}", f"use one of: {', '.join(spec.views)}")
    names = [v for v in spec.view_order() if not views or v in views]
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("report pages", total=len(names))
        index = write_reports(
            spec,
            views=names,
            last=last,
            on_view=lambda name: progress.update(task, advance=1, description=f"report pages: {name}"),
        )
    console.print(f"data-quality reports of pipeline {spec.name}: [bold]{index}[/]")
    return 0


def _versions(pins: dict[str, int]) -> str:
    return ", ".join(f"{k}@{v}" for k, v in sorted(pins.items()) if not k.startswith("_"))


def summary_table(summaries: list) -> Table:  # noqa: ANN001 - list[BatchSummary]
    table = Table(title="lakejoin batches")
    for column in (
        "view",
        "batch",
        "mode",
        "outcome",
        "versions read",
        "changed keys",
        "affected",
        "inserted",
        "updated",
        "deleted",
        "unchanged skipped",
        "view kind",
        "write",
    ):
        table.add_column(
            column,
            justify="right"
            if column in ("batch", "affected", "inserted", "updated", "deleted", "unchanged skipped")
            else "left",
        )
    for s in summaries:
        start = s.start_versions
        if s.mode is BatchMode.FULL_REFRESH:
            read = "snapshots " + _versions(s.pinned_versions)
        else:
            read = ", ".join(
                f"{k} {start[k] + 1 if k in start else 0}..{v}"
                for k, v in sorted(s.pinned_versions.items())
                if not k.startswith("_")
            )
        changed = ", ".join(f"{k} {n}" for k, n in s.changed_keys.items()) or "-"
        outcome = s.outcome.value
        if not s.output_applied:
            outcome += " (output already written)"
        table.add_row(
            s.view,
            str(s.batch_id or "-"),
            s.mode.value if s.mode else "-",
            outcome,
            read if s.batch_id else f"nothing new ({_versions(s.pinned_versions)})",
            changed,
            str(s.affected_keys),
            str(s.inserted),
            str(s.updated),
            str(s.deleted),
            str(s.unchanged_skipped),
            kind_details(s.kind_metrics),
            s.write or "-",
        )
    return table


# A summary does not name its view's kind: every kind's labels, which agree where they share a name.
KIND_METRICS = {name: label for kind in KINDS.values() for name, label in kind.labels.items()}


def kind_details(metrics: dict[str, int]) -> str:
    """The view kind's own counts, for the summary (composite rows rebuilt, conflicts...). Join
    health and the audit have lines of their own (`lakejoin status`, the notes)."""
    own = {k: n for k, n in metrics.items() if not k.startswith(("health.", "audit."))}
    return ", ".join(f"{KIND_METRICS.get(k, k)} {n}" for k, n in own.items()) or "-"


def _status(console: Console, spec: PipelineSpec) -> int:
    """Where each view stands, from the batch log and the tables' Delta logs (delta-rs: no JVM)."""
    from deltalake import DeltaTable

    from lakejoin.delta.log import BatchLog
    from lakejoin.quality.audit_plan import coverage
    from lakejoin.quality.health import Health

    log = BatchLog.of(spec)
    histories = log.histories(spec.view_order())
    # One block per view, a line per fact: it reads whole at 80 columns, where a table of seven
    # columns cut every cell short.
    console.print(f"[bold]pipeline {spec.name}[/]", highlight=False)
    for name in spec.view_order():
        view = spec.views[name]
        history = histories.get(name, [])
        if not history:
            console.print(f"[bold]{name}[/]: never run", highlight=False)
            continue
        record = history[-1]
        done = next((r for r in reversed(history) if r.status.value == "committed"), None)
        # A batch that found no change of content moved the view on as far as its pins.
        reached = next((r for r in reversed(history) if r.status.value in ("committed", "unchanged")), None)
        lags = []
        for source in view.inputs:
            path = spec.sources[source].path
            current = int(DeltaTable(path).version()) if DeltaTable.is_deltatable(path) else -1
            lags.append(f"{source} {current - (reached.pinned_versions.get(source, -1) if reached else -1)}")
        status = record.status.value + (
            f" ({record.notes['abandoned']})" if "abandoned" in record.notes else ""
        )
        head = f"batch {record.batch_id}, {escape(status)}, {record.mode.value}"
        console.print(f"[bold]{name}[/]: {head}", highlight=False)
        lines = {
            "committed": f"{done.recorded_at} (batch {done.batch_id})" if done else "never",
            "pins": _versions(record.pinned_versions),
            "behind": ", ".join(lags) + " (versions)",
        }
        for why in ("replaced", "definition"):  # why it ran in full
            if why in record.notes and record.status.value == "committed":
                lines["full run"] = record.notes[why]
                break
        lines["audit"] = coverage(history, view.audit).text() if view.audit.enabled else "off"
        health = Health.from_metrics(done.metrics) if done else None
        if health is not None:
            lines["health"] = health.text()
        facts = Table.grid(padding=(0, 1, 0, 0))
        facts.add_column(width=11, justify="right", style="dim")  # a wrapped fact keeps its indent
        facts.add_column(overflow="fold")
        for label, text in lines.items():
            facts.add_row(label, text)
        console.print(facts)
    console.print(f"[dim]batch log: {escape(log.path)}[/]", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
