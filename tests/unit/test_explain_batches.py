"""`lakejoin explain` lists the changes of the batch that wrote the key, read over the range that
batch read: a key deleted by an earlier batch shows that batch's changes, a repair its repaired
range, a full refresh none; a lookup enrich reads no dimension feed; a rekey finds the masters
holding a key through its index and the former holder from the output's history. On the tiny
delta-rs lake of test_explain_command.py, with more batches written as lakejoin writes them."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lakejoin.delta.log import BatchLog
from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus
from lakejoin.engine.write import state_path
from lakejoin.spec.parse import load_spec
from lakejoin.views.rekey import SINCE
from tests.unit.test_explain_command import (  # noqa: F401 - `shop` is a fixture
    CDF,
    OUTPUT,
    PRODUCTS,
    data,
    explained,
    merge,
    shop,
    stamp,
)

pytestmark = pytest.mark.unit


def spec_of(shop_file: str):  # noqa: ANN201
    return load_spec(shop_file)


def beside(shop_file: str, name: str, text: str) -> str:
    """Another spec over the shop's tables (`text` formatted with their folder); its file."""
    root = spec_of(shop_file).sources["products"].path.rsplit("/", 1)[0]
    path = f"{root}/{name}.yaml"
    with open(path, "w", encoding="utf-8") as out:
        out.write(text.format(root=root))
    return path


def log(spec, batch: int, mode: BatchMode, start: dict, pins: dict, version: int) -> None:  # noqa: ANN001
    BatchLog.of(spec).append(
        BatchRecord("logos", batch, BatchStatus.COMMITTED, mode, start, pins, output_version=version)
    )


def test_a_key_deleted_by_an_earlier_batch_shows_that_batchs_changes(shop, capsys):  # noqa: F811 - the imported fixture
    spec = spec_of(shop)
    root = spec.sources["products"].path.rsplit("/", 1)[0]
    renamed = {"product_id": "p1", "name": "pen 3", "merchant_id": "m1"}
    merge(f"{root}/products", "product_id", [renamed], PRODUCTS)
    start, pins = {"products": 2, "merchants": 2}, {"products": 3, "merchants": 2}
    row = {"product_id": "p1", "name": "pen 3", "merchant_id": "m1", "display_name": "Acme"}
    merge(spec.views["logos"].path, "product_id", [row], OUTPUT, stamp(3, BatchMode.INCREMENTAL, start, pins))
    log(spec, 3, BatchMode.INCREMENTAL, start, pins, 3)

    doc = explained(capsys, shop, "logos", "p2")

    assert (doc["last_change"]["batch_id"], doc["last_change"]["change"]) == (2, "delete")
    assert doc["read_at"]["batch_id"] == 3  # the reason is read at the newest batch's pins
    assert doc["reason"]["code"] == "no_right_row"
    assert doc["changes_of_batch"] == 2  # ... and the changes are those of the batch that deleted it
    changes = {c["source"]: c for c in doc["changes"]}
    assert (changes["merchants"]["first_version"], changes["merchants"]["last_version"]) == (2, 2)
    assert data(changes["merchants"]["rows"]) == [(2, "delete", "Bolt")]
    assert (changes["products"]["first_version"], changes["products"]["last_version"]) == (2, 2)


def test_a_repair_lists_the_changes_of_the_range_it_re_derived(shop, capsys):  # noqa: F811 - the imported fixture
    spec = spec_of(shop)
    # Batch 3 repairs products versions 1..1 and merchants 1..1 at batch 2's pins: it rewrites p1.
    start, pins, ends = {"products": 0, "merchants": 0}, {"products": 2, "merchants": 2}, {"products": 1}
    row = {"product_id": "p1", "name": "pen 2", "merchant_id": "m1", "display_name": "Acme Ltd"}
    marker = stamp(3, BatchMode.REPAIR, start, pins, repair_ends=ends)
    merge(spec.views["logos"].path, "product_id", [row], OUTPUT, marker)
    log(spec, 3, BatchMode.REPAIR, start, pins, 3)

    doc = explained(capsys, shop, "logos", "p1")

    assert (doc["last_change"]["batch_id"], doc["last_change"]["mode"]) == (3, "repair")
    assert doc["last_change"]["repair_ends"] == {"products": 1}
    changes = {c["source"]: c for c in doc["changes"]}
    assert (changes["products"]["first_version"], changes["products"]["last_version"]) == (1, 1)
    assert data(changes["products"]["rows"]) == [(1, "insert", "pen")]  # not batch 2's rename
    # merchants' end is not recorded: listed up to the pin, and the answer says so
    assert (changes["merchants"]["first_version"], changes["merchants"]["last_version"]) == (1, 2)
    assert any("does not record where its range of merchants ended" in n for n in doc["notes"])


