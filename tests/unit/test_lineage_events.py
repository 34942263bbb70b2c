"""OpenLineage events of a batch (issue 39), without a JVM: the column lineage each kind's spec
gives, the events built from a plan and a summary, the client that OpenLineage's own
configuration asks for (none when nothing is configured), and the events as a real HTTP
receiver gets them. The events of real batches are tests/e2e/test_lineage.py's."""

from __future__ import annotations

import json
import logging
import uuid

import pytest
from openlineage.client.serde import Serde

from lakejoin.delta.plans import BatchPlan
from lakejoin.delta.records import BatchMode
from lakejoin.engine.batch import BatchOutcome, BatchSummary
from lakejoin.engine.lineage import BatchLineage, dataset_name, lineage_client, run_id
from lakejoin.engine.lineage import column_lineage as lineage_of
from lakejoin.quality.validations import CheckResult
from lakejoin.spec.column_lineage import AGGREGATION, GROUP_BY, IDENTITY, JOIN, TRANSFORMATION, Origin
from lakejoin.spec.parse import parse_spec

pytestmark = pytest.mark.unit

SPEC = """\
pipeline: shop
storage: /lake/store
sources:
  products:  {path: /lake/products, key: product_id}
  merchants: {path: /lake/merchants, key: merchant_id}
  bundles:   {path: /lake/bundles, key: [tenant, bundle_no]}
  tags:      {path: /lake/tags, key: [tenant, tag_id]}
views:
  display_products:
    fk_join: {left: products, right: merchants, fk: merchant_id, how: left,
              right_columns: [name], right_prefix: merchant_}
  enriched:
    enrich:
      fact: display_products
      mode: propagate
      dimensions:
        - {table: merchants, fk: merchant_id, prefix: m_, columns: [country]}
  tagged:
    list_join: {left: bundles, list: items, right: tags, into: tags, right_columns: [label]}
  by_name:
    rekey: {source: merchants, key: name, columns: [country]}
"""
SCHEMAS = {
    "products": {"product_id": "bigint", "title": "string", "merchant_id": "string"},
    "merchants": {"merchant_id": "string", "name": "string", "country": "string"},
    "bundles": {
        "tenant": "string",
        "bundle_no": "int",
        "items": "array<struct<tenant:string,tag_id:int>>",
    },
    "tags": {"tenant": "string", "tag_id": "int", "label": "string", "colour": "string"},
    "display_products": {
        "product_id": "bigint",
        "title": "string",
        "merchant_id": "string",
        "merchant_name": "string",
    },
}


@pytest.fixture
def spec():
    return parse_spec(SPEC, "shop.yaml")


def test_each_kind_names_the_input_columns_of_each_output_column(spec):
    fk = lineage_of(
        spec, spec.views["display_products"], SCHEMAS, ["product_id", "title", "merchant_id", "merchant_name"]
    )
    assert fk.fields["title"] == (Origin("products", "title"),)
    assert fk.fields["merchant_name"] == (Origin("merchants", "name", IDENTITY),)
    assert fk.matched_on == (
        Origin("products", "merchant_id", JOIN),
        Origin("merchants", "merchant_id", JOIN),
    )

    enriched = lineage_of(spec, spec.views["enriched"], SCHEMAS, [*SCHEMAS["display_products"], "m_country"])
    assert enriched.fields["merchant_name"] == (Origin("display_products", "merchant_name"),)
    assert enriched.fields["m_country"] == (Origin("merchants", "country"),)

    # A list's joined elements: the left list decides which, the right key and columns fill them.
    tagged = lineage_of(spec, spec.views["tagged"], SCHEMAS, ["tenant", "bundle_no", "tags"])
    assert tagged.fields["tags"] == (
        Origin("bundles", "items", TRANSFORMATION),
        Origin("tags", "tenant", AGGREGATION),
        Origin("tags", "tag_id", AGGREGATION),
        Origin("tags", "label", AGGREGATION),
    )
    assert tagged.matched_on == (
        Origin("bundles", "items", JOIN),
        Origin("tags", "tenant", JOIN),
        Origin("tags", "tag_id", JOIN),
    )

    rekey = lineage_of(spec, spec.views["by_name"], SCHEMAS, ["name", "merchant_id", "country"])
    assert rekey.fields == {c: (Origin("merchants", c),) for c in ("name", "merchant_id", "country")}
    assert rekey.matched_on == (Origin("merchants", "name", GROUP_BY),)
    # A column no rule accounts for gets no origin, never a guessed one.
    assert lineage_of(spec, spec.views["by_name"], SCHEMAS, ["_lj_other"]).fields == {"_lj_other": ()}


def plan_of(batch_id: int = 7) -> BatchPlan:
    return BatchPlan(
        "display_products",
        batch_id,
        BatchMode.INCREMENTAL,
        {"products": 3, "merchants": 1},
        {"products": 5, "merchants": 2},
        schemas={k: SCHEMAS[k] for k in ("products", "merchants")},
    )


