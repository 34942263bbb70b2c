"""HTML of the report pages: pure functions of a batch's JSON report, no Spark, no network.

Every page is one self-contained file (inline CSS, no script, no CDN); links between pages are
relative, so the reports folder reads the same from disk (file://) and from the Airflow plugin.
Each page carries a Content-Security-Policy that allows just that (`POLICY`): a value that
escaped escaping still could not run a script or send anything anywhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from typing import Any
from urllib.parse import urlencode

from lakejoin.quality.audit_plan import CUTS

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:1.5rem auto;max-width:72rem;padding:0 1rem;color:#1f2328}
h1{font-size:1.4rem;margin:.2rem 0 1rem}h2{font-size:1.1rem;margin:1.6rem 0 .5rem}
table{border-collapse:collapse;margin:.3rem 0;font-size:13px}
th,td{border-bottom:1px solid #d0d7de;padding:.25rem .6rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}
.pass{color:#1a7f37;font-weight:600}.fail{color:#cf222e;font-weight:600}.warn{color:#9a6700;font-weight:600}
nav{font-size:13px;margin-bottom:.5rem}code{font-size:12px;word-break:break-word}
img.trends{max-width:100%;border:1px solid #d0d7de}.muted{color:#656d76}
form{margin:.6rem 0}form label{margin-right:.8rem;white-space:nowrap}input,select,button{font:inherit}
.error{border:1px solid #cf222e;border-radius:6px;background:#fff8f8;padding:.1rem .8rem;margin:.8rem 0}
"""
# The inline <style>, the trends plot beside the page, the explain form (GET, to its own page).
# In a <meta> tag, as here, `frame-ancestors` is ignored: the plugin's header adds it.
POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; base-uri 'none'"
COUNT_ORDER = ("inserted", "updated", "deleted", "affected_keys", "recomputed_rows", "unchanged_skipped")
OBSERVED_KEYS = ("observed_value", "unexpected_count", "unexpected_percent", "partial_unexpected_list")


@dataclass(frozen=True)
class ViewRow:
    """One view's line on the pipeline index."""

    view: str
    kind: str
    report: dict[str, Any] | None  # the view's latest JSON report
    committed: tuple[int, str] | None  # (batch id, recorded at) of its last committed batch
    record_status: str | None  # status of its last batch record


def document(title: str, body: str) -> str:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}"><title>{escape(title)}</title>'
        f'<meta name="viewport" content="width=device-width,initial-scale=1"><style>{STYLE}</style>'
        f"</head><body>{body}</body></html>\n"
    )


