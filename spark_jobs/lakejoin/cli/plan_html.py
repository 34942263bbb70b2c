"""The plan page of the reports plugin (plugins/lakejoin_reports.py): `lakejoin plan`'s answer
for every view of a pipeline, as HTML in the report pages' style (quality/report_pages.py)."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from lakejoin.cli.plan import facts
from lakejoin.engine.next_batch import Action, NextBatch
from lakejoin.quality.report_pages import document, link, table

CLASSES = {Action.REFUSED: "fail", Action.FULL_REFRESH: "warn", Action.FULL_RECOMPUTE: "warn"}


def plan_page(pipeline: str, plans: Iterable[NextBatch], *, index: str = "./") -> str:
    """The next batch of each view: a table of what it does and why, then each view's facts."""
    plans = list(plans)
    rows = []
    for p in plans:
        action = escape(p.action.value)
        if p.action in CLASSES:
            action = f'<span class="{CLASSES[p.action]}">{action}</span>'
        batch = str(p.batch_id) if p.batch_id is not None and p.has_work else "-"
        anchor = f'<a href="#{escape(p.view, quote=True)}">{escape(p.view)}</a>'
        rows.append([anchor, escape(p.kind), action, batch, escape(p.reason), escape(p.write or "-")])
    blocks = []
    for p in plans:
        lines = [[escape(label), escape(text)] for label, text in facts(p).items()]
        blocks.append(f'<h2 id="{escape(p.view, quote=True)}">{escape(p.view)}</h2>' + table(["", ""], lines))
    body = (
        f"<nav>{link(index, 'pipeline ' + pipeline)}</nav>"
        f"<h1>Plan &middot; pipeline {escape(pipeline)}</h1>"
        "<p class=muted>What the next batch of each view would do, and why, from the Delta logs "
        "alone (<code>lakejoin plan</code>). Estimates are labelled as such; the decisions are "
        "the run's own.</p>"
        + table(["view", "kind", "next batch", "batch", "why", "write"], rows)
        + "".join(blocks)
    )
    return document(f"lakejoin plan {pipeline}", body)