def summary_of() -> BatchSummary:
    return BatchSummary(
        view="display_products",
        outcome=BatchOutcome.COMMITTED,
        batch_id=7,
        mode=BatchMode.INCREMENTAL,
        pinned_versions={"products": 5, "merchants": 2},
        changed_keys={"products": 2, "merchants": 0},
        change_reads={"products": "driver", "merchants": "spark"},
        affected_keys=3,
        inserted=1,
        updated=2,
        deleted=1,
        output_version=11,
    )


PARENT = {
    "namespace": "airflow",
    "name": "lakejoin_shop.batches",
    "run": "01928bd7-0000-7000-8000-000000000001",
    "root_name": "lakejoin_shop",
    "root_run": "01928bd7-0000-7000-8000-000000000002",
}


def complete_event(spec, parent=PARENT) -> dict:  # noqa: ANN001
    lineage = BatchLineage(spec, spec.views["display_products"], plan_of(), client=None, parent=parent)
    lineage.output_columns = [(c, t) for c, t in SCHEMAS["display_products"].items()]
    lineage.checks = [
        CheckResult("output", "expect_column_values_to_be_unique", {"column": "product_id"}, True, {}),
        CheckResult(
            "output", "expect_table_row_count_to_be_between", {"min_value": 1}, False, {"n": 0}, "warning"
        ),
    ]
    summary = summary_of()
    event = lineage.event(
        "COMPLETE",
        lineage._inputs(summary.changed_keys, summary.change_reads),
        [lineage._output(summary)],
        summary=summary,
    )
    return json.loads(Serde.to_json(event))


def test_a_complete_event_says_what_the_batch_read_and_wrote(spec):
    event = complete_event(spec)
    assert event["eventType"] == "COMPLETE"
    assert event["job"]["namespace"] == "shop" and event["job"]["name"] == "shop.display_products"
    assert event["run"]["runId"] == run_id("shop", "display_products", 7)
    batch = event["run"]["facets"]["lakejoin_batch"]
    assert batch["batchId"] == 7 and batch["mode"] == "incremental"
    assert batch["_schemaURL"].startswith("urn:lakejoin:facets:")

    # Inputs named as the Spark agent names a Delta table, at the batch's pins.
    inputs = {i["name"]: i for i in event["inputs"]}
    assert set(inputs) == {"/lake/products", "/lake/merchants"}
    assert {i["namespace"] for i in event["inputs"]} == {"file"}
    assert inputs["/lake/products"]["facets"]["version"]["datasetVersion"] == "5"
    changes = inputs["/lake/products"]["inputFacets"]["lakejoin_changes"]
    assert (changes["startVersion"], changes["pinnedVersion"], changes["changedKeys"]) == (3, 5, 2)
    assert changes["readBy"] == "driver"  # a few change rows, read with delta-rs (engine/changes.py)
    assert inputs["/lake/merchants"]["inputFacets"]["lakejoin_changes"]["readBy"] == "spark"
    schema = inputs["/lake/products"]["facets"]["schema"]["fields"]
    assert [(f["name"], f["type"]) for f in schema] == [
        ("product_id", "long"),
        ("title", "string"),
        ("merchant_id", "string"),
    ]

    (output,) = event["outputs"]
    assert (output["namespace"], output["name"]) == ("file", "/lake/store/views/display_products")
    assert output["facets"]["version"]["datasetVersion"] == "11"
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 3  # inserted + updated
    counts = output["outputFacets"]["lakejoin_output"]
    assert (counts["inserted"], counts["updated"], counts["deleted"]) == (1, 2, 1)
    lineage = output["facets"]["columnLineage"]
    assert lineage["fields"]["merchant_name"]["inputFields"] == [
        {
            "namespace": "file",
            "name": "/lake/merchants",
            "field": "name",
            "transformations": [{"type": "DIRECT", "subtype": "IDENTITY", "masking": False}],
        }
    ]
    assert [(f["name"], f["field"], f["transformations"][0]["type"]) for f in lineage["dataset"]] == [
        ("/lake/products", "merchant_id", "INDIRECT"),
        ("/lake/merchants", "merchant_id", "INDIRECT"),
    ]
    assertions = output["facets"]["dataQualityAssertions"]["assertions"]
    assert [(a["assertion"], a["success"], a.get("column"), a["severity"]) for a in assertions] == [
        ("expect_column_values_to_be_unique", True, "product_id", "error"),
        ("expect_table_row_count_to_be_between", False, None, "warn"),
    ]

    parent = event["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == PARENT["run"]
    assert (parent["job"]["namespace"], parent["job"]["name"]) == ("airflow", "lakejoin_shop.batches")
    assert parent["root"]["run"]["runId"] == PARENT["root_run"]


def test_a_fan_out_fallback_is_the_output_s_mode_with_its_decision_as_the_reason(spec):
    lineage = BatchLineage(spec, spec.views["display_products"], plan_of(), client=None)
    summary = summary_of()
    summary.kind_metrics["full_recompute"] = 1
    summary.notes["strategy"] = "full recompute: the changed right keys reach 3 of 4 left rows"
    written = json.loads(Serde.to_json(lineage._output(summary)))["outputFacets"]["lakejoin_output"]
    assert written["mode"] == "fanout_fallback"
    assert written["reason"] == summary.notes["strategy"]


def test_the_output_facet_names_the_write_that_made_the_batch_commit(spec):
    """The sink's strategy (sink/strategy.py) rides in the output facet, under its own key: the
    fan-out decision is the facet's `reason`, never a "strategy"."""
    lineage = BatchLineage(spec, spec.views["display_products"], plan_of(), client=None)
    summary = summary_of()
    unnamed = json.loads(Serde.to_json(lineage._output(summary)))["outputFacets"]["lakejoin_output"]
    summary.write = "upsert"

    written = json.loads(Serde.to_json(lineage._output(summary)))["outputFacets"]["lakejoin_output"]

    assert written["write"] == "upsert"
    assert unnamed.get("write") is None


def test_a_batch_keeps_its_run_id_and_without_a_parent_has_none(spec):
    assert run_id("shop", "display_products", 7) == run_id("shop", "display_products", 7)
    assert len({run_id("shop", "display_products", b) for b in (7, 8)}) == 2
    assert run_id("shop", "display_products", 7) != run_id("shop", "enriched", 7)
    assert uuid.UUID(run_id("shop", "display_products", 7))
    assert "parent" not in complete_event(spec, parent=None)["run"]["facets"]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/lake/products/", ("file", "/lake/products")),
        ("file:///lake/products", ("file", "/lake/products")),
        ("s3://bucket/lake/products", ("s3://bucket", "/lake/products")),
    ],
)
def test_a_table_is_named_as_the_spark_agent_names_it(path, expected):
    assert dataset_name(path) == expected


