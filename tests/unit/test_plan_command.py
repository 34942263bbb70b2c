"""`lakejoin plan` without a JVM (issue 54): on tables delta-rs wrote, before any batch ran,
every view's next batch is its first (a full refresh), a view that reads a view follows it, an
input without a change feed is refused with the fix, and `--json` validates against the plan's
own schema. The batches themselves need Spark: tests/scenarios/test_plan.py compares each plan
with the run that follows it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakejoin.cli.main import main
from lakejoin.cli.plan import schema

pytestmark = pytest.mark.unit

SPEC = """\
pipeline: planned
storage: lake
sources:
  products:  {path: lake/products,  key: product_id}
  merchants: {path: lake/merchants, key: merchant_id}
  lines:     {path: lake/lines,     key: line_id}
views:
  display_products:
    fk_join: {left: products, right: merchants, fk: merchant_id, how: left, right_columns: [name]}
  line_products:
    fk_join: {left: lines, right: display_products, fk: product_id, right_columns: [title]}
"""
CDF = {"delta.enableChangeDataFeed": "true"}


def lake(tmp_path: Path, *, feed: bool = True) -> str:
    """The spec's tables, written by delta-rs (the merchants' change feed on only when `feed`)."""
    tables = {
        "products": {"product_id": ["p1", "p2"], "title": ["pen", "cup"], "merchant_id": ["m1", "m2"]},
        "merchants": {"merchant_id": ["m1", "m2"], "name": ["Acme", "Bolt"]},
        "lines": {"line_id": ["l1"], "product_id": ["p1"]},
    }
    for name, columns in tables.items():
        config = CDF if feed or name != "merchants" else None
        write_deltalake(str(tmp_path / "lake" / name), pa.table(columns), configuration=config)
    spec = tmp_path / "planned.yaml"
    spec.write_text(SPEC)
    return str(spec)


def planned(capsys, *argv: str) -> dict:  # noqa: ANN001 - pytest's capsys
    assert main(["plan", *argv, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    jsonschema.validate(document, schema())
    return {v["view"]: v for v in document["views"]}


def test_before_any_batch_every_view_plans_its_first_batch_without_pyspark(tmp_path, capsys):
    views = planned(capsys, lake(tmp_path))

    first = views["display_products"]
    assert (first["action"], first["batch_id"]) == ("full refresh", 1)
    assert first["reason"] == "the view's first batch"
    assert first["write"] == "rewrite"  # a new output is filled, laid out by key
    assert [(i["source"], i["changes"], i["last"]) for i in first["inputs"]] == [
        ("products", False, 0),
        ("merchants", False, 0),
    ]
    assert first["estimate"] is None  # no earlier batch to go on
    after = views["line_products"]
    assert after["action"] == "full refresh"
    assert after["reason"] == "its first batch, after view display_products's"
    assert "pyspark" not in sys.modules


def test_an_input_without_a_change_feed_is_refused_with_the_fix_and_so_is_its_reader(tmp_path, capsys):
    views = planned(capsys, lake(tmp_path, feed=False))

    refused = views["display_products"]
    assert refused["action"] == "refused"
    assert "has no Change Data Feed" in refused["reason"]
    assert "delta.enableChangeDataFeed = true" in refused["fix"]
    reader = views["line_products"]  # a run skips it: the view it reads fails
    assert reader["action"] == "skipped"
    assert reader["reason"] == "it reads view display_products, whose batch would not run"


def test_one_view_is_planned_as_run_view_runs_it_alone(tmp_path, capsys):
    views = planned(capsys, lake(tmp_path), "--view", "line_products")

    refused = views["line_products"]  # `run --view line_products` reads no batch of the view it reads
    assert set(views) == {"line_products"} and refused["action"] == "refused"
    assert "it reads view 'display_products', which has no committed batch yet" in refused["reason"]
    assert refused["fix"].startswith("run view 'display_products' first")


def test_a_full_refresh_and_a_repair_are_not_planned_together(tmp_path, capsys):
    assert main(["plan", lake(tmp_path), "--full-refresh", "--repair-from", "1"]) == 2
    assert "a repair and a full refresh were both asked for" in capsys.readouterr().out


def test_the_text_plan_names_each_view_and_why(tmp_path, capsys):
    assert main(["plan", lake(tmp_path)]) == 0
    out = capsys.readouterr().out

    assert "display_products (fk_join): full refresh, batch 1" in out
    assert "why the view's first batch" in out
    assert "its first batch, after view display_products's" in out


def test_an_unknown_view_is_an_error_that_names_the_views(tmp_path, capsys):
    assert main(["plan", lake(tmp_path), "--view", "nope"]) == 2
    assert "use one of: display_products, line_products" in capsys.readouterr().out
