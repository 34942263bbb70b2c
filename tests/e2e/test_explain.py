"""`lakejoin explain` (issue 39) on outputs that real batches wrote: one lake, a view of each kind
(an fk_join left and inner, a list_join, a unique rekey under `on_conflict: latest`, a propagate
enrich with an inner dimension), two batches each (a full refresh, then changes on every side).
Then `lakejoin explain ... --json` in its own process, which starts no JVM, for rows in the view
and keys that are not: the row, the batch that last wrote it and its pins (as the batch log says),
the input rows at those pins, the change rows that reached it, and each reason a key is not there;
and the same answer as the reports plugin's page (plugins/lakejoin_reports.py), behind its login.
The rules themselves are tests/unit/test_explain_rules.py's truth tables."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lakejoin.engine.batch import BatchOutcome, batch_log
from tests.lakehouse import ADDRESSES, CUSTOMERS, MASTERS, PERSONS, PRODUCTS, PURCHASES, Lakehouse, write_spec

pytestmark = pytest.mark.e2e

VIEWS = """\
  display:
    fk_join: {left: products, right: merchants, fk: merchant_id, how: left,
              right_columns: [display_name], fanout_threshold: 1.0}
  logos:
    fk_join: {left: products, right: merchants, fk: merchant_id, how: inner,
              right_columns: [photo_url], fanout_threshold: 1.0}
  homes:
    list_join: {left: persons, list: address_ids, right: addresses, into: addresses,
                fanout_threshold: 1.0}
  by_name:
    rekey: {source: merchants, key: display_name, columns: [country], on_conflict: latest}
  orders:
    enrich:
      fact: purchases
      mode: propagate
      fanout_threshold: 1.0
      dimensions:
        - {table: customers, fk: customer_id, prefix: customer_, how: inner, columns: [name]}
        - {table: products, fk: product_id, prefix: product_, columns: [name]}