@pytest.fixture
def no_lineage_config(monkeypatch, tmp_path):
    """An environment in which OpenLineage is configured nowhere."""
    import os

    for name in list(os.environ):
        if name.startswith("OPENLINEAGE"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no ./openlineage.yml
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.openlineage/openlineage.yml
    return monkeypatch


def test_nothing_configured_makes_no_client_and_a_transport_makes_one(no_lineage_config, tmp_path):
    assert lineage_client() is None
    no_lineage_config.setenv("OPENLINEAGE__TRANSPORT__TYPE", "http")
    no_lineage_config.setenv("OPENLINEAGE__TRANSPORT__URL", "http://127.0.0.1:9")
    assert lineage_client() is not None
    no_lineage_config.setenv("OPENLINEAGE_DISABLED", "true")
    assert lineage_client() is None
    no_lineage_config.delenv("OPENLINEAGE_DISABLED")
    no_lineage_config.delenv("OPENLINEAGE__TRANSPORT__TYPE")
    no_lineage_config.delenv("OPENLINEAGE__TRANSPORT__URL")
    (tmp_path / "openlineage.yml").write_text("transport:\n  type: console\n")
    assert lineage_client() is not None  # the client's own file, found where it looks


def test_a_receiver_gets_start_then_complete_and_a_dead_one_is_a_warning(
    spec, httpserver, no_lineage_config, caplog
):
    httpserver.expect_request("/api/v1/lineage", method="POST").respond_with_data("", status=201)
    no_lineage_config.setenv("OPENLINEAGE__TRANSPORT__TYPE", "http")
    no_lineage_config.setenv("OPENLINEAGE__TRANSPORT__URL", httpserver.url_for("/").rstrip("/"))
    no_lineage_config.setenv("OPENLINEAGE__TRANSPORT__RETRY__TOTAL", "0")
    lineage = BatchLineage(spec, spec.views["display_products"], plan_of(), lineage_client())
    lineage.start()
    lineage.complete(summary_of())
    lineage.fail(ValueError("the write failed"))
    events = [request.get_json() for request, _ in httpserver.log]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE", "FAIL"]
    assert len({e["run"]["runId"] for e in events}) == 1
    assert events[0]["outputs"] == []  # START: what the batch reads, before it writes
    assert events[1]["outputs"][0]["facets"]["version"]["datasetVersion"] == "11"
    assert events[2]["run"]["facets"]["errorMessage"]["message"] == "the write failed"
    httpserver.check_assertions()

    httpserver.stop()  # the collector goes away: the batch goes on, with a warning
    with caplog.at_level(logging.WARNING, logger="lakejoin.engine.lineage"):
        lineage.complete(summary_of())
    assert "OpenLineage COMPLETE event of batch 7 of display_products was not sent" in caplog.text
