"""`lakejoin explain` through its command line on a tiny lake delta-rs writes (no JVM): two
sources with a change feed, and an fk_join's output written as two batches would write it,
each commit marked with its batch (delta/markers.py), and the batch log. What the command reads
and prints: the row, the batch that last wrote it, the pins, the input rows, the changes that
reached it, every reason a key is not in the view, and the errors that exit with status 2.
tests/e2e/test_explain.py runs it on outputs that real batches wrote."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake

from lakejoin.cli.main import main
from lakejoin.delta.log import BatchLog
from lakejoin.delta.markers import FINAL, BatchMarker
from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus
from lakejoin.spec.parse import load_spec

pytestmark = pytest.mark.unit

CDF = {"delta.enableChangeDataFeed": "true"}
PRODUCTS = pa.schema([("product_id", pa.string()), ("name", pa.string()), ("merchant_id", pa.string())])
MERCHANTS = pa.schema([("merchant_id", pa.string()), ("display_name", pa.string())])
OUTPUT = pa.schema([*PRODUCTS, ("display_name", pa.string())])
SPEC = """\
pipeline: shop
storage: {root}/store
sources:
  products: {{path: {root}/products, key: product_id}}
  merchants: {{path: {root}/merchants, key: merchant_id}}
views:
  logos:
    fk_join: {{left: products, right: merchants, fk: merchant_id, how: inner, right_columns: [display_name]}}