"""
KEYS = {
    "products": "product_id",
    "merchants": "merchant_id",
    "persons": "person_id",
    "addresses": "address_id",
    "purchases": "purchase_id",
    "customers": "customer_id",
}


@pytest.fixture(scope="module")
def shop(spark, tmp_path_factory):
    """The lake after two batches of every view (one build, one of changes): its spec."""
    lake = Lakehouse(spark, tmp_path_factory.mktemp("explain"))
    lake.create(
        "merchants",
        MASTERS,
        [
            ("m1", "Acme", "SE", "a.png"),
            ("m2", "Bolt", "DK", "b.png"),
            ("m3", "Cask", "NO", "c.png"),
            ("m4", "Dot", "FI", "d.png"),
        ],
    )
    lake.create(
        "products",
        PRODUCTS,
        [
            ("p1", "pen", 1.0, "m1"),
            ("p2", "cup", 2.0, "m2"),
            ("p3", "lid", 3.0, None),
            ("p4", "mug", 4.0, "m9"),
        ],
    )
    lake.create("persons", PERSONS, [("u1", "Ann", ["a1", "a2", "a9"]), ("u2", "Bob", ["a2"])])
    lake.create("addresses", ADDRESSES, [("a1", "1 Main", "Oslo"), ("a2", "2 Side", "Bergen")])
    lake.create("customers", CUSTOMERS, [("c1", "Ann", "SE"), ("c2", "Bob", "DK")])
    lake.create("purchases", PURCHASES, [("o1", "c1", "p1", 2), ("o2", "c9", "p2", 1), ("o3", "c2", "p2", 1)])
    spec = write_spec(lake, KEYS, VIEWS)
    for view in spec.views:
        assert lake.run(spec, view, checks=False).outcome is BatchOutcome.COMMITTED
    lake.upsert("merchants", "merchant_id", [("m1", "Acme Inc", "SE", "a2.png")])
    lake.upsert("merchants", "merchant_id", [("m3", "Acme Inc", "NO", "c.png"), ("m4", None, "FI", "d.png")])
    lake.delete("merchants", "merchant_id", ["m2"])
    lake.upsert("products", "product_id", [("p1", "pen", 1.5, "m1")])
    lake.upsert("addresses", "address_id", [("a1", "1 Main St", "Oslo")])
    lake.upsert("customers", "customer_id", [("c1", "Annie", "SE")])
    for view in spec.views:
        summary = lake.run(spec, view, checks=False)
        assert (summary.outcome, summary.batch_id) == (BatchOutcome.COMMITTED, 2), view
    return spec


def explain(spec, view: str, *key: str) -> dict:  # noqa: ANN001 - a PipelineSpec
    """`lakejoin explain SPEC VIEW KEY... --json` in a process of its own (no Spark gateway)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY")}
    command = [sys.executable, "-m", "lakejoin.cli", "explain", spec.file, view, *key, "--json"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def plain(pins: dict) -> dict:
    """Pins of the inputs (a state table's, `_routing`, left out)."""
    return {k: v for k, v in pins.items() if not k.startswith("_")}


def inputs(doc: dict) -> list[tuple]:
    return [(i["role"], i["source"], i["version"], i["key"], i["row"]) for i in doc["inputs"]]


def changes(doc: dict, source: str) -> list[tuple]:
    feed = next(c for c in doc["changes"] if c["source"] == source)
    key = KEYS[source]
    return [(r["_commit_version"], r["_change_type"], r[key]) for r in feed["rows"]]


def written_by(doc: dict, batch: int, change: str, spec, view: str) -> None:  # noqa: ANN001
    """The key's last change was `change`, by batch `batch`, whose pins are the batch log's."""
    last = doc["last_change"]
    assert (last["batch_id"], last["change"]) == (batch, change)
    record = next(r for r in batch_log(spec).history(view) if r.batch_id == batch)
    assert plain(last["pinned_versions"]) == plain(record.pinned_versions)
    assert plain(last["start_versions"]) == plain(record.start_versions)


def test_fk_join_rows_their_batch_their_inputs_and_why_a_key_is_not_there(shop):
    p1 = explain(shop, "display", "p1")
    assert p1["row"] == {
        "product_id": "p1",
        "name": "pen",
        "price": 1.5,
        "merchant_id": "m1",
        "display_name": "Acme Inc",
    }
    written_by(p1, 2, "update", shop, "display")
    assert plain(p1["read_at"]["pinned_versions"]) == {"products": 2, "merchants": 4}
    left_row = {"product_id": "p1", "name": "pen", "price": 1.5, "merchant_id": "m1"}
    right_row = {"merchant_id": "m1", "display_name": "Acme Inc", "country": "SE", "photo_url": "a2.png"}
    assert inputs(p1) == [
        ("left", "products", 2, {"product_id": "p1"}, left_row),
        ("right", "merchants", 4, {"merchant_id": "m1"}, right_row),
    ]
    # both changes reached it in batch 2's range: products (1, 2], merchants (1, 4]
    assert changes(p1, "products") == [(2, "update_preimage", "p1"), (2, "update_postimage", "p1")]
    assert changes(p1, "merchants") == [(2, "update_preimage", "m1"), (2, "update_postimage", "m1")]

    p2 = explain(shop, "display", "p2")  # a left join keeps it, without its deleted merchant
    assert (p2["row"]["display_name"], p2["inputs"][1]["row"]) == (None, None)
    assert changes(p2, "merchants") == [(4, "delete", "m2")]
    assert p2["reason"] is None

    gone = explain(shop, "logos", "p2")  # an inner join deleted it with its merchant
    assert (gone["in_view"], gone["row"]) == (False, None)
    written_by(gone, 2, "delete", shop, "logos")
    assert (gone["reason"]["code"], gone["inputs"][1]["deleted_at"]) == ("no_right_row", 4)

    null_fk = explain(shop, "logos", "p3")
    assert (null_fk["last_change"], null_fk["reason"]["code"]) == (None, "null_fk")
    dangling = explain(shop, "logos", "p4")
    assert (dangling["last_change"], dangling["reason"]["code"]) == (None, "no_right_row")
    assert dangling["inputs"][1]["deleted_at"] is None  # m9 never existed
    none = explain(shop, "display", "p9")
    assert (none["reason"]["code"], none["read_at"]["batch_id"]) == ("no_left_row", 2)


def test_list_join_each_element_with_its_right_row_or_missing(shop):
    u1 = explain(shop, "homes", "u1")
    written_by(u1, 2, "update", shop, "homes")
    elements = [(i["position"], i["key"], i["row"]) for i in u1["inputs"] if i["role"] == "element"]
    assert elements == [
        (0, {"address_id": "a1"}, {"address_id": "a1", "street": "1 Main St", "city": "Oslo"}),
        (1, {"address_id": "a2"}, {"address_id": "a2", "street": "2 Side", "city": "Bergen"}),
        (2, {"address_id": "a9"}, None),  # missing: kept with null columns until it arrives
    ]
    assert [e["street"] for e in u1["row"]["addresses"]] == ["1 Main St", "2 Side", None]
    assert changes(u1, "addresses") == [(2, "update_preimage", "a1"), (2, "update_postimage", "a1")]
    assert changes(u1, "persons") == []  # persons did not move in batch 2: (1, 1]
    assert explain(shop, "homes", "u9")["reason"]["code"] == "no_left_row"


def test_rekey_the_masters_holding_a_derived_key_and_the_rule_that_kept_one(shop):
    acme = explain(shop, "by_name", "Acme Inc")
    assert acme["row"] == {"display_name": "Acme Inc", "merchant_id": "m3", "country": "NO"}
    written_by(acme, 2, "insert", shop, "by_name")
    assert sorted(i["key"]["merchant_id"] for i in acme["inputs"]) == ["m1", "m3"]
    rule = acme["rule"]
    assert (rule["resolution"], rule["chosen"]) == ("latest", [{"merchant_id": "m3"}])
    assert {c["key"]["merchant_id"]: c["version"] for c in rule["last_changes"]} == {"m1": 2, "m3": 3}
    assert "conflicts" in acme["last_change"]["notes"]  # the batch log's note of the conflict
    assert changes(acme, "merchants") == [(2, "update_postimage", "m1"), (3, "update_postimage", "m3")]

    bolt = explain(shop, "by_name", "Bolt")  # its master was deleted
    written_by(bolt, 2, "delete", shop, "by_name")
    assert bolt["reason"]["code"] == "no_master_row"
    assert [(i["key"], i["row"], i["deleted_at"]) for i in bolt["inputs"]] == [
        ({"merchant_id": "m2"}, None, 4)
    ]
    moved = explain(shop, "by_name", "Acme")  # its master now holds another name
    assert moved["reason"]["code"] == "no_master_row"
    assert "merchant_id='m1' now holds display_name='Acme Inc'" in moved["reason"]["text"]
    dot = explain(shop, "by_name", "Dot")
    assert (dot["reason"]["code"], dot["last_change"]["change"]) == ("null_derived_key", "delete")


def test_enrich_the_fact_and_each_dimension_row(shop):
    o1 = explain(shop, "orders", "o1")
    assert (o1["row"]["customer_name"], o1["row"]["product_name"]) == ("Annie", "pen")
    written_by(o1, 2, "update", shop, "orders")
    assert [(i["role"], i["source"], i["version"], i["how"]) for i in o1["inputs"]] == [
        ("fact", "purchases", 1, None),
        ("dimension", "customers", 2, "inner"),
        ("dimension", "products", 2, "left"),
    ]
    assert o1["inputs"][1]["row"] == {"customer_id": "c1", "name": "Annie", "country": "SE"}
    assert changes(o1, "customers") == [(2, "update_preimage", "c1"), (2, "update_postimage", "c1")]

    o2 = explain(shop, "orders", "o2")  # its customer never existed, and the dimension is inner
    assert (o2["last_change"], o2["reason"]["code"]) == (None, "no_right_row")
    assert o2["inputs"][1]["key"] == {"customer_id": "c9"}


def test_the_reports_plugin_explains_a_row_to_a_logged_in_user(shop, monkeypatch, tmp_path):
    """The explain page of plugins/lakejoin_reports.py, asked through its FastAPI app: the row
    and its batch, a key's reason for not being in the view, an unknown view's error."""
    from tests.reports_plugin import api_server, load_plugin, logged_in

    plugin = load_plugin(monkeypatch, Path(shop.file).parent, tmp_path / "airflow")
    client = api_server(plugin)
    page = "/lakejoin/reports/lake/explain"
    assert client.get(page, params={"view": "display", "key": "p1"}).status_code == 401  # no login

    with logged_in(plugin):
        index = client.get("/lakejoin/reports/lake/")
        assert 'href="explain"' in index.text and 'href="explain?view=display"' in index.text
        form = client.get(page, params={"view": "homes"})
        assert form.status_code == 200 and '<option value="homes" selected>' in form.text
        assert re.findall(r'<label>(\w+) <input name="key"', form.text) == ["person_id"]

        p1 = client.get(page, params={"view": "display", "key": "p1"})
        assert p1.status_code == 200, p1.text
        words = text_of(p1.text)
        assert "display (fk_join) · product_id='p1'" in words
        assert "in the view" in words and "not in the view" not in words
        for column, value in (("name", "pen"), ("display_name", "Acme Inc"), ("price", "1.5")):
            assert re.search(rf"<td>{column}</td><td>(<code>)?{re.escape(value)}(</code>)?</td>", p1.text)
        assert "updated by: batch 2 mode incremental" in words
        assert "right (left) merchants@4 merchant_id='m1'" in words

        as_json = client.get(page, params={"view": "display", "key": "p1", "format": "json"})
        assert as_json.json() == explain(shop, "display", "p1")  # what `lakejoin explain --json` says

        gone = text_of(client.get(page, params={"view": "logos", "key": "p2"}).text)
        assert "not in the view" in gone and "deleted by: batch 2" in gone
        assert "why not: merchants joins inner and no row with merchant_id='m2' at version 4" in gone

        unknown = client.get(page, params={"view": "nope", "key": "p1"})
        said = text_of(unknown.text)
        assert unknown.status_code == 404 and "Traceback" not in unknown.text
        assert "unknown view 'nope'" in said and "fix: use one of: display, logos" in said
        wrong = client.get(page, params={"view": "display", "key": "p1", "at": "99", "format": "json"})
        assert wrong.status_code == 400 and "has no readable version 99" in wrong.json()["error"]["what"]

        plugin.can_read_dag = lambda dag_id, user: False
        assert client.get(page, params={"view": "display", "key": "p1"}).status_code == 403


def text_of(page: str) -> str:
    """A page's words, without its tags and style, entities decoded."""
    page = re.sub(r"<style>.*?</style>", " ", page, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())
