"""`lakejoin explain --json` as truth tables for every view kind, through the command line, on tiny
lakes delta-rs writes as lakejoin's batches would (tests/unit/explain_lake.py): list_join,
enrich (propagate and lookup), rekey (unique with on_conflict latest, and unique: false), an
fk_join on a key of two columns, a view that reads another view, a repair and a full refresh as
the last writer of a row, and a key deleted by a batch that is not the last. Each lake is built
once per module; the tests only read it. test_explain_command.py covers fk_join."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from lakejoin.cli.main import main
from lakejoin.delta.records import BatchMode
from lakejoin.views.rekey import SINCE
from tests.unit.explain_lake import Lake, by_source, explained, feed, ranges
from tests.unit.test_explain_command import SPEC

pytestmark = pytest.mark.unit

FULL, INC, REPAIR = BatchMode.FULL_REFRESH, BatchMode.INCREMENTAL, BatchMode.REPAIR


def failed(capsys: Any, *argv: str) -> str:
    """What `lakejoin explain ARGV` says when it exits 2, on one line."""
    assert main(["explain", *argv]) == 2
    return " ".join(capsys.readouterr().out.split())


def inputs(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(i["role"], i["source"], i["version"], i["how"], i["key"]) for i in doc["inputs"]]


def batch_of(doc: dict[str, Any], which: str = "last_change") -> tuple[Any, ...]:
    b = doc[which]
    return (b["batch_id"], b["mode"], b["output_version"], b["change"])


# --- 1. list_join ------------------------------------------------------------------------------

PEOPLE = """\
pipeline: people
storage: {root}/store
sources:
  persons: {{path: {root}/persons, key: person_id}}
  addresses: {{path: {root}/addresses, key: address_id}}
views:
  person_addresses:
    list_join: {{left: persons, list: address_ids, right: addresses, into: addresses}}