"""


def stamp(batch: int, mode: BatchMode, start: dict, pins: dict, **more) -> CommitProperties:  # noqa: ANN003
    marker = BatchMarker(batch, FINAL, mode, start, pins, **more)
    return CommitProperties(custom_metadata={"userMetadata": marker.as_json()})


def merge(path: str, key: str, rows: list[dict], schema: pa.Schema, properties=None) -> None:  # noqa: ANN001
    """Upsert `rows`, and delete the keys of those whose other columns are all null."""
    (
        DeltaTable(path)
        .merge(
            pa.Table.from_pylist(rows, schema=schema),
            f"t.{key} = s.{key}",
            source_alias="s",
            target_alias="t",
            commit_properties=properties,
        )
        .when_matched_delete(predicate="s.name IS NULL")
        .when_matched_update_all(predicate="s.name IS NOT NULL")
        .when_not_matched_insert_all()
        .execute()
    )


@pytest.fixture
def shop(tmp_path):
    """products v1: p1 (m1), p2 (m2), p3 (no merchant); merchants v1: m1, m2. Batch 1 (full
    refresh at v1, v1) writes p1 and p2. Then p1 is renamed and m2 deleted (both v2); batch 2
    (incremental, (1, 2]) updates p1 and deletes p2."""
    root = tmp_path
    for name, schema, rows in (
        ("products", PRODUCTS, [("p1", "pen", "m1"), ("p2", "cup", "m2"), ("p3", "lid", None)]),
        ("merchants", MERCHANTS, [("m1", "Acme"), ("m2", "Bolt")]),
    ):
        DeltaTable.create(str(root / name), schema=schema, configuration=CDF)
        table = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema)
        write_deltalake(str(root / name), table, mode="append")
    spec_file = root / "shop.yaml"
    spec_file.write_text(SPEC.format(root=root))
    spec = load_spec(spec_file)
    out = spec.views["logos"].path
    DeltaTable.create(out, schema=OUTPUT, configuration=CDF)
    rows = [("p1", "pen", "m1", "Acme"), ("p2", "cup", "m2", "Bolt")]
    write_deltalake(
        out,
        pa.Table.from_pylist([dict(zip(OUTPUT.names, r, strict=True)) for r in rows], OUTPUT),
        mode="append",
        commit_properties=stamp(1, BatchMode.FULL_REFRESH, {}, {"products": 1, "merchants": 1}),
    )
    merge(
        str(root / "products"),
        "product_id",
        [{"product_id": "p1", "name": "pen 2", "merchant_id": "m1"}],
        PRODUCTS,
    )
    DeltaTable(str(root / "merchants")).delete("merchant_id = 'm2'")
    pins = {"products": 2, "merchants": 2}
    merge(
        out,
        "product_id",
        [
            {"product_id": "p1", "name": "pen 2", "merchant_id": "m1", "display_name": "Acme"},
            {"product_id": "p2", "name": None, "merchant_id": None, "display_name": None},
        ],
        OUTPUT,
        stamp(2, BatchMode.INCREMENTAL, {"products": 1, "merchants": 1}, pins),
    )
    BatchLog.of(spec).append(
        BatchRecord(
            "logos", 1, BatchStatus.COMMITTED, BatchMode.FULL_REFRESH, {}, {"products": 1, "merchants": 1}
        ),
        BatchRecord(
            "logos",
            2,
            BatchStatus.COMMITTED,
            BatchMode.INCREMENTAL,
            {"products": 1, "merchants": 1},
            pins,
            notes={"strategy": "incremental"},
            output_version=2,
        ),
    )
    return str(spec_file)


def explained(capsys, *argv: str) -> dict:  # noqa: ANN001
    assert main(["explain", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def data(rows: list[dict]) -> list[tuple]:
    return [(r["_commit_version"], r["_change_type"], r.get("name") or r.get("display_name")) for r in rows]


def test_a_row_in_the_view_its_batch_its_pins_its_inputs_and_the_changes_that_reached_it(shop, capsys):
    doc = explained(capsys, shop, "logos", "p1")

    assert (doc["format"], doc["view"], doc["kind"], doc["key"]) == (
        1,
        "logos",
        "fk_join",
        {"product_id": "p1"},
    )
    assert doc["output"]["version"] == 2
    assert doc["in_view"] is True
    assert doc["row"] == {"product_id": "p1", "name": "pen 2", "merchant_id": "m1", "display_name": "Acme"}
    batch = doc["last_change"]
    assert (batch["batch_id"], batch["mode"], batch["output_version"], batch["change"]) == (
        2,
        "incremental",
        2,
        "update",
    )
    assert (batch["start_versions"], batch["pinned_versions"]) == (
        {"products": 1, "merchants": 1},
        {"products": 2, "merchants": 2},
    )
    assert batch["notes"] == {"strategy": "incremental"}  # from the batch log
    assert batch["committed_at"].endswith("+00:00")
    assert doc["read_at"] == batch
    assert [(i["role"], i["source"], i["version"], i["how"], i["key"]) for i in doc["inputs"]] == [
        ("left", "products", 2, None, {"product_id": "p1"}),
        ("right", "merchants", 2, "inner", {"merchant_id": "m1"}),
    ]
    assert doc["inputs"][1]["row"] == {"merchant_id": "m1", "display_name": "Acme"}
    changes = {c["source"]: c for c in doc["changes"]}
    assert (changes["products"]["first_version"], changes["products"]["last_version"]) == (2, 2)
    assert data(changes["products"]["rows"]) == [
        (2, "update_preimage", "pen"),
        (2, "update_postimage", "pen 2"),
    ]
    assert changes["merchants"]["rows"] == []  # m1 did not change in (1, 2]
    assert (doc["reason"], doc["rule"], doc["notes"], doc["history_read"]) == (None, None, [], True)


def test_as_of_an_earlier_output_version_the_row_is_what_the_first_batch_wrote(shop, capsys):
    doc = explained(capsys, shop, "logos", "p1", "--at", "1")

    assert doc["output"]["version"] == 1
    assert doc["row"]["name"] == "pen"
    assert (doc["last_change"]["batch_id"], doc["last_change"]["change"]) == (1, "insert")
    # A full refresh read no changes: it derived every key from the inputs at its pins.
    assert (doc["changes_of_batch"], doc["changes"]) == (1, [])
    assert any("batch 1 was a full refresh" in n for n in doc["notes"])
    left = doc["inputs"][0]
    assert (left["source"], left["version"], left["row"]["name"]) == ("products", 1, "pen")


def test_every_reason_a_key_is_not_in_the_view(shop, capsys):
    deleted = explained(capsys, shop, "logos", "p2")  # its merchant went in batch 2
    assert deleted["in_view"] is False
    assert (deleted["last_change"]["batch_id"], deleted["last_change"]["change"]) == (2, "delete")
    assert deleted["reason"]["code"] == "no_right_row"
    assert deleted["inputs"][1]["deleted_at"] == 2
    merchants = next(c for c in deleted["changes"] if c["source"] == "merchants")
    assert data(merchants["rows"]) == [(2, "delete", "Bolt")]

    null_fk = explained(capsys, shop, "logos", "p3")
    assert (null_fk["last_change"], null_fk["read_at"]["batch_id"]) == (None, 2)  # never in the view
    assert null_fk["reason"]["code"] == "null_fk"
    assert null_fk["inputs"][1]["key"] is None

    unknown = explained(capsys, shop, "logos", "p9")
    assert unknown["reason"]["code"] == "no_left_row"
    assert [i["role"] for i in unknown["inputs"]] == ["left"]


def test_text_for_people_says_the_same(shop, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["explain", shop, "logos", "p2"]) == 0
    out = capsys.readouterr().out
    assert "not in the view" in out
    assert "last change: deleted by batch 2 (incremental)" in out
    assert "inputs at the pins of batch 2: merchants@2, products@2" in out
    assert (
        "why not: merchants joins inner and no row with merchant_id='m2' at version 2, deleted at version 2"
        in out
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["logos", "p1", "p2"], "view 'logos' is keyed by product_id: 1 value(s) expected"),
        (["nope", "p1"], "unknown view 'nope'"),
        (["logos", "p1", "--at", "7"], "has no readable version 7"),
    ],
)
def test_a_key_or_version_the_view_does_not_have_exits_2_with_what_to_do(shop, capsys, argv, said):
    assert main(["explain", shop, *argv]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert said in out
    assert "fix:" in out
    if argv[0] == "nope":
        assert "use one of: logos" in out


def test_an_error_under_json_is_a_document_for_tools(shop, capsys):
    assert main(["explain", shop, "nope", "p1", "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert (error["type"], error["what"]) == ("SpecError", "unknown view 'nope'")
    assert error["fix"] == "use one of: logos"
    assert error["where"].endswith("(at 'views')")


def test_the_command_line_takes_a_key_of_several_values_a_version_and_json():
    from lakejoin.cli.main import _parser

    args = _parser().parse_args(["explain", "s.yaml", "lines", "o'1", "-2", "--at", "3", "--json"])
    assert (args.view, args.key, args.at, args.json) == ("lines", ["o'1", "-2"], 3, True)
    with pytest.raises(SystemExit) as exited:
        _parser().parse_args(["explain", "s.yaml", "lines"])  # no key
    assert exited.value.code == 2
