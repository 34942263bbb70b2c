"""The command line: `lakejoin run` summarises each batch, `lakejoin status` shows the lag, and a
user's error is one message with its fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakejoin.cli.main import main
from lakejoin.engine.batch import batch_log
from tests.lakehouse import (
    ADDRESSES,
    MASTERS,
    MERCHANTS,
    PERSONS,
    PRODUCTS,
    output_rows,
    status_blocks,
    write_spec,
)
from tests.spec_texts import FK_JOIN, GOOD, assert_says

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def _table_row(output: str, view: str) -> list[str]:
    """The cells of the view's row; a cell wrapped onto the lines below is joined again."""
    lines = output.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(f"│ {view}"))
    cells = [[cell.strip()] for cell in lines[first].strip("│").split("│")]
    for line in lines[first + 1 :]:
        more = [cell.strip() for cell in line.strip("│").split("│")]
        if not line.startswith("│") or len(more) != len(cells) or more[0]:
            break
        for parts, part in zip(cells, more, strict=True):
            parts.append(part)
    return [" ".join(filter(None, parts)) for parts in cells]


def test_run_summarises_and_status_shows_lag(lake, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "220")
    lake.create("merchants", MERCHANTS, [("m1", "Acme", "a.png"), ("m2", "Bolt", "b.png")])
    lake.create(
        "products", PRODUCTS, [("p1", "pen", 1.0, "m1"), ("p2", "cup", 2.0, "m2"), ("p3", "lid", 3.0, "m1")]
    )
    spec = lake.spec("left")
    spec_file = str(lake.root / "shop.yaml")
    assert main(["run", spec_file]) == 0
    capsys.readouterr()

    lake.upsert("merchants", "merchant_id", [("m1", "Acme Inc", "a.png")])
    lake.upsert("products", "product_id", [("p2", "cup", 2.0, "m2")])
    assert main(["status", spec_file]) == 0
    status = status_blocks(capsys.readouterr().out)["display_products"]
    assert status["head"] == "batch 1, committed, full_refresh"
    assert status["behind"] == "products 1, merchants 1 (versions)"

    assert main(["run", spec_file, "--view", "display_products"]) == 0
    run = _table_row(capsys.readouterr().out, "display_products")
    # view, batch, mode, outcome, versions read, changed keys, affected, ins, upd, del, unchanged,
    # view kind, write
    assert run[1:4] == ["2", "incremental", "committed"]
    assert run[4] == "merchants 2..2, products 2..2"
    # p2 was written back as it was: no change of content (issue 36), so it is not a changed key.
    assert run[5] == "products 0, merchants 1"
    assert run[6:11] == ["2", "0", "2", "0", "0"]
    # fk_join's own counts: the merchant change reached p1 and p3, 2 of 3 products (the test
    # lakehouse turns the fan-out fallback off, so the batch stayed incremental).
    assert run[11] == "rows reached by the other side's changes 2, fan-out ‰ 667, full recompute 0", run
    # The write's strategy (issue 53): a batch of two keys into a small table, delta-rs's MERGE.
    assert run[12] == "driver_merge", run
    assert lake.output(spec) == lake.expected(spec)

    assert main(["status", spec_file]) == 0
    behind = status_blocks(capsys.readouterr().out)["display_products"]["behind"]
    assert behind == "products 0, merchants 0 (versions)"


def test_a_user_error_is_one_message_and_exit_2(lake, capsys):
    lake.create("merchants", MERCHANTS, [("m1", "Acme", "a.png")])
    lake.create("products", PRODUCTS, [("p1", "pen", 1.0, "m1")])
    lake.spec("left")
    assert main(["run", str(lake.root / "shop.yaml"), "--view", "nope"]) == 2
    out = capsys.readouterr().out
    assert "unknown view(s) ['nope']" in out and "use one of: display_products" in out
    assert "Traceback" not in out


def test_the_cli_prints_a_spec_error_without_a_traceback(tmp_path):
    """`lakejoin run` on a malformed spec exits 2 with the error, its place and its fix, and no
    Python traceback; no Spark starts for a spec error."""
    file = tmp_path / "shop.yaml"
    file.write_text(GOOD.replace("right: merchants", "right: sellers"))
    result = subprocess.run(
        [sys.executable, "-m", "lakejoin.cli", "run", str(file)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "300", "GX_ANALYTICS_ENABLED": "False"},
    )
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2, output
    assert_says(
        output,
        "SpecError",
        f"{file}:10",
        f"{FK_JOIN}.right",
        "unknown source 'sellers'",
        "declare it under 'sources:'",
    )
    assert "Traceback" not in output
    assert "starting Spark" not in output