"""
PERSONS = pa.schema(
    [("person_id", pa.string()), ("name", pa.string()), ("address_ids", pa.list_(pa.string()))]
)
ADDRESSES = pa.schema([("address_id", pa.string()), ("street", pa.string())])
ELEMENT = pa.struct([("address_id", pa.string()), ("street", pa.string())])
JOINED = pa.schema([("person_id", pa.string()), ("name", pa.string()), ("addresses", pa.list_(ELEMENT))])


def element(key: str | None, street: str | None) -> dict[str, Any]:
    return {"address_id": key, "street": street}


@pytest.fixture(scope="module")
def people(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """persons v1: u1 [a1, a9, null, a2], u2 [a1], u3 [a2]; addresses v1: a1, a2 (no a9).
    Batch 1 (full refresh at v1, v1). v2: u2 deleted, a2's street changed; batch 2 ((1, 2] of
    both) rewrites u1 and u3 and deletes u2. v3: u3 renamed and u2 back, v4: u2 deleted again;
    batch 3 (persons (2, 4]) rewrites u3 alone: u2 is as absent at 4 as at 2."""
    lake = Lake(tmp_path_factory.mktemp("people"), PEOPLE)
    u1 = ("u1", "Ann", ["a1", "a9", None, "a2"])
    lake.table("persons", PERSONS, [u1, ("u2", "Bob", ["a1"]), ("u3", "Cy", ["a2"])])
    lake.table("addresses", ADDRESSES, [("a1", "Main St"), ("a2", "High St")])
    lake.table("person_addresses", JOINED)
    main_st, a9, null = element("a1", "Main St"), element("a9", None), element(None, None)
    lake.batch(
        "person_addresses",
        1,
        FULL,
        {},
        {"persons": 1, "addresses": 1},
        upserts=[
            ("u1", "Ann", [main_st, a9, null, element("a2", "High St")]),
            ("u2", "Bob", [main_st]),
            ("u3", "Cy", [element("a2", "High St")]),
        ],
    )
    lake.change("persons", deletes=[("u2",)])
    lake.change("addresses", [("a2", "High St 2")])
    high = element("a2", "High St 2")
    lake.batch(
        "person_addresses",
        2,
        INC,
        {"persons": 1, "addresses": 1},
        {"persons": 2, "addresses": 2},
        upserts=[("u1", "Ann", [main_st, a9, null, high]), ("u3", "Cy", [high])],
        deletes=[("u2",)],
    )
    lake.change("persons", [("u3", "Cyd", ["a2"]), ("u2", "Bob", ["a1"])])
    lake.change("persons", deletes=[("u2",)])
    lake.batch(
        "person_addresses",
        3,
        INC,
        {"persons": 2, "addresses": 2},
        {"persons": 4, "addresses": 2},
        upserts=[("u3", "Cyd", [high])],
    )
    return lake


def test_list_join_a_row_with_present_missing_and_null_elements(people, capsys):
    doc = explained(capsys, people.file, "person_addresses", "u1")

    assert (doc["kind"], doc["in_view"], doc["key"]) == ("list_join", True, {"person_id": "u1"})
    assert doc["row"]["addresses"] == [
        element("a1", "Main St"),
        element("a9", None),
        element(None, None),
        element("a2", "High St 2"),
    ]
    assert batch_of(doc) == (2, "incremental", 2, "update")
    assert doc["read_at"] == doc["last_change"]
    left, *elements = doc["inputs"]
    assert (left["role"], left["source"], left["version"], left["row"]["address_ids"]) == (
        "left",
        "persons",
        2,
        ["a1", "a9", None, "a2"],
    )
    assert [(e["role"], e["position"], e["how"], e["version"], e["key"], e["row"]) for e in elements] == [
        ("element", 0, "left", 2, {"address_id": "a1"}, {"address_id": "a1", "street": "Main St"}),
        ("element", 1, "left", 2, {"address_id": "a9"}, None),  # missing: no a9 at version 2
        ("element", 2, "left", 2, None, None),  # a null element looks nothing up
        ("element", 3, "left", 2, {"address_id": "a2"}, {"address_id": "a2", "street": "High St 2"}),
    ]
    assert ranges(doc) == {"persons": (2, 2), "addresses": (2, 2)}
    changes = by_source(doc)
    assert (changes["persons"]["role"], changes["addresses"]["role"]) == ("left", "element")
    assert feed(changes["persons"], "person_id") == []
    assert feed(changes["addresses"], "street") == [
        (2, "update_preimage", "High St"),
        (2, "update_postimage", "High St 2"),
    ]
    assert (doc["reason"], doc["rule"]) == (None, None)


def test_list_join_text_shows_the_missing_element(people, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["explain", people.file, "person_addresses", "u1"]) == 0
    out = capsys.readouterr().out
    assert "missing: no row with address_id='a9' at version 2" in out
    assert "missing: the key it is looked up by holds a null: it matches nothing" in out


def test_list_join_a_left_row_deleted_in_batch_2_and_a_key_never_present(people, capsys):
    gone = explained(capsys, people.file, "person_addresses", "u2")
    assert (gone["in_view"], gone["row"]) == (False, None)
    assert batch_of(gone) == (2, "incremental", 2, "delete")
    assert gone["reason"]["code"] == "no_left_row"
    assert (
        gone["reason"]["text"]
        == "no left row: persons has no row with person_id='u2' at version 4, deleted at version 4"
    )
    assert inputs(gone) == [("left", "persons", 4, None, {"person_id": "u2"})]  # no list: no element

    never = explained(capsys, people.file, "person_addresses", "u9")
    assert (never["in_view"], never["last_change"], never["history_read"]) == (False, None, True)
    assert batch_of(never, "read_at") == (3, "incremental", 3, None)
    assert never["reason"]["code"] == "no_left_row"
    assert never["inputs"][0]["deleted_at"] is None
    assert never["changes_of_batch"] == 3
    assert [(c["source"], c["rows"]) for c in never["changes"]] == [("persons", [])]


# --- 9. a key deleted by a batch that is not the last ------------------------------------------


def test_a_key_deleted_by_batch_2_of_3_shows_batch_2s_changes_read_at_batch_3(people, capsys):
    doc = explained(capsys, people.file, "person_addresses", "u2")

    assert batch_of(doc) == (2, "incremental", 2, "delete")
    assert batch_of(doc, "read_at") == (3, "incremental", 3, None)  # the newest batch's pins
    assert doc["read_at"]["pinned_versions"] == {"persons": 4, "addresses": 2}
    # The changes of the deleting batch: its range (1, 2], where u2 went; batch 3's
    # range (2, 4] holds u2 too (back at 3, gone at 4), which is not what deleted it.
    assert doc["changes_of_batch"] == 2
    assert ranges(doc) == {"persons": (2, 2)}
    assert feed(by_source(doc)["persons"], "name") == [(2, "delete", "Bob")]


# --- 2. enrich, propagate ----------------------------------------------------------------------

SALES = """\
pipeline: sales
storage: {root}/store
sources:
  orders: {{path: {root}/orders, key: order_id}}
  customers: {{path: {root}/customers, key: customer_id}}
  products: {{path: {root}/products, key: product_id}}
views:
  sales:
    enrich:
      fact: orders
      mode: propagate  # the default is lookup (spec/kinds/enrich.py)
      dimensions:
        - {{table: products, fk: product_id, prefix: product_, columns: [title]}}
        - {{table: customers, fk: customer_id, prefix: customer_, columns: [name], how: inner}}
