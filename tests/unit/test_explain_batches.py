"""`lakejoin explain` lists the changes of the batch that wrote the key, read over the range that
batch read: a key deleted by an earlier batch shows that batch's changes, a repair its repaired
range, a full refresh none; a rekey finds the masters
holding a key through its index and the former holder from the output's history. On the tiny
delta-rs lake of test_explain_command.py, with more batches written as lakejoin writes them."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lakejoin.delta.log import BatchLog
from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus
from lakejoin.spec.layout import state_path
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


def batch_3(shop_file: str, product: dict, p1_name: str) -> None:
    """products v3 writes `product`; batch 3 (incremental, products (2, 3]) rewrites p1 only,
    named `p1_name`: p2 stays out of the view (its merchant is gone)."""
    spec = spec_of(shop_file)
    merge(spec.sources["products"].path, "product_id", [product], PRODUCTS)
    start, pins = {"products": 2, "merchants": 2}, {"products": 3, "merchants": 2}
    row = {"product_id": "p1", "name": p1_name, "merchant_id": "m1", "display_name": "Acme"}
    merge(spec.views["logos"].path, "product_id", [row], OUTPUT, stamp(3, BatchMode.INCREMENTAL, start, pins))
    log(spec, 3, BatchMode.INCREMENTAL, start, pins, 3)


def test_a_key_deleted_by_an_earlier_batch_shows_that_batchs_changes(shop, capsys):  # noqa: F811 - the imported fixture
    batch_3(shop, {"product_id": "p1", "name": "pen 3", "merchant_id": "m1"}, "pen 3")

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


REKEY = """\
pipeline: shop
storage: {root}/store
sources:
  merchants: {{path: {root}/merchants, key: merchant_id}}
views:
  by_name:
    rekey: {{source: merchants, key: display_name, OPTIONS}}
"""
NAMES = pa.schema([("display_name", pa.string()), ("merchant_id", pa.string())])


def test_a_rekey_finds_its_masters_through_its_index_and_a_former_holder_in_its_history(shop, capsys):  # noqa: F811 - the imported fixture
    rekey_file = beside(shop, "rekey", REKEY.replace("OPTIONS", "on_conflict: latest"))
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


def test_a_deleted_keys_changes_are_looked_up_by_the_keys_of_the_batch_that_deleted_it(shop, capsys):  # noqa: F811
    """p2 went in batch 2 with its merchant m2; batch 3 moved p2 to m5 (no such merchant: still
    absent). The why is read at batch 3's pins (m5); the changes are batch 2's, for m2."""
    batch_3(shop, {"product_id": "p2", "name": "cup", "merchant_id": "m5"}, "pen 2")

    doc = explained(capsys, shop, "logos", "p2")

    assert doc["reason"]["text"].startswith("merchants joins inner and no row with merchant_id='m5'")
    assert doc["changes_of_batch"] == 2
    merchants = next(c for c in doc["changes"] if c["source"] == "merchants")
    assert data(merchants["rows"]) == [(2, "delete", "Bolt")]  # m2's, not m5's (none)


MERCHANTS = pa.schema([("merchant_id", pa.string()), ("display_name", pa.string())])


def test_a_not_unique_rekey_row_lists_its_own_masters_changes_only(shop, capsys):  # noqa: F811
    """Batch 3 moves m1 from Acme to Cask and adds m3 to Cask: (Cask, m1) is m1's row alone."""
    every_file = beside(shop, "every", REKEY.replace("OPTIONS", "unique: false"))
    every = load_spec(every_file)
    view = every.views["by_name"]
    moved = [{"merchant_id": "m1", "display_name": "Cask"}, {"merchant_id": "m3", "display_name": "Cask"}]
    (  # merchants v3
        DeltaTable(every.sources["merchants"].path)
        .merge(pa.Table.from_pylist(moved, MERCHANTS), "t.merchant_id = s.merchant_id", "s", "t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    DeltaTable.create(view.path, schema=NAMES, configuration=CDF)
    rows = pa.table({"display_name": ["Acme"], "merchant_id": ["m1"]}, NAMES)
    full = stamp(1, BatchMode.FULL_REFRESH, {}, {"merchants": 2})
    write_deltalake(view.path, rows, mode="append", commit_properties=full)
    start, pins = {"merchants": 2}, {"merchants": 3}
    DeltaTable(view.path).delete("merchant_id = 'm1'")  # (one commit in lakejoin; two here)
    added = pa.table({"display_name": ["Cask", "Cask"], "merchant_id": ["m1", "m3"]}, NAMES)
    batch = stamp(2, BatchMode.INCREMENTAL, start, pins)
    write_deltalake(view.path, added, mode="append", commit_properties=batch)
    done = BatchStatus.COMMITTED
    BatchLog.of(every).append(
        BatchRecord("by_name", 1, done, BatchMode.FULL_REFRESH, {}, {"merchants": 2}),
        BatchRecord("by_name", 2, done, BatchMode.INCREMENTAL, start, pins, output_version=3),
    )

    doc = explained(capsys, every_file, "by_name", "Cask", "m1")

    assert (doc["last_change"]["batch_id"], doc["last_change"]["change"]) == (2, "insert")
    rows = doc["changes"][0]["rows"]
    assert [(r["merchant_id"], r["_change_type"]) for r in rows] == [("m1", "update_postimage")]
