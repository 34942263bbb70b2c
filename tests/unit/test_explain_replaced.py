"""`lakejoin explain` says when an input the explained batch read was dropped and written again at
its path since (issue 51's identities, recorded in the batch's marker): it then reads the new
table at the old version numbers, and a note says so and what to do. An input that is still the
table the batch read, or a pin recorded without its identity, gives no such note. On tiny lakes
delta-rs writes (tests/unit/explain_lake.py, test_explain_command.py's `shop`)."""

from __future__ import annotations

import shutil
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakejoin.cli.main import main
from lakejoin.delta.records import BatchMode
from tests.unit.explain_lake import CDF, Lake, explained
from tests.unit.test_explain_command import (  # noqa: F401 - `shop` is a fixture
    MERCHANTS,
    OUTPUT,
    PRODUCTS,
    SPEC,
    shop,
)

pytestmark = pytest.mark.unit

DROPPED = "merchants was dropped and written again at its path"


def written_again(path: str, rows: list[tuple[str, str]], *, commits: int) -> None:
    """Drop the table at `path` and write it again there with delta-rs, change feed on, in
    `commits` commits (the last one holds `rows`): its versions reach the old pins again."""
    shutil.rmtree(path)
    table = pa.Table.from_pylist([dict(zip(MERCHANTS.names, r, strict=True)) for r in rows], MERCHANTS)
    for n in range(commits):
        last = n == commits - 1
        write_deltalake(path, table if last else table.slice(0, 1), mode="overwrite", configuration=CDF)


@pytest.fixture
def logos(tmp_path: Any) -> Lake:
    """products and merchants v1; batch 1 (full refresh at v1, v1). products v2 renames p1,
    merchants v2 renames m1; batch 2 ((1, 2] of both) rewrites p1."""
    lake = Lake(tmp_path, SPEC)
    lake.table("products", PRODUCTS, [("p1", "pen", "m1")])
    lake.table("merchants", MERCHANTS, [("m1", "Acme")])
    lake.table("logos", OUTPUT)
    first = {"products": 1, "merchants": 1}
    lake.batch("logos", 1, BatchMode.FULL_REFRESH, {}, first, upserts=[("p1", "pen", "m1", "Acme")])
    lake.change("products", [("p1", "pen 2", "m1")])
    lake.change("merchants", [("m1", "Acme 2")])
    second = {"products": 2, "merchants": 2}
    lake.batch("logos", 2, BatchMode.INCREMENTAL, first, second, upserts=[("p1", "pen 2", "m1", "Acme 2")])
    return lake


def text(capsys: Any, monkeypatch: pytest.MonkeyPatch, *argv: str) -> str:
    """What `lakejoin explain ARGV` prints for people, on one line."""
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["explain", *argv]) == 0
    return " ".join(capsys.readouterr().out.split())


def test_an_input_dropped_and_written_again_since_the_batch_is_named_in_the_notes(logos, capsys, monkeypatch):
    assert explained(capsys, logos.file, "logos", "p1")["notes"] == []  # the tables batch 2 read

    written_again(logos.paths["merchants"], [("m1", "Zed")], commits=3)  # new table id, versions 0..2

    doc = explained(capsys, logos.file, "logos", "p1")
    # Read at the old pins all the same: the new table's row, which batch 2 never saw.
    assert doc["inputs"][1]["row"] == {"merchant_id": "m1", "display_name": "Zed"}
    (note,) = doc["notes"]  # products is the table batch 2 read: no note of it
    assert note.startswith(f"since batch 2, {DROPPED} (table id ")
    assert "batch 2 read it at version 2, it is now at 2)" in note
    assert (
        "not the one batch 2 read; run the view (its next batch reads the new table) and explain again"
        in note
    )
    assert sorted(doc["read_at"]) == [  # the JSON keeps its keys
        "batch_id",
        "change",
        "committed_at",
        "mode",
        "notes",
        "output_version",
        "pinned_versions",
        "repair_ends",
        "start_versions",
    ]
    assert f"since batch 2, {DROPPED}" in text(capsys, monkeypatch, logos.file, "logos", "p1")


def test_once_a_batch_read_the_new_table_the_note_is_gone(logos, capsys):
    written_again(logos.paths["merchants"], [("m1", "Zed")], commits=3)
    pins = {"products": 2, "merchants": 2}  # the plan's full refresh at the new table's version 2
    logos.batch("logos", 3, BatchMode.FULL_REFRESH, {}, pins, upserts=[("p1", "pen 2", "m1", "Zed")])

    doc = explained(capsys, logos.file, "logos", "p1")

    assert doc["read_at"]["batch_id"] == 3
    assert not any(DROPPED in n for n in doc["notes"])


def test_a_pin_recorded_without_its_identity_is_not_checked(shop, capsys):  # noqa: F811 - the imported fixture
    merchants = shop.rsplit("/", 1)[0] + "/merchants"  # shop's batches record no identities
    written_again(merchants, [("m1", "Zed")], commits=3)

    assert explained(capsys, shop, "logos", "p1")["notes"] == []


def test_a_rekey_views_index_dropped_and_written_again_is_named_too(tmp_path, capsys):
    from tests.unit.test_explain_kinds import INDEX, NAMES, REKEYED
    from tests.unit.test_explain_kinds import MERCHANTS as MASTERS

    lake = Lake(tmp_path, NAMES)
    lake.table("merchants", MASTERS, [("m1", "Acme", "FR")])
    lake.table("by_name", REKEYED)
    lake.index("by_name", INDEX, ("merchant_id",))
    index = lake.state("by_name", [("m1", "Acme", 1, "FR")])
    lake.batch(
        "by_name",
        1,
        BatchMode.FULL_REFRESH,
        {},
        {"merchants": 1, "_routing": index},
        upserts=[("Acme", "m1", "FR")],
    )
    before = explained(capsys, lake.file, "by_name", "Acme")["notes"]  # the full refresh's own

    path = lake.paths["by_name:state"]
    shutil.rmtree(path)
    rows = pa.Table.from_pylist(
        [{"merchant_id": "m1", "display_name": "Acme", INDEX.names[2]: 1, "country": "XX"}], INDEX
    )
    for _ in range(index + 1):  # its versions reach the old pin again
        write_deltalake(path, rows, mode="overwrite", configuration=CDF)

    after = explained(capsys, lake.file, "by_name", "Acme")["notes"]
    (note,) = [n for n in after if n not in before]
    assert note.startswith("since batch 1, the view's rekey index was dropped and written again at its path")