"""
ORDERS = pa.schema(
    [("order_id", pa.int64()), ("customer_id", pa.string()), ("product_id", pa.string()), ("qty", pa.int64())]
)
CUSTOMERS = pa.schema([("customer_id", pa.string()), ("name", pa.string())])
TITLES = pa.schema([("product_id", pa.string()), ("title", pa.string())])
SOLD = pa.schema([*ORDERS, ("product_title", pa.string()), ("customer_name", pa.string())])


@pytest.fixture(scope="module")
def sales(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """orders v1: 1 (c1, p1), 2 (c2, p9: no such product), 3 (no customer), 4 (c2, p1);
    customers v1: c1, c2; products v1: p1. Batch 1 (full refresh) writes 1, 2, 4 (3's inner fk
    is null). v2: c2 deleted, p1 retitled, 4's qty changed; batch 2 ((1, 2] of each) rewrites 1
    and deletes 2 and 4. v3 of orders: 1 and 2 change qty; batch 3 rewrites 1 (2 stays out)."""
    lake = Lake(tmp_path_factory.mktemp("sales"), SALES)
    lake.table(
        "orders", ORDERS, [(1, "c1", "p1", 1), (2, "c2", "p9", 2), (3, None, "p1", 3), (4, "c2", "p1", 4)]
    )
    lake.table("customers", CUSTOMERS, [("c1", "Ann"), ("c2", "Bob")])
    lake.table("products", TITLES, [("p1", "Pen")])
    lake.table("sales", SOLD)
    pins = {"orders": 1, "products": 1, "customers": 1}
    lake.batch(
        "sales",
        1,
        FULL,
        {},
        pins,
        upserts=[
            (1, "c1", "p1", 1, "Pen", "Ann"),
            (2, "c2", "p9", 2, None, "Bob"),
            (4, "c2", "p1", 4, "Pen", "Bob"),
        ],
    )
    lake.change("customers", deletes=[("c2",)])
    lake.change("products", [("p1", "Pen 2")])
    lake.change("orders", [(4, "c2", "p1", 40)])
    start, pins = pins, {"orders": 2, "products": 2, "customers": 2}
    lake.batch(
        "sales", 2, INC, start, pins, upserts=[(1, "c1", "p1", 1, "Pen 2", "Ann")], deletes=[(2,), (4,)]
    )
    lake.change("orders", [(1, "c1", "p1", 11), (2, "c2", "p9", 20)])
    start, pins = pins, {"orders": 3, "products": 2, "customers": 2}
    lake.batch("sales", 3, INC, start, pins, upserts=[(1, "c1", "p1", 11, "Pen 2", "Ann")])
    return lake


def test_enrich_a_fact_with_a_left_and_an_inner_dimension(sales, capsys):
    doc = explained(capsys, sales.file, "sales", "1", "--at", "2")

    assert (doc["kind"], doc["key"], doc["output"]["version"]) == ("enrich", {"order_id": 1}, 2)
    assert doc["row"] == {
        "order_id": 1,
        "customer_id": "c1",
        "product_id": "p1",
        "qty": 1,
        "product_title": "Pen 2",
        "customer_name": "Ann",
    }
    assert batch_of(doc) == (2, "incremental", 2, "update")
    assert inputs(doc) == [
        ("fact", "orders", 2, None, {"order_id": 1}),
        ("dimension", "products", 2, "left", {"product_id": "p1"}),
        ("dimension", "customers", 2, "inner", {"customer_id": "c1"}),
    ]
    assert [i["row"] for i in doc["inputs"][1:]] == [
        {"product_id": "p1", "title": "Pen 2"},
        {"customer_id": "c1", "name": "Ann"},
    ]
    # propagate: a dimension's change reaches the fact, so every dimension's feed is read
    assert ranges(doc) == {"orders": (2, 2), "products": (2, 2), "customers": (2, 2)}
    changes = by_source(doc)
    assert [changes[s]["role"] for s in ("orders", "products", "customers")] == [
        "fact",
        "dimension",
        "dimension",
    ]
    assert feed(changes["products"], "title") == [
        (2, "update_preimage", "Pen"),
        (2, "update_postimage", "Pen 2"),
    ]
    assert changes["orders"]["rows"] == changes["customers"]["rows"] == []

    latest = explained(capsys, sales.file, "sales", "1")
    assert batch_of(latest) == (3, "incremental", 3, "update")
    assert latest["row"]["qty"] == 11
    assert feed(by_source(latest)["orders"], "qty") == [
        (3, "update_preimage", 1),
        (3, "update_postimage", 11),
    ]
    assert ranges(latest) == {"orders": (3, 3), "products": (3, 2), "customers": (3, 2)}  # unmoved: empty


def test_enrich_an_inner_dimension_row_deleted_names_that_dimension(sales, capsys):
    doc = explained(capsys, sales.file, "sales", "2")

    assert doc["in_view"] is False
    assert batch_of(doc) == (2, "incremental", 2, "delete")
    assert batch_of(doc, "read_at") == (3, "incremental", 3, None)
    assert inputs(doc) == [
        ("fact", "orders", 3, None, {"order_id": 2}),
        ("dimension", "products", 2, "left", {"product_id": "p9"}),  # missing too, but left
        ("dimension", "customers", 2, "inner", {"customer_id": "c2"}),
    ]
    assert doc["inputs"][0]["row"]["qty"] == 20
    assert [(i["row"], i["deleted_at"]) for i in doc["inputs"][1:]] == [(None, None), (None, 2)]
    assert doc["reason"] == {
        "code": "no_right_row",
        "text": "customers joins inner and no row with customer_id='c2' at version 2, deleted at version 2",
    }
    # The changes of the deleting batch, 2, not of the newest, 3.
    assert doc["changes_of_batch"] == 2
    assert ranges(doc) == {"orders": (2, 2), "products": (2, 2), "customers": (2, 2)}
    changes = by_source(doc)
    assert feed(changes["customers"], "name") == [(2, "delete", "Bob")]
    assert changes["orders"]["rows"] == []  # 2's qty change at 3 is batch 3's


def test_enrich_a_null_fk_on_an_inner_dimension(sales, capsys):
    doc = explained(capsys, sales.file, "sales", "3")

    assert (doc["in_view"], doc["last_change"]) == (False, None)
    assert doc["reason"]["code"] == "null_fk"
    assert (
        doc["reason"]["text"]
        == "customers joins inner and the key it is looked up by holds a null: it matches nothing"
    )
    assert inputs(doc)[2] == ("dimension", "customers", 2, "inner", None)
    assert doc["inputs"][1]["row"] == {"product_id": "p1", "title": "Pen 2"}


# --- 3. enrich, lookup -------------------------------------------------------------------------

LOOKUP = """\
pipeline: sales
storage: {root}/store
sources:
  orders: {{path: {root}/orders, key: order_id}}
  customers: {{path: {root}/customers, key: customer_id}}
