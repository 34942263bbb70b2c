"""`lakejoin audit SPEC [--view V] [--full]`: how much of each view the continuous audit has
checked (from the batch log, no JVM), or with `--full` every key of each view's output against
a recompute at the pins of its last committed batch (issue 40).

Exit status: 0 when every audited view matches, 1 when one differs (its keys and the command
that mends it are printed), 2 for an error in the command or the spec.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from lakejoin.delta.log import BatchLog
from lakejoin.quality.audit_plan import coverage
from lakejoin.spec.model import PipelineSpec


def audit_command(console: Console, spec: PipelineSpec, views: list[str] | None, *, full: bool) -> int:
    unknown = [v for v in views or [] if v not in spec.views]
    if unknown:
        raise spec.error("views", f"unknown view(s) {unknown}", f"use one of: {', '.join(spec.views)}")
    names = [v for v in spec.view_order() if not views or v in views]
    if not full:
        histories = BatchLog.of(spec).histories(names)
        for name in names:
            view = spec.views[name]
            text = coverage(histories.get(name, []), view.audit).text() if view.audit.enabled else "off"
            console.print(f"[bold]{name}[/]: {escape(text)}", highlight=False)
        return 0
    from lakejoin.delta.session import spark_session
    from lakejoin.engine.audit import audit_view, difference_error

    with console.status("starting Spark"):
        spark = spark_session(spec.spark)
    differ = []
    for name in names:
        view = spec.views[name]
        with console.status(f"{name}: auditing every key"):
            found = audit_view(spark, spec, view)
        if found is None:
            console.print(f"[bold]{name}[/]: never committed, nothing to audit", highlight=False)
        elif not found.differences:
            console.print(f"[bold]{name}[/]: every key matches a recompute", highlight=False)
        else:
            differ.append(name)
            error = difference_error(spec, view, found, "lakejoin audit --full")
            console.print(f"[bold red]{name}[/]: {escape(str(error))}", highlight=False, soft_wrap=True)
    return 1 if differ else 0
