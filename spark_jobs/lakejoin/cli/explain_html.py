"""`lakejoin explain`'s answer as an HTML page, for the reports plugin's
`GET /lakejoin/reports/<pipeline>/explain` (plugins/lakejoin_reports.py): a form (the view, one
field per key column, an optional output version) and, once asked, the answer that cli/explain_text.py
prints. Pure functions of the spec and the `Explanation`: every value is escaped, and the page is
self-contained like the report pages (inline CSS, no script, no CDN).

>>> output_version(" 3 "), output_version("")
(3, None)
>>> query("display_products", ["p1"], "", "json")
'explain?view=display_products&key=p1&format=json'
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from lakejoin.cli.explain_model import Explanation, changes_title, jsonable, shown_range
from lakejoin.errors import CommandError, LakejoinError
from lakejoin.quality.report_pages import document, link, table, versions_table
from lakejoin.spec.definition import output_key
from lakejoin.spec.explained import Absence, BatchInfo, InputRow, shown_key
from lakejoin.spec.model import PipelineSpec, shown

PAGE = "explain"  # the page's address, relative to the pipeline's index
DONE = {"insert": "inserted", "update": "updated", "delete": "deleted"}


def output_version(text: str) -> int | None:
    """The form's output version: empty is the latest."""
    if not text.strip():
        return None
    try:
        return int(text)
    except ValueError:
        raise CommandError(
            f"{text!r} is not an output version",
            where="explain, output version",
            fix="give a whole number, a version of the view's output (see lakejoin status), or "
            "leave it empty for the latest",
        ) from None


def query(view: str, texts: Sequence[str], at: str, fmt: str = "") -> str:
    """The page's address for a view, key and version (relative, like the report pages' links)."""
    params = [("view", view), *(("key", t) for t in texts)]
    params += [("at", at)] if at else []
    params += [("format", fmt)] if fmt else []
    return f"{PAGE}?{urlencode(params)}"


def explain_page(
    spec: PipelineSpec,
    *,
    view: str = "",
    texts: Sequence[str] = (),
    at: str = "",
    found: Explanation | None = None,
    error: LakejoinError | None = None,
    pages: Collection[int] = (),
) -> str:
    """The page: the form (filled with what was asked), then the error or the answer. `pages`:
    the batches of `found.view` that have a report page (`<view>/batch-NNNNNN.html`)."""
    body = [
        f"<nav>{link('index.html', 'pipeline ' + spec.name)} / explain</nav>",
        f"<h1>Explain a row &middot; pipeline {escape(spec.name)}</h1>",
        "<p class=muted>Why a view's row is what it is, or why the view has no row for a key: "
        "the batch that last wrote it, the input rows at that batch's pins and the changes that "
        "reached it (<code>lakejoin explain</code>, read from the Delta logs).</p>",
        form(spec, view, texts, at),
    ]
    if error is not None:
        body.append(error_box(error))
    if found is not None:
        body.append(answer(found, spec.file, texts, at, pages))
    title = f"{spec.name} explain" + (f" {found.view} {shown_key(found.key)}" if found else "")
    return document(title, "".join(body))


def form(spec: PipelineSpec, view: str, texts: Sequence[str], at: str) -> str:
    """The view select, one text box per key column of the chosen view (the first one before a
    choice), and the output version."""
    names = spec.view_order()
    chosen = view if view in spec.views else names[0]
    options = []
    for name in names:
        key = shown(tuple(output_key(spec, spec.views[name])))
        label = f"{name} ({spec.views[name].kind.value}, key {key})"
        selected = " selected" if name == chosen else ""
        options.append(f'<option value="{escape(name, quote=True)}"{selected}>{escape(label)}</option>')
    fields = []
    for i, column in enumerate(output_key(spec, spec.views[chosen])):
        value = texts[i] if i < len(texts) else ""
        fields.append(
            f'<label>{escape(column)} <input name="key" value="{escape(value, quote=True)}"></label>'
        )
    return (
        f'<form method="get" action="{PAGE}">'
        f'<label>view <select name="view">{"".join(options)}</select></label>'
        + "".join(fields)
        + f'<label>output version <input name="at" value="{escape(at, quote=True)}" size="8" '
        'placeholder="latest" inputmode="numeric"></label>'
        '<button type="submit">Explain</button></form>'
        "<p class=muted>The key fields are the chosen view's key columns, in order; after choosing "
        "another view, press Explain with them empty to get its fields.</p>"
    )


def error_box(error: LakejoinError) -> str:
    """What went wrong, where, and what to do: the error's own words, no trace."""
    parts = [f'<p class="fail">{escape(error.what)}</p>']
    if error.where:
        parts.append(f"<p>where: <code>{escape(error.where)}</code></p>")
    if error.fix:
        parts.append(f"<p>fix: {escape(error.fix)}</p>")
    return f'<div class="error" role="alert">{"".join(parts)}</div>'