views:
  sales_lookup:
    enrich:
      fact: orders
      mode: lookup
      dimensions:
        - {{table: customers, fk: customer_id, prefix: customer_, columns: [name], how: inner}}
"""
FACTS = pa.schema([("order_id", pa.int64()), ("customer_id", pa.string()), ("qty", pa.int64())])
LOOKED_UP = pa.schema([*FACTS, ("customer_name", pa.string())])


@pytest.fixture(scope="module")
def lookup(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """orders v1: 1 (c1), 2 (c2), 3 (c3); customers v1: c1, c2. Batch 1 (full refresh) writes 1
    and 2 (no c3 yet). v2: c1 renamed, c3 arrives, 1's qty changes; batch 2 re-enriches 1 alone
    (a fact change). v3: c1 and c2 renamed, order 4 (c2) new; batch 3 writes 4 alone."""
    lake = Lake(tmp_path_factory.mktemp("lookup"), LOOKUP)
    lake.table("orders", FACTS, [(1, "c1", 1), (2, "c2", 2), (3, "c3", 3)])
    lake.table("customers", CUSTOMERS, [("c1", "Ann"), ("c2", "Bob")])
    lake.table("sales_lookup", LOOKED_UP)
    pins = {"orders": 1, "customers": 1}
    lake.batch("sales_lookup", 1, FULL, {}, pins, upserts=[(1, "c1", 1, "Ann"), (2, "c2", 2, "Bob")])
    lake.change("customers", [("c1", "Ann B"), ("c3", "Cy")])
    lake.change("orders", [(1, "c1", 10)])
    start, pins = pins, {"orders": 2, "customers": 2}
    lake.batch("sales_lookup", 2, INC, start, pins, upserts=[(1, "c1", 10, "Ann B")])
    lake.change("customers", [("c1", "Ann C"), ("c2", "Bobby")])
    lake.change("orders", [(4, "c2", 4)])
    start, pins = pins, {"orders": 3, "customers": 3}
    lake.batch("sales_lookup", 3, INC, start, pins, upserts=[(4, "c2", 4, "Bobby")])
    return lake


def test_enrich_lookup_lists_no_dimension_feed(lookup, capsys):
    doc = explained(capsys, lookup.file, "sales_lookup", "1")

    assert doc["row"] == {"order_id": 1, "customer_id": "c1", "qty": 10, "customer_name": "Ann B"}
    assert batch_of(doc) == (2, "incremental", 2, "update")
    assert inputs(doc) == [
        ("fact", "orders", 2, None, {"order_id": 1}),
        ("dimension", "customers", 2, "inner", {"customer_id": "c1"}),
    ]
    assert doc["inputs"][1]["row"] == {"customer_id": "c1", "name": "Ann B"}
    # Lookup reads no dimension feed: c1 changed in batch 2's range and again after,
    # and neither change reached the row; only the fact's change did.
    assert [c["source"] for c in doc["changes"]] == ["orders"]
    assert feed(doc["changes"][0], "qty") == [(2, "update_preimage", 1), (2, "update_postimage", 10)]


def test_enrich_lookup_keeps_what_its_batch_saw(lookup, capsys):
    doc = explained(capsys, lookup.file, "sales_lookup", "2")

    assert doc["row"]["customer_name"] == "Bob"  # c2 is Bobby since version 3
    assert batch_of(doc) == (1, "full_refresh", 1, "insert")
    assert doc["inputs"][1]["row"] == {"customer_id": "c2", "name": "Bob"}  # at batch 1's pins
    assert (doc["changes_of_batch"], doc["changes"]) == (1, [])
    assert any("batch 1 was a full refresh" in n for n in doc["notes"])


def test_enrich_lookup_a_fact_left_out_is_not_re_enriched(lookup, capsys):
    doc = explained(capsys, lookup.file, "sales_lookup", "3")

    assert (doc["in_view"], doc["last_change"]) == (False, None)
    assert batch_of(doc, "read_at") == (3, "incremental", 3, None)
    assert doc["inputs"][1]["row"] == {"customer_id": "c3", "name": "Cy"}  # it matches now
    assert doc["reason"]["code"] == "not_reenriched"
    assert [c["source"] for c in doc["changes"]] == ["orders"]


# --- 4, 5. rekey -------------------------------------------------------------------------------

NAMES = """\
pipeline: names
storage: {root}/store
sources:
  merchants: {{path: {root}/merchants, key: merchant_id}}
views:
  by_name:
    rekey: {{source: merchants, key: display_name, columns: [country], on_conflict: latest}}
  by_name_all:
    rekey: {{source: merchants, key: display_name, columns: [country], unique: false}}