def table(head: list[str], rows: list[list[str]], numeric: set[int] | None = None) -> str:
    """A table of already-escaped cells; columns in `numeric` align right."""
    numeric = numeric or set()
    th = "".join(f"<th>{h}</th>" for h in head)
    thead = f"<thead><tr>{th}</tr></thead>" if any(head) else ""  # a table of facts has no header
    body = "".join(
        "<tr>"
        + "".join(f"<td{' class=n' if i in numeric else ''}>{c}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table>{thead}<tbody>{body}</tbody></table>"


def link(href: str, text: str) -> str:
    return f'<a href="{escape(href, quote=True)}">{escape(text)}</a>'


def status(report: dict[str, Any]) -> str:
    checks = report.get("checks", [])
    failed = [c for c in checks if not c["success"]]
    if not report.get("success", True):
        return f'<span class="fail">failed: {len(failed)} of {len(checks)} checks (not committed)</span>'
    if failed:
        return f'<span class="warn">passed, {len(failed)} warning(s)</span>'
    return f'<span class="pass">passed: {len(checks)} checks</span>'


def batch_page(report: dict[str, Any], plot: str | None) -> str:
    """The page of one batch: what it read, what it wrote, each check, its trends."""
    batch = f"batch-{report['batch_id']:06d}"
    nav = (
        f"<nav>{link('../index.html', 'pipeline ' + report['pipeline'])} / "
        f"{link('index.html', 'view ' + report['view'])} / {batch}</nav>"
    )
    facts = [
        ["pipeline", escape(report["pipeline"])],
        ["view", f"{escape(report['view'])} <span class=muted>({escape(report.get('kind', '?'))})</span>"],
        ["batch", str(report["batch_id"])],
        ["mode", escape(report["mode"])],
        *([["write", escape(report["write"])]] if report.get("write") else []),
        *([[escape(topic), escape(note)] for topic, note in report.get("notes", {}).items()]),
        ["checked at", escape(report["checked_at"])],
        ["result", status(report)],
    ]
    if report.get("user_suite"):
        facts.append(["user suite", f"<code>{escape(report['user_suite'])}</code>"])
    body = [
        nav,
        f"<h1>{escape(report['view'])} &middot; batch {report['batch_id']}</h1>",
        table(["", ""], facts),
        "<h2>Versions</h2>",
        versions_table(report),
        "<h2>Rows</h2>",
        counts_table(report.get("metrics", {})),
        "<h2>Checks</h2>",
        checks_table(report.get("checks", [])),
        f"<p>{link('../data_docs/index.html', 'Great Expectations Data Docs (all validations)')}</p>",
    ]
    if plot:
        body.append(trends("The view's recent batches", plot, "as of its latest report"))
    return document(f"{report['view']} {batch}", "".join(body))


def trends(heading: str, plot: str, note: str = "") -> str:
    """The trends plot (lag, rows changed, duration) under its heading."""
    shown = f"<p class=muted>{escape(note)}</p>" if note else ""
    alt = "lag, rows changed and duration per batch"
    return f'<h2>{escape(heading)}</h2>{shown}<img class="trends" src="{escape(plot)}" alt="{alt}">'


def versions_table(report: dict[str, Any]) -> str:
    start, pinned = report.get("start_versions", {}), report.get("pinned_versions", {})
    rows = []
    for name, version in sorted(pinned.items()):
        first = start.get(name)
        state = name.startswith("_")  # the view's own state table, pinned to be re-read on a retry
        if state or report["mode"] != "incremental":
            read = "-" if state else "snapshot"
        else:
            read = str(version - (first if first is not None else -1))
        label = escape(name) + (" <span class=muted>(state table)</span>" if state else "")
        rows.append([label, "-" if first is None else str(first), str(version), read])
    return table(["table", "start version", "pinned version", "versions read"], rows, {1, 2, 3})


def counts_table(metrics: dict[str, int]) -> str:
    if not metrics:
        return "<p class=muted>no counts recorded</p>"
    counts = {k: v for k, v in metrics.items() if not k.startswith("ms.") and k != CUTS}  # a fingerprint
    ordered = [k for k in COUNT_ORDER if k in counts] + sorted(k for k in counts if k not in COUNT_ORDER)
    rows = [[escape(_count_label(k)), str(counts[k])] for k in ordered]
    phases = [[escape(k[3:]), f"{v / 1000:.2f}"] for k, v in metrics.items() if k.startswith("ms.")]
    return table(["count", "rows"], rows, {1}) + (table(["phase", "seconds"], phases, {1}) if phases else "")


def _count_label(metric: str) -> str:
    name, _, detail = metric.partition(".")  # changed_keys.<source>
    return name.replace("_", " ") + (f" ({detail})" if detail else "")


def checks_table(checks: list[dict[str, Any]]) -> str:
    rows = []
    for c in checks:
        result = (
            '<span class="pass">pass</span>'
            if c["success"]
            else f'<span class="{"fail" if c.get("severity", "critical") == "critical" else "warn"}">'
            f"FAIL ({escape(c.get('severity', 'critical'))})</span>"
        )
        docs = link("../" + c["data_docs"], "Data Docs") if c.get("data_docs") else "-"
        rows.append(
            [
                escape(c["scope"]),
                f"<code>{escape(c['expectation'])}</code>",
                f"<code>{escape(_short(c['kwargs']))}</code>",
                result,
                f"<code>{escape(observed(c['observed']))}</code>",
                docs,
            ]
        )
    return table(["scope", "expectation", "arguments", "result", "observed", "details"], rows)


def observed(values: dict[str, Any]) -> str:
    """The part of GE's result a reader needs: the observed value, or what was unexpected."""
    if "exception" in values:
        return "error: " + str(values["exception"])[:300]
    shown = {k: values[k] for k in OBSERVED_KEYS if k in values and values[k] not in (None, [])}
    return _short(shown) if shown else "-"


def _short(values: dict[str, Any], limit: int = 300) -> str:
    text = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in values.items())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def view_index(
    pipeline: str,
    view: str,
    kind: str,
    reports: list[dict[str, Any]],
    plot: str | None,
    *,
    facts: dict[str, str] | None = None,
) -> str:
    """A view's page: what the audit covered and its join health (`facts`), its recent batches,
    newest first, and the trends as of the latest."""
    rows = []
    for r in reports:
        name = f"batch-{r['batch_id']:06d}"
        counts = r.get("metrics", {})
        rows.append(
            [
                link(f"{name}.html", str(r["batch_id"])),
                escape(r["mode"]),
                escape(r["checked_at"][:19].replace("T", " ")),
                status(r),
                *(str(counts.get(k, "-")) for k in ("inserted", "updated", "deleted")),
            ]
        )
    body = [
        f"<nav>{link('../index.html', 'pipeline ' + pipeline)} / view {escape(view)}</nav>",
        f"<h1>{escape(view)} <span class=muted>({escape(kind)})</span></h1>",
        "".join(f"<p><b>{escape(k)}</b>: {escape(v)}</p>" for k, v in (facts or {}).items()),
        table(
            ["batch", "mode", "checked at (UTC)", "checks", "inserted", "updated", "deleted"], rows, {4, 5, 6}
        )
        if rows
        else "<p class=muted>no batch has been checked yet</p>",
    ]
    if plot:
        body.append(trends("Recent batches", plot))
    return document(f"{pipeline} / {view}", "".join(body))


def pipeline_index(
    pipeline: str, views: list[ViewRow], explain: str | None = None, plan: str | None = None
) -> str:
    """A pipeline's page: each view's last checked batch, its result, its last commit; with
    `explain` (the address of the explain page, which only the Airflow plugin serves), a link to
    it and, on each view's line, to it with the view chosen; with `plan` (the plan page's, the
    plugin's too), a link to what the next batches would do."""
    rows = []
    for v in views:
        r = v.report
        committed = (
            f"{v.committed[0]} <span class=muted>{escape(v.committed[1])}</span>" if v.committed else "-"
        )
        if r is None:
            checked = ["-", "-", '<span class="muted">never checked</span>', "-"]
        else:
            page = f"{v.view}/batch-{r['batch_id']:06d}.html"
            changed = "/".join(
                str(r.get("metrics", {}).get(k, "-")) for k in ("inserted", "updated", "deleted")
            )
            checked = [link(page, str(r["batch_id"])), escape(r["mode"]), status(r), changed]
        rows.append(
            [
                link(f"{v.view}/index.html", v.view),
                escape(v.kind),
                *checked,
                committed,
                escape(v.record_status or "-"),
                *([link(f"{explain}?{urlencode({'view': v.view})}", "explain a row")] if explain else []),
            ]
        )
    head = [
        "view",
        "kind",
        "last checked batch",
        "mode",
        "checks",
        "ins/upd/del",
        "last committed",
        "last record",
        *([""] if explain else []),
    ]
    body = (
        f"<h1>Data quality &middot; pipeline {escape(pipeline)}</h1>"
        + table(head, rows)
        + f"<p>{link('data_docs/index.html', 'Great Expectations Data Docs')}</p>"
        + (
            f"<p>{link(explain, 'Explain a row')}: why a view's row is what it is, or why it is not there</p>"
            if explain
            else ""
        )
        + (f"<p>{link(plan, 'Plan')}: what the next batch of each view would do, and why</p>" if plan else "")
    )
    return document(f"lakejoin {pipeline}", body)