LOOKUP = """\
pipeline: shop
storage: {root}/store
sources:
  products: {{path: {root}/products, key: product_id}}
  merchants: {{path: {root}/merchants, key: merchant_id}}
views:
  logos:
    enrich:
      fact: products
      mode: lookup
      dimensions:
        - {{table: merchants, fk: merchant_id, columns: [display_name], how: left}}
"""


def test_a_lookup_enrich_lists_only_the_facts_changes(shop, capsys):  # noqa: F811 - the imported fixture
    lookup = beside(shop, "lookup", LOOKUP)
    # The output and batch log of the fk_join serve as the enrich's: same columns, same batches.

    doc = explained(capsys, lookup, "logos", "p1")

    assert doc["kind"] == "enrich"
    roles = [(i["role"], i["source"]) for i in doc["inputs"]]
    assert roles == [("fact", "products"), ("dimension", "merchants")]
    # A dimension's change re-enriches no fact in lookup mode: no merchants feed is read.
    assert [c["source"] for c in doc["changes"]] == ["products"]


REKEY = """\
pipeline: shop
storage: {root}/store
sources:
  merchants: {{path: {root}/merchants, key: merchant_id}}
views:
  by_name:
    rekey: {{source: merchants, key: display_name, on_conflict: latest}}
"""
NAMES = pa.schema([("display_name", pa.string()), ("merchant_id", pa.string())])


def test_a_rekey_finds_its_masters_through_its_index_and_a_former_holder_in_its_history(shop, capsys):  # noqa: F811 - the imported fixture
    rekey_file = beside(shop, "rekey", REKEY)
    rekey = load_spec(rekey_file)
    view = rekey.views["by_name"]
    # merchants v1: m1 Acme, m2 Bolt; v2: m2 deleted. Batch 1 at v1 wrote Acme and Bolt and an
    # index; batch 2 at v2 deleted Bolt. An index row of m1 says its last change was version 1.
    index = state_path(rekey, view)
    schema = pa.schema([("merchant_id", pa.string()), ("display_name", pa.string()), (SINCE, pa.int64())])
    write_deltalake(index, pa.table({"merchant_id": ["m1"], "display_name": ["Acme"], SINCE: [1]}, schema))
    DeltaTable.create(view.path, schema=NAMES, configuration=CDF)
    rows = pa.table({"display_name": ["Acme", "Bolt"], "merchant_id": ["m1", "m2"]}, NAMES)
    start, pins = {"merchants": 1, "_routing": 0}, {"merchants": 2, "_routing": 0}
    first = dict(start)
    full = stamp(1, BatchMode.FULL_REFRESH, {}, first)
    write_deltalake(view.path, rows, mode="append", commit_properties=full)
    DeltaTable(view.path).delete(
        "display_name = 'Bolt'", commit_properties=stamp(2, BatchMode.INCREMENTAL, start, pins)
    )
    done = BatchStatus.COMMITTED
    BatchLog.of(rekey).append(
        BatchRecord("by_name", 1, done, BatchMode.FULL_REFRESH, {}, first),
        BatchRecord("by_name", 2, done, BatchMode.INCREMENTAL, start, pins, output_version=2),
    )

    held = explained(capsys, rekey_file, "by_name", "Acme")
    assert [(i["role"], i["key"], i["row"]["display_name"]) for i in held["inputs"]] == [
        ("master", {"merchant_id": "m1"}, "Acme")
    ]
    assert held["rule"]["last_changes"] == [{"key": {"merchant_id": "m1"}, "version": 1}]  # from the index

    gone = explained(capsys, rekey_file, "by_name", "Bolt")
    assert gone["in_view"] is False
    assert gone["last_change"]["batch_id"] == 2
    # the former holder, named by the output's history of the key, is gone from the master
    former = [(i["key"], i["row"], i["deleted_at"]) for i in gone["inputs"]]
    assert former == [({"merchant_id": "m2"}, None, 2)]
    assert gone["reason"]["code"] == "no_master_row"
    assert data(gone["changes"][0]["rows"]) == [(2, "delete", "Bolt")]