"""
MERCHANTS = pa.schema([("merchant_id", pa.string()), ("display_name", pa.string()), ("country", pa.string())])
INDEX = pa.schema(
    [
        ("merchant_id", pa.string()),
        ("display_name", pa.string()),
        (SINCE, pa.int64()),
        ("country", pa.string()),
    ]
)
REKEYED = pa.schema([("display_name", pa.string()), ("merchant_id", pa.string()), ("country", pa.string())])


@pytest.fixture(scope="module")
def names(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """merchants v1: m1 Acme, m2 Bolt, m3 Core. Batch 1 of each view (full refresh) indexes them
    (since version 1). v2: m0 claims Acme, m3 moves to Dyn; batch 2 indexes both (since 2):
    by_name keeps m0 for Acme (changed last, though m1 is the greater key), deletes Core and
    writes Dyn; by_name_all adds (Acme, m0), deletes (Core, m3) and writes (Dyn, m3)."""
    lake = Lake(tmp_path_factory.mktemp("names"), NAMES)
    lake.table("merchants", MERCHANTS, [("m1", "Acme", "FR"), ("m2", "Bolt", "DE"), ("m3", "Core", "US")])
    lake.change("merchants", [("m0", "Acme", "NL"), ("m3", "Dyn", "US")])
    for view in ("by_name", "by_name_all"):
        lake.table(view, REKEYED)
        lake.index(view, INDEX, ("merchant_id",))
        index = lake.state(view, [("m1", "Acme", 1, "FR"), ("m2", "Bolt", 1, "DE"), ("m3", "Core", 1, "US")])
        first = {"merchants": 1, "_routing": index}
        rows = [("Acme", "m1", "FR"), ("Bolt", "m2", "DE"), ("Core", "m3", "US")]
        lake.batch(view, 1, FULL, {}, first, upserts=rows)
        index = lake.state(view, [("m0", "Acme", 2, "NL"), ("m3", "Dyn", 2, "US")])
        pins = {"merchants": 2, "_routing": index}
        gone = ("Core",) if view == "by_name" else ("Core", "m3")  # the output key
        rows = [("Acme", "m0", "NL"), ("Dyn", "m3", "US")]
        lake.batch(view, 2, INC, first, pins, upserts=rows, deletes=[gone])
    return lake


def test_rekey_latest_keeps_the_master_whose_index_version_is_highest(names, capsys):
    doc = explained(capsys, names.file, "by_name", "Acme")

    assert (doc["kind"], doc["key"]) == ("rekey", {"display_name": "Acme"})
    assert doc["row"] == {"display_name": "Acme", "merchant_id": "m0", "country": "NL"}
    assert batch_of(doc) == (2, "incremental", 2, "update")
    assert doc["last_change"]["pinned_versions"] == {"merchants": 2, "_routing": 2}
    masters = sorted(
        (i["role"], i["version"], i["key"]["merchant_id"], i["row"]["country"]) for i in doc["inputs"]
    )
    assert masters == [("master", 2, "m0", "NL"), ("master", 2, "m1", "FR")]
    rule = doc["rule"]
    assert (rule["resolution"], rule["chosen"]) == ("latest", [{"merchant_id": "m0"}])
    assert sorted((c["key"]["merchant_id"], c["version"]) for c in rule["last_changes"]) == [
        ("m0", 2),
        ("m1", 1),
    ]
    assert rule["text"] == (
        "on_conflict: latest: merchant_id='m0' changed last (version 2; on a tie the greatest master "
        "key), over merchant_id='m1' at version 1"
    )
    # a batch's changes by the derived key: m0 came to hold Acme at version 2
    assert ranges(doc) == {"merchants": (2, 2)}
    assert feed(by_source(doc)["merchants"], "merchant_id") == [(2, "insert", "m0")]


def test_rekey_a_derived_key_whose_master_moved_away_and_one_never_held(names, capsys):
    moved = explained(capsys, names.file, "by_name", "Core")
    assert (moved["in_view"], moved["rule"]) == (False, None)
    assert batch_of(moved) == (2, "incremental", 2, "delete")
    # the former holder, from the output's history of the key, and where it is now
    assert [(i["key"], i["row"]) for i in moved["inputs"]] == [
        ({"merchant_id": "m3"}, {"merchant_id": "m3", "display_name": "Dyn", "country": "US"})
    ]
    assert moved["reason"] == {
        "code": "no_master_row",
        "text": "no master row holds it (merchant_id='m3' now holds display_name='Dyn')",
    }
    assert feed(by_source(moved)["merchants"], "display_name") == [(2, "update_preimage", "Core")]

    never = explained(capsys, names.file, "by_name", "Zed")
    assert (never["in_view"], never["last_change"], never["inputs"]) == (False, None, [])
    assert never["reason"] == {"code": "no_master_row", "text": "no master row holds it"}
    assert batch_of(never, "read_at") == (2, "incremental", 2, None)


def test_rekey_not_unique_is_keyed_by_the_derived_and_the_master_key(names, capsys):
    old = explained(capsys, names.file, "by_name_all", "Acme", "m1")
    assert old["key"] == {"display_name": "Acme", "merchant_id": "m1"}
    assert old["row"] == {"display_name": "Acme", "merchant_id": "m1", "country": "FR"}
    assert batch_of(old) == (1, "full_refresh", 1, "insert")
    assert [i["key"] for i in old["inputs"]] == [{"merchant_id": "m1"}]  # m0 claims Acme too: another row
    assert old["rule"] == {
        "resolution": "every claim",
        "chosen": [{"merchant_id": "m1"}],
        "last_changes": [],
        "text": "unique: false keeps a row for every master holding the derived key",
    }
    assert old["changes"] == []

    new = explained(capsys, names.file, "by_name_all", "Acme", "m0")
    assert (new["row"]["country"], batch_of(new)) == ("NL", (2, "incremental", 2, "insert"))

    moved = explained(capsys, names.file, "by_name_all", "Core", "m3")
    assert batch_of(moved) == (2, "incremental", 2, "delete")
    assert moved["reason"]["code"] == "no_master_row"
    assert "merchant_id='m3' now holds display_name='Dyn'" in moved["reason"]["text"]

    said = failed(capsys, names.file, "by_name_all", "Acme")
    assert "view 'by_name_all' is keyed by (display_name, merchant_id): 2 value(s) expected" in said


# --- 6. a key of two columns -------------------------------------------------------------------

REGIONS = """\
pipeline: regions
storage: {root}/store
sources:
  lines: {{path: {root}/lines, key: [region, order_id]}}
  skus: {{path: {root}/skus, key: [region, sku]}}
