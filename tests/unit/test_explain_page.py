"""`lakejoin explain`'s answer as the reports plugin's HTML page (cli/explain_html.py), from
`Explanation`s built by hand: the form, the row or why it is not there, the batch, the inputs,
the rule, the changes, the notes, every value escaped; the errors a user can cause, in their own
words. tests/e2e/test_explain.py asks the plugin's route on a lake real batches wrote."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lakejoin.cli.explain_html import explain_page, output_version, query
from lakejoin.cli.explain_model import ChangeRows, Explanation
from lakejoin.errors import BatchStateError, CommandError
from lakejoin.quality.report_pages import ViewRow, pipeline_index
from lakejoin.spec.explained import (
    Absence,
    BatchInfo,
    Choice,
    InputRow,
    Reason,
    Role,
)
from lakejoin.spec.model import JoinHow, Resolution
from tests.unit.shop import shop

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "<script>alert('x')</script>"
BATCH = BatchInfo(
    batch_id=7,
    mode="incremental",
    output_version=12,
    committed_at="2026-01-02T03:04:05.678+00:00",
    start_versions={"products": 3, "merchants": 1, "_routing": 5},
    pinned_versions={"products": 4, "merchants": 2, "_routing": 6},
    notes={"strategy": "incremental <fast>"},
    change="update",
)
LEFT = {"product_id": "p1", "name": HOSTILE, "merchant_id": "m1"}
RIGHT = {"merchant_id": "m1", "logo": "a&b.png"}


def explanation(**changes) -> Explanation:  # noqa: ANN003 - the fields to change
    fields = {
        "pipeline": "shop",
        "view": "logos",
        "kind": "fk_join",
        "key": {"product_id": "p1"},
        "output_path": "/lake/logos",
        "output_version": 12,
        "row": {**LEFT, "logo": "a&b.png", "price": 1.5, "missing": None},
        "history_read": True,
        "last_change": BATCH,
        "read_at": BATCH,
        "inputs": [
            InputRow(Role.LEFT, "products", 4, {"product_id": "p1"}, LEFT),
            InputRow(Role.RIGHT, "merchants", 2, {"merchant_id": "m1"}, RIGHT, how=JoinHow.INNER),
        ],
        "choice": None,
        "changes": [
            ChangeRows(
                "products",
                Role.LEFT,
                4,
                4,
                [{**LEFT, "_change_type": "update_postimage", "_commit_version": 4}],
            ),
            ChangeRows("merchants", Role.RIGHT, 2, 2, []),
        ],
        "changes_of": 7,
        "reason": None,
        "notes": [],
    }
    return Explanation(**{**fields, **changes})


def text_of(page: str) -> str:
    """The page's words, without its tags and style, entities decoded."""
    page = re.sub(r"<style>.*?</style>", " ", page, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_a_row_in_the_view_its_batch_pins_inputs_and_changes():
    page = explain_page(shop(), view="logos", texts=["p1"], found=explanation(), pages={7})
    words = text_of(page)

    assert "logos (fk_join) · product_id='p1'" in words
    assert "output version 12" in words and "in the view" in words and "not in the view" not in words
    # the row, column by column: text as it is, a number as JSON, a null as null
    assert "<td>logo</td><td>a&amp;b.png</td>" in page
    assert "<td>price</td><td><code>1.5</code></td>" in page
    assert "<td>missing</td><td><span class=muted>null</span></td>" in page
    # the batch that last wrote it, linked to its report page, with the batch log's note
    assert "updated by: batch 7 mode incremental output version 12" in words
    assert "committed at 2026-01-02T03:04:05.678+00:00 change update strategy incremental <fast>" in words
    assert 'href="logos/batch-000007.html"' in page
    # the pins: inputs and the view's state table
    assert "Inputs at the pins of batch 7" in words
    assert "<td>products</td><td class=n>3</td><td class=n>4</td><td class=n>1</td>" in page
    assert "_routing (state table)" in words
    # the inputs with their roles, and the change rows of the batch
    assert 'left products@4 product_id=\'p1\' product_id="p1", name="' + HOSTILE in words
    assert 'right (inner) merchants@2 merchant_id=\'m1\' merchant_id="m1", logo="a&b.png"' in words
    assert 'products 4 update_postimage product_id="p1"' in words
    assert "merchants 2..2 - no change" in words
    assert 'href="explain?view=logos&amp;key=p1&amp;format=json"' in page
    assert "Rule" not in words and "why not" not in words


def test_every_value_is_escaped():
    key = {"product_id": "o'1\"<b>"}
    found = explanation(
        key=key,
        view="logos",
        row={"name": HOSTILE},
        notes=[f"change feed unreadable: {HOSTILE}"],
        last_change=BatchInfo(None, None, 3, None, {}, {}, change="insert"),
    )
    page = explain_page(shop(), view="logos", texts=[key["product_id"]], at="<1>", found=found)

    assert "<script>" not in page and "<b>" not in page and "<1>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert 'value="o&#x27;1&quot;&lt;b&gt;"' in page  # the key field, filled with what was asked
    assert 'name="at" value="&lt;1&gt;"' in page
    words = text_of(page)
    assert f"change feed unreadable: {HOSTILE}" in words
    assert "inserted by: batch a commit lakejoin did not mark" in words
    assert "://" not in page  # self-contained: no CDN, no external asset


def test_a_key_not_in_the_view_says_why():
    missing = InputRow(
        Role.RIGHT, "merchants", 2, {"merchant_id": "m2"}, None, how=JoinHow.INNER, deleted_at=2
    )
    found = explanation(
        key={"product_id": "p2"},
        row=None,
        last_change=None,
        inputs=[InputRow(Role.LEFT, "products", 4, {"product_id": "p2"}, LEFT), missing],
        reason=Reason(Absence.NO_RIGHT_ROW, f"merchants joins inner and {missing.missing()}"),
    )
    words = text_of(explain_page(shop(), view="logos", texts=["p2"], found=found))

    assert "not in the view" in words
    assert (
        "why not: merchants joins inner and no row with merchant_id='m2' at version 2, "
        "deleted at version 2" in words
    )
    assert "never in the view: its change feed holds no row of this key" in words
    assert (
        "right (inner) merchants@2 merchant_id='m2' missing: no row with merchant_id='m2' at version 2"
        in words
    )
    # the batch the inputs were read at, shown on its own when it is not the last change
    assert "Inputs at the pins of batch 7 batch 7 mode incremental" in words

    unread = explanation(row=None, last_change=None, history_read=False, reason=None, notes=["vacuumed"])
    assert "not known: the output's change feed could not be read" in text_of(
        explain_page(shop(), view="logos", texts=["p1"], found=unread)
    )


def test_drift_says_how_to_rebuild():
    found = explanation(row=None, reason=Reason(Absence.DRIFT, "the output is not what its inputs derive"))
    words = text_of(explain_page(shop(), view="logos", texts=["p1"], found=found))
    assert "lakejoin run shop.yaml --view logos --full-refresh" in words


def test_a_rekey_shows_the_rule_and_the_master_it_kept():
    masters = [({"merchant_id": "m1"}, 2), ({"merchant_id": "m3"}, 3), ({"merchant_id": "m4"}, None)]
    found = explanation(
        view="merchants_by_name",
        kind="rekey",
        key={"display_name": "Acme Inc"},
        row={"display_name": "Acme Inc", "merchant_id": "m3"},
        choice=Choice(Resolution.LATEST, [{"merchant_id": "m3"}], masters, "latest: m3 changed last"),
    )
    page = explain_page(shop(), view="merchants_by_name", texts=["Acme Inc"], found=found)
    words = text_of(page)
    assert "Rule latest: m3 changed last (resolution latest)" in words
    assert "merchant_id='m1' 2 merchant_id='m3' 3 kept merchant_id='m4' -" in words


def test_the_form_has_one_field_per_key_column_of_the_chosen_view():
    spec = shop()
    page = explain_page(spec)  # nothing chosen yet: the first view's fields
    assert page.count("<option ") == len(spec.views)
    assert '<option value="display_products" selected>display_products (fk_join, key product_id)' in page
    assert page.count('name="key"') == 1 and 'name="at" value=""' in page
    assert "in the view" not in text_of(page)

    composite = explain_page(spec, view="merchants_named", texts=["Acme"])
    assert '<option value="merchants_named" selected>' in composite
    fields = re.findall(r'<label>(\w+) <input name="key" value="([^"]*)">', composite)
    assert fields == [("display_name", "Acme"), ("merchant_id", "")]
    assert 'action="explain"' in composite and 'href="index.html"' in composite


@pytest.mark.parametrize(
    "error",
    [
        CommandError("'x' is not of type bigint", where="key column 'id'", fix="give <a number>"),
        BatchStateError("no batch of view 'logos' committed", where="view 'logos'", fix="run it first"),
        shop().error("views", "unknown view 'nope'", "use one of: logos"),
    ],
)
def test_an_error_shows_what_where_and_the_fix(error):
    page = explain_page(shop(), view="logos", texts=["x"], error=error)
    words = text_of(page)
    assert error.what in words and f"where: {error.where}" in words and f"fix: {error.fix}" in words
    assert "<a number>" not in page and "Traceback" not in page


def test_the_output_version_is_a_whole_number_or_empty():
    assert (output_version(""), output_version(" 4")) == (None, 4)
    with pytest.raises(CommandError, match="'four' is not an output version"):
        output_version("four")
    assert query("v w", ["a&b", "1"], "3") == "explain?view=v+w&key=a%26b&key=1&at=3"


def test_the_pipeline_index_links_the_explain_page_only_when_served_by_the_plugin():
    views = [ViewRow("logos", "fk_join", None, (2, "2026-01-02 03:04:05"), "committed")]
    served = pipeline_index("shop", views, explain="explain")
    assert 'href="explain"' in served and 'href="explain?view=logos"' in served
    assert "explain" not in pipeline_index("shop", views)  # on disk, no server answers it


def test_the_explain_page_imports_neither_spark_nor_great_expectations():
    """What the plugin imports to answer: delta-rs and rich, where pyspark cannot be imported."""
    probe = (
        "import json, sys\n"
        "for name in ('pyspark', 'py4j', 'great_expectations'):\n"
        "    sys.modules[name] = None\n"
        "import lakejoin.cli.explain, lakejoin.cli.explain_html, lakejoin.quality.reports\n"
        "print(json.dumps(sorted(m for m, v in sys.modules.items() if v is not None\n"
        "    and m.split('.')[0] in ('pyspark', 'py4j', 'great_expectations', 'delta'))))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "spark_jobs")}
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout) == []