def answer(found: Explanation, spec_file: str, texts: Sequence[str], at: str, pages: Collection[int]) -> str:
    view = escape(found.view)
    out = [
        f"<h2>{view} <span class=muted>({escape(found.kind)})</span> &middot; "
        f"<code>{escape(shown_key(found.key))}</code></h2>",
        f"<p>output version {found.output_version} &middot; "
        f"{link(query(found.view, texts, at, 'json'), 'as JSON')} &middot; "
        f"{link(quote(found.view) + '/index.html', 'reports of the view')}</p>",
    ]
    if found.row is not None:
        out.append('<p class="pass">in the view</p>')
        out.append(table(["column", "value"], [[escape(c), value(v)] for c, v in found.row.items()]))
    else:
        out.append('<p class="warn">not in the view</p>')
        if found.reason is not None:
            fix = ""
            if found.reason.code is Absence.DRIFT:
                fix = f": lakejoin run {spec_file} --view {found.view} --full-refresh"
            out.append(f"<p><strong>why not:</strong> {escape(found.reason.text + fix)}</p>")
    out.append("<h2>Last change</h2>")
    if found.last_change is not None:
        done = DONE.get(found.last_change.change or "", "written")
        out.append(f"<p>{done} by:</p>" + batch_table(found.view, found.last_change, pages))
    elif found.history_read:
        out.append("<p>never in the view: its change feed holds no row of this key</p>")
    else:
        out.append("<p class=muted>not known: the output's change feed could not be read (see the notes)</p>")
    read_at = found.read_at
    pinned_by = "-" if read_at.batch_id is None else str(read_at.batch_id)
    out.append(f"<h2>Inputs at the pins of batch {pinned_by}</h2>")
    last = found.last_change
    if last is None or (last.batch_id, last.output_version) != (read_at.batch_id, read_at.output_version):
        out.append(batch_table(found.view, read_at, pages))
    out.append(versions_table({**_versions(read_at), "mode": read_at.mode or "-"}))
    out.append(inputs_table(found.inputs))
    if found.choice is not None:
        choice = found.choice
        kept = [dict(k) for k in choice.chosen]
        masters = [
            [
                f"<code>{escape(shown_key(k))}</code>",
                "-" if version is None else str(version),
                '<span class="pass">kept</span>' if dict(k) in kept else "",
            ]
            for k, version in choice.last_changes
        ]
        out.append(
            f"<h2>Rule</h2><p>{escape(choice.text)} <span class=muted>(resolution "
            f"{escape(choice.resolution.value)})</span></p>"
            + table(["master", "last change of content (version)", ""], masters, {1})
        )
    out.append(f"<h2>{escape(changes_title(found))}</h2>" + changes_table(found))
    if found.notes:
        out.append("<h2>Notes</h2><ul>" + "".join(f"<li>{escape(n)}</li>" for n in found.notes) + "</ul>")
    return "".join(out)


def batch_table(view: str, batch: BatchInfo, pages: Collection[int]) -> str:
    if batch.batch_id is None:
        shown_id = "<span class=muted>a commit lakejoin did not mark</span>"
    elif batch.batch_id in pages:
        shown_id = link(f"{quote(view)}/batch-{batch.batch_id:06d}.html", str(batch.batch_id))
    else:
        shown_id = str(batch.batch_id)
    rows = [
        ["batch", shown_id],
        ["mode", escape(batch.mode or "-")],
        ["output version", str(batch.output_version)],
        ["committed at", escape(batch.committed_at or "-")],
        *([["change", escape(batch.change)]] if batch.change else []),
        *([[escape(topic), escape(note)] for topic, note in batch.notes.items()]),
    ]
    return table(["", ""], rows)


def _versions(batch: BatchInfo) -> dict[str, Any]:
    return {"start_versions": batch.start_versions, "pinned_versions": batch.pinned_versions}


def inputs_table(inputs: Sequence[InputRow]) -> str:
    rows = []
    for i in inputs:
        role = i.role.value + (f" {i.position}" if i.position is not None else "")
        role += f" ({i.how.value})" if i.how is not None else ""
        row = (
            f"<code>{escape(pairs(i.row))}</code>"
            if i.row is not None
            else f'<span class="fail">missing:</span> {escape(i.missing())}'
        )
        key = f"<code>{escape(shown_key(i.key))}</code>" if i.key else "-"
        rows.append([escape(role), escape(i.where), key, row])
    return table(["role", "table", "key", "row"], rows)


def changes_table(found: Explanation) -> str:
    rows = []
    for feed in found.changes:
        for r in feed.rows:
            data = {c: v for c, v in r.items() if c not in ("_change_type", "_commit_version")}
            rows.append(
                [
                    escape(feed.source),
                    escape(str(r["_commit_version"])),
                    escape(str(r["_change_type"])),
                    f"<code>{escape(pairs(data))}</code>",
                ]
            )
        if not feed.rows:
            rows.append(
                [
                    escape(feed.source),
                    shown_range(feed),
                    "-",
                    f"<span class=muted>{escape(feed.note or 'no change')}</span>",
                ]
            )
    return table(["input", "version", "change", "row"], rows) if rows else "<p class=muted>no input</p>"


def value(v: Any) -> str:
    """A cell of the row: text as it is, null shown as such, anything else as JSON."""
    if v is None:
        return "<span class=muted>null</span>"
    if isinstance(v, str):
        return escape(v)
    return f"<code>{escape(_json(v))}</code>"


def pairs(row: Mapping[str, Any]) -> str:
    """`product_id="p1", price=1.5, merchant_id=null` (not escaped)."""
    return ", ".join(f"{c}={_json(v)}" for c, v in row.items())


def _json(v: Any) -> str:
    return json.dumps(jsonable(v), ensure_ascii=False, default=str)