views:
  line_skus:
    fk_join: {{left: lines, right: skus, fk: [region, sku], how: inner, right_columns: [title],
              right_prefix: sku_}}
"""
LINES = pa.schema(
    [("region", pa.string()), ("order_id", pa.int64()), ("sku", pa.string()), ("qty", pa.int64())]
)
SKUS = pa.schema([("region", pa.string()), ("sku", pa.string()), ("title", pa.string())])
LINE_SKUS = pa.schema([*LINES, ("sku_title", pa.string())])


@pytest.fixture(scope="module")
def regions(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """lines v1: (eu, 1) and (us, 1) of sku a, (eu, 2) of sku z; skus v1: (eu, a), (us, a).
    Batch 1 (full refresh) writes (eu, 1) and (us, 1); v2 retitles (eu, a); batch 2 rewrites
    (eu, 1)."""
    lake = Lake(tmp_path_factory.mktemp("regions"), REGIONS)
    lake.table("lines", LINES, [("eu", 1, "a", 2), ("us", 1, "a", 3), ("eu", 2, "z", 1)])
    lake.table("skus", SKUS, [("eu", "a", "Pen EU"), ("us", "a", "Pen US")])
    lake.table("line_skus", LINE_SKUS)
    pins = {"lines": 1, "skus": 1}
    lake.batch(
        "line_skus", 1, FULL, {}, pins, upserts=[("eu", 1, "a", 2, "Pen EU"), ("us", 1, "a", 3, "Pen US")]
    )
    lake.change("skus", [("eu", "a", "Pen EU 2")])
    lake.batch("line_skus", 2, INC, pins, {"lines": 1, "skus": 2}, upserts=[("eu", 1, "a", 2, "Pen EU 2")])
    return lake


def test_a_key_of_two_columns_takes_two_values(regions, capsys):
    doc = explained(capsys, regions.file, "line_skus", "eu", "1")

    assert doc["key"] == {"region": "eu", "order_id": 1}
    assert doc["row"] == {"region": "eu", "order_id": 1, "sku": "a", "qty": 2, "sku_title": "Pen EU 2"}
    assert batch_of(doc) == (2, "incremental", 2, "update")
    assert inputs(doc) == [
        ("left", "lines", 1, None, {"region": "eu", "order_id": 1}),
        ("right", "skus", 2, "inner", {"region": "eu", "sku": "a"}),
    ]
    assert feed(by_source(doc)["skus"], "title") == [
        (2, "update_preimage", "Pen EU"),
        (2, "update_postimage", "Pen EU 2"),
    ]

    us = explained(capsys, regions.file, "line_skus", "us", "1")  # same order id, another region
    assert (us["row"]["sku_title"], batch_of(us)) == ("Pen US", (1, "full_refresh", 1, "insert"))

    absent = explained(capsys, regions.file, "line_skus", "eu", "2")
    assert absent["reason"] == {
        "code": "no_right_row",
        "text": "skus joins inner and no row with (region, sku)=('eu', 'z') at version 2",
    }


@pytest.mark.parametrize(
    ("values", "said"),
    [
        (["eu"], "view 'line_skus' is keyed by (region, order_id): 2 value(s) expected"),
        (["eu", "1", "x"], "view 'line_skus' is keyed by (region, order_id): 2 value(s) expected"),
        (["eu", "one"], "'one' is not of type long"),
    ],
)
def test_a_key_of_two_columns_given_wrong_exits_2(regions, capsys, values, said):
    out = failed(capsys, regions.file, "line_skus", *values)
    assert said in out
    assert "fix:" in out


# --- 7. a view that reads a view ---------------------------------------------------------------

SHOP = """\
pipeline: shop
storage: {root}/store
sources:
  products: {{path: {root}/products, key: product_id}}
  merchants: {{path: {root}/merchants, key: merchant_id}}
  orders: {{path: {root}/orders, key: order_id}}