def test_run_reports_composite_rows_rebuilt_and_conflicts(lake, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "260")
    lake.create("persons", PERSONS, [("P1", "Ada", ["a1", "a2"]), ("P2", "Bob", ["a2"])])
    lake.create("addresses", ADDRESSES, [("a1", "1 Elm", "Oslo"), ("a2", "2 Oak", "Oslo")])
    lake.create("merchants", MASTERS, [("m1", "Acme", "NO", "a.png")])
    views = """\
  person_addresses:
    list_join: {left: persons, list: address_ids, right: addresses, into: addresses}
  merchants_by_name:
    rekey: {source: merchants, key: display_name, on_conflict: latest}
"""
    write_spec(lake, {"persons": "person_id", "addresses": "address_id", "merchants": "merchant_id"}, views)
    spec_file = str(lake.root / "lake.yaml")
    assert main(["run", spec_file]) == 0
    out = capsys.readouterr().out
    # The last two columns: the view kind's counts and the write's strategy (issue 53).
    # A first batch recomputes (nothing to count) and fills the new output.
    assert _table_row(out, "person_addresses")[-2:] == ["-", "rewrite"]

    lake.upsert("addresses", "address_id", [("a1", "1 Elm St", "Oslo")])
    lake.upsert("merchants", "merchant_id", [("m2", "Acme", "SE", "b.png")])
    assert main(["run", spec_file]) == 0
    out = capsys.readouterr().out
    # a1 is on one of the two lists: half of them, above the default fan-out share, but within
    # its floor of rows: the one list is re-joined, not the whole view recomputed.
    assert _table_row(out, "person_addresses")[-2] == (
        "rows reached by the other side's changes 1, fan-out ‰ 500, full recompute 0, "
        "composite rows rebuilt 2, carried without re-join 0"
    )
    assert _table_row(out, "merchants_by_name")[-2] == "null keys dropped 0, conflicts 1"
    assert "merchants_by_name: conflicts 1 derived key(s) claimed by several masters" in " ".join(out.split())

    # P2's list gains a1; P1 is renamed, its list as it was: a batch of two keys re-joins both
    # lists (four composite rows) rather than read the output to carry P1's.
    lake.upsert("persons", "person_id", [("P1", "Ann", ["a1", "a2"]), ("P2", "Bob", ["a2", "a1"])])
    assert main(["run", spec_file, "--view", "person_addresses"]) == 0
    out = capsys.readouterr().out
    assert _table_row(out, "person_addresses")[-2] == (
        "rows reached by the other side's changes 0, fan-out ‰ 0, full recompute 0, "
        "composite rows rebuilt 4, carried without re-join 0"
    )


def test_a_failed_view_skips_its_readers_and_the_others_run(lake, capsys, monkeypatch):
    """Like `dbt run`: a key conflict fails one view, the view reading it is skipped, the
    independent view commits (beside it, in a thread of its own), the run ends with a tally and
    exit 1; --fail-fast stops at it (one view at a time: nothing after it starts)."""
    monkeypatch.setenv("COLUMNS", "220")
    # Two merchants claim the display name "Acme": a unique rekey without a policy fails.
    lake.create("merchants", MASTERS, [("m1", "Acme", "NO", "a.png"), ("m2", "Acme", "SE", "b.png")])
    lake.create("products", PRODUCTS, [("p1", "pen", 1.0, "m1"), ("p2", "cup", 2.0, "m2")])
    views = """\
  by_name:
    rekey: {source: merchants, key: display_name}
  by_country:
    rekey: {source: by_name, key: country}
  priced:
    fk_join: {left: products, right: merchants, fk: merchant_id, right_columns: [country]}
"""
    spec = write_spec(lake, {"merchants": "merchant_id", "products": "product_id"}, views)
    spec_file = str(lake.root / "lake.yaml")
    assert spec.view_order().index("by_name") < spec.view_order().index("priced")

    assert main(["run", spec_file, "--fail-fast", "--parallel", "1"]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "KeyConflictError" in out and "Acme" in out
    assert batch_log(spec).last("priced") is None  # stopped before it

    assert main(["run", spec_file, "--parallel", "2"]) == 1
    out = capsys.readouterr().out
    flat = " ".join(out.split())
    assert "failed by_name: KeyConflictError" in flat and "Traceback" not in out
    assert "skipped by_country: it reads 'by_name', which failed" in flat
    assert _table_row(out, "priced")[1:4] == ["1", "full_refresh", "committed"]
    assert "pipeline lake: 1 committed, 1 failed, 1 skipped" in flat
    assert [(r["product_id"], r["country"]) for r in output_rows(lake, spec, "priced")] == [
        ("p1", "NO"),
        ("p2", "SE"),
    ]
    assert batch_log(spec).last_committed("by_name") is None

    # Once the conflict is gone, the failed view and its reader catch up; priced has nothing new.
    lake.upsert("merchants", "merchant_id", [("m2", "Bolt", "SE", "b.png")])
    assert main(["run", spec_file]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert "pipeline lake: 3 committed" in flat
    assert output_rows(lake, spec, "by_country") == [
        {"country": "NO", "merchant_id": "m1", "display_name": "Acme", "photo_url": "a.png"},
        {"country": "SE", "merchant_id": "m2", "display_name": "Bolt", "photo_url": "b.png"},
    ]