views:
  logos:
    fk_join: {{left: products, right: merchants, fk: merchant_id, how: inner, right_columns: [display_name]}}
  shown_orders:
    fk_join: {{left: orders, right: logos, fk: product_id, how: left, right_columns: [name, display_name],
              right_prefix: product_}}
"""
PRODUCTS = pa.schema([("product_id", pa.string()), ("name", pa.string()), ("merchant_id", pa.string())])
NAMED = pa.schema([("merchant_id", pa.string()), ("display_name", pa.string())])
LOGOS = pa.schema([*PRODUCTS, ("display_name", pa.string())])
BUYS = pa.schema([("order_id", pa.string()), ("product_id", pa.string()), ("qty", pa.int64())])
SHOWN = pa.schema([*BUYS, ("product_name", pa.string()), ("product_display_name", pa.string())])


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """logos = products ⋈ merchants; shown_orders = orders ⟕ logos. v1: p1 (m1), p2 (m2); o1
    (p1), o2 (p2), o3 (p9). Batch 1 of each (full refresh). merchants v2 renames m1: logos batch
    2 rewrites p1 (logos v2). orders v2 adds o4; shown_orders batch 2 (orders (1, 2], logos
    (1, 2]) rewrites o1 and writes o4."""
    lake = Lake(tmp_path_factory.mktemp("shop"), SHOP)
    lake.table("products", PRODUCTS, [("p1", "pen", "m1"), ("p2", "cup", "m2")])
    lake.table("merchants", NAMED, [("m1", "Acme"), ("m2", "Bolt")])
    lake.table("orders", BUYS, [("o1", "p1", 1), ("o2", "p2", 2), ("o3", "p9", 3)])
    lake.table("logos", LOGOS)
    lake.table("shown_orders", SHOWN)
    logos = {"products": 1, "merchants": 1}
    lake.batch(
        "logos", 1, FULL, {}, logos, upserts=[("p1", "pen", "m1", "Acme"), ("p2", "cup", "m2", "Bolt")]
    )
    shown = {"orders": 1, "logos": 1}
    rows = [("o1", "p1", 1, "pen", "Acme"), ("o2", "p2", 2, "cup", "Bolt"), ("o3", "p9", 3, None, None)]
    lake.batch("shown_orders", 1, FULL, {}, shown, upserts=rows)
    lake.change("merchants", [("m1", "Acme Ltd")])
    v = lake.batch(
        "logos", 2, INC, logos, {"products": 1, "merchants": 2}, upserts=[("p1", "pen", "m1", "Acme Ltd")]
    )
    lake.change("orders", [("o4", "p2", 4)])
    rows = [("o1", "p1", 1, "pen", "Acme Ltd"), ("o4", "p2", 4, "cup", "Bolt")]
    lake.batch("shown_orders", 2, INC, shown, {"orders": 2, "logos": v}, upserts=rows)
    return lake


def test_a_view_reading_a_view_is_explained_at_its_pins_of_that_views_output(shop, capsys):
    doc = explained(capsys, shop.file, "shown_orders", "o1")

    assert doc["row"] == {
        "order_id": "o1",
        "product_id": "p1",
        "qty": 1,
        "product_name": "pen",
        "product_display_name": "Acme Ltd",
    }
    assert batch_of(doc) == (2, "incremental", 2, "update")
    assert doc["last_change"]["pinned_versions"] == {"orders": 2, "logos": 2}
    assert inputs(doc) == [
        ("left", "orders", 2, None, {"order_id": "o1"}),
        ("right", "logos", 2, "left", {"product_id": "p1"}),
    ]
    assert doc["inputs"][1]["row"] == {
        "product_id": "p1",
        "name": "pen",
        "merchant_id": "m1",
        "display_name": "Acme Ltd",
    }
    assert ranges(doc) == {"orders": (2, 2), "logos": (2, 2)}
    changes = by_source(doc)
    assert feed(changes["logos"], "display_name") == [
        (2, "update_preimage", "Acme"),
        (2, "update_postimage", "Acme Ltd"),
    ]  # the upstream view's own change feed
    assert changes["orders"]["rows"] == []

    before = explained(capsys, shop.file, "shown_orders", "o1", "--at", "1")
    assert batch_of(before) == (1, "full_refresh", 1, "insert")
    assert (before["inputs"][1]["version"], before["inputs"][1]["row"]["display_name"]) == (1, "Acme")

    unmatched = explained(capsys, shop.file, "shown_orders", "o3")  # a left join keeps it
    assert unmatched["row"]["product_display_name"] is None
    assert (unmatched["inputs"][1]["key"], unmatched["inputs"][1]["row"]) == ({"product_id": "p9"}, None)


# --- 8. a repair and a full refresh as the last writer of a row --------------------------------

LOGOS_SPEC = SPEC  # the fk_join of test_explain_command.py


@pytest.fixture(scope="module")
def repaired(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """v1: p1, p3 (m1), p2 (m2); batch 1 (full refresh). products v2 renames p1, merchants v2
    renames m2, products v3 renames p1 and p3 again; batch 2 ((1, 3], (1, 2]). Someone deletes p1
    from the output by hand (v3, no marker); batch 3 repairs products 2..2 and merchants 2..2 at
    batch 2's pins: it writes p1 back (v4). merchants v3 renames m2; batch 4, a full refresh,
    rewrites p2 (v5)."""
    lake = Lake(tmp_path_factory.mktemp("repaired"), LOGOS_SPEC)
    lake.table("products", PRODUCTS, [("p1", "pen", "m1"), ("p2", "cup", "m2"), ("p3", "lid", "m1")])
    lake.table("merchants", NAMED, [("m1", "Acme"), ("m2", "Bolt")])
    lake.table("logos", LOGOS)
    first = {"products": 1, "merchants": 1}
    rows = [("p1", "pen", "m1", "Acme"), ("p2", "cup", "m2", "Bolt"), ("p3", "lid", "m1", "Acme")]
    lake.batch("logos", 1, FULL, {}, first, upserts=rows)
    lake.change("products", [("p1", "pen 2", "m1")])
    lake.change("merchants", [("m2", "Bolt 2")])
    lake.change("products", [("p1", "pen 3", "m1"), ("p3", "lid 3", "m1")])
    second = {"products": 3, "merchants": 2}
    rows = [("p1", "pen 3", "m1", "Acme"), ("p2", "cup", "m2", "Bolt 2"), ("p3", "lid 3", "m1", "Acme")]
    lake.batch("logos", 2, INC, first, second, upserts=rows)
    lake.change("logos", deletes=[("p1",)])  # by hand: no marker
    ends = {"products": 2, "merchants": 2}
    note = {"repair": "versions products 2..2, merchants 2..2, re-derived at batch 2's pins"}
    lake.batch(
        "logos", 3, REPAIR, first, second, upserts=[("p1", "pen 3", "m1", "Acme")], ends=ends, notes=note
    )
    lake.change("merchants", [("m2", "Bolt 3")])
    lake.batch(
        "logos", 4, FULL, second, {"products": 3, "merchants": 3}, upserts=[("p2", "cup", "m2", "Bolt 3")]
    )
    return lake


def test_a_repair_lists_the_changes_of_the_range_it_repaired(repaired, capsys):
    doc = explained(capsys, repaired.file, "logos", "p1")

    assert doc["row"] == {"product_id": "p1", "name": "pen 3", "merchant_id": "m1", "display_name": "Acme"}
    assert batch_of(doc) == (3, "repair", 4, "insert")
    batch = doc["last_change"]
    assert (batch["start_versions"], batch["pinned_versions"]) == (
        {"products": 1, "merchants": 1},
        {"products": 3, "merchants": 2},
    )
    assert batch["repair_ends"] == {"products": 2, "merchants": 2}  # the marker's `ends`
    assert batch["notes"]["repair"].startswith("versions products 2..2")  # from the batch log
    assert inputs(doc)[0] == ("left", "products", 3, None, {"product_id": "p1"})  # at its pins
    # each range is (start, end]: start + 1 .. the repair's end, not its pin (products 3)
    assert doc["changes_of_batch"] == 3
    assert ranges(doc) == {"products": (2, 2), "merchants": (2, 2)}
    changes = by_source(doc)
    assert feed(changes["products"], "name") == [
        (2, "update_preimage", "pen"),
        (2, "update_postimage", "pen 2"),
    ]
    assert changes["merchants"]["rows"] == []
    assert not any("does not record" in n for n in doc["notes"])


def test_a_row_a_hand_made_commit_deleted_is_drift_at_the_pins_of_the_batch_before(repaired, capsys):
    doc = explained(capsys, repaired.file, "logos", "p1", "--at", "3")

    assert doc["in_view"] is False
    assert (doc["last_change"]["batch_id"], doc["last_change"]["change"]) == (None, "delete")  # unmarked
    assert batch_of(doc, "read_at") == (2, "incremental", 2, None)
    assert doc["reason"]["code"] == "drift"


def test_a_full_refresh_lists_no_changes_and_says_why(repaired, capsys):
    doc = explained(capsys, repaired.file, "logos", "p2")

    assert doc["row"]["display_name"] == "Bolt 3"
    assert batch_of(doc) == (4, "full_refresh", 5, "update")
    assert doc["last_change"]["pinned_versions"] == {"products": 3, "merchants": 3}
    assert (doc["inputs"][1]["version"], doc["inputs"][1]["row"]["display_name"]) == (3, "Bolt 3")
    assert (doc["changes_of_batch"], doc["changes"]) == (4, [])
    assert any("full refresh" in n and "batch 4" in n for n in doc["notes"])

    control = explained(capsys, repaired.file, "logos", "p3")  # written last by the incremental batch 2
    assert batch_of(control) == (2, "incremental", 2, "update")
    assert ranges(control) == {"products": (2, 3), "merchants": (2, 2)}
    assert feed(by_source(control)["products"], "name") == [
        (3, "update_preimage", "lid"),
        (3, "update_postimage", "lid 3"),
    ]


def test_the_repair_marker_carries_its_ends_as_json(repaired):
    from deltalake import DeltaTable

    commits = {int(c["version"]): c for c in DeltaTable(repaired.paths["logos"]).history()}
    marker = json.loads(commits[4]["userMetadata"])
    assert (marker["mode"], marker["ends"], marker["start"]) == (
        "repair",
        {"merchants": 2, "products": 2},
        {"merchants": 1, "products": 1},
    )
    assert commits[3].get("userMetadata") is None  # the hand-made delete
