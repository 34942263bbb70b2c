"""OpenLineage events of real batches (issue 39), collected by a real HTTP receiver on 127.0.0.1:
one lake, one view of each kind (and a view reading a view), several batches: a first build,
changes, a full refresh, a repair, a batch with nothing new, one of no change of content, a
failing blocking check and its retry. Each batch sends START then COMPLETE (or FAIL); its inputs
and output carry the Delta versions it pinned and committed; the column lineage is the spec's;
a retried batch keeps its run id; a batch with nothing new sends nothing. The Airflow task as
the parent run is tests/airflow/test_dags.py's."""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable

from lakejoin.delta.markers import FINAL, find_commit
from lakejoin.delta.records import BatchMode
from lakejoin.engine.lineage import run_id
from lakejoin.engine.repair import RepairRange
from lakejoin.errors import QualityCheckError
from tests.lakehouse import ADDRESSES, MASTERS, MERCHANTS, PERSONS, PRODUCTS, write_spec

pytestmark = pytest.mark.e2e

VIEWS = """\
  display_products:
    fk_join: {left: products, right: merchants, fk: merchant_id, how: left,
              right_columns: [display_name], right_prefix: merchant_, fanout_threshold: 1.0}
  enriched_products:
    enrich:
      fact: display_products
      mode: propagate
      fanout_threshold: 1.0
      dimensions: [{table: masters, fk: merchant_id, prefix: m_, columns: [country]}]
  person_addresses:
    list_join: {left: persons, list: address_ids, right: addresses, into: addresses,
                fanout_threshold: 1.0}
  masters_by_country:
    rekey: {source: masters, key: country, columns: [display_name], unique: false}
"""
KEYS = {
    "products": "product_id",
    "merchants": "merchant_id",
    "masters": "merchant_id",
    "persons": "person_id",
    "addresses": "address_id",
}


def by_name(datasets: list[dict]) -> dict[str, dict]:
    return {d["name"]: d for d in datasets}


def version(path: str) -> int:
    return DeltaTable(path).version()


def test_every_batch_tells_what_it_read_and_wrote(lake, lineage_events, monkeypatch):
    lake.create("merchants", MERCHANTS, [("m1", "Acme", "a.png"), ("m2", "Bolt", "b.png")])
    lake.create("masters", MASTERS, [("m1", "Acme", "NO", "a.png"), ("m2", "Bolt", "SE", "b.png")])
    lake.create("products", PRODUCTS, [("p1", "pen", 1.0, "m1"), ("p2", "cup", 2.0, "m2")])
    lake.create("persons", PERSONS, [("u1", "Ann", ["a1", "a9"])])
    lake.create("addresses", ADDRESSES, [("a1", "Main St", "Oslo")])
    spec = write_spec(lake, KEYS, VIEWS)
    paths = {name: source.path for name, source in spec.sources.items()}

    # 1. The first batch of each view: START, then COMPLETE with the pins and the commit.
    for view in spec.view_order():
        summary = lake.run(spec, view)
        start, complete = lineage_events()
        assert [start["eventType"], complete["eventType"]] == ["START", "COMPLETE"]
        assert start["run"]["runId"] == complete["run"]["runId"] == run_id(spec.name, view, 1)
        assert complete["job"] == {**complete["job"], "namespace": spec.name, "name": f"{spec.name}.{view}"}
        inputs = by_name(complete["inputs"])
        assert set(inputs) == {paths[name] for name in spec.views[view].inputs}
        for name in spec.views[view].inputs:
            pinned = inputs[paths[name]]["facets"]["version"]["datasetVersion"]
            assert pinned == str(summary.pinned_versions[name]) == str(version(paths[name]))
        (output,) = complete["outputs"]
        assert (output["namespace"], output["name"]) == ("file", spec.views[view].path)
        assert output["facets"]["version"]["datasetVersion"] == str(version(spec.views[view].path))
        assert output["outputFacets"]["lakejoin_output"]["mode"] == "full_refresh"
        assertions = output["facets"]["dataQualityAssertions"]["assertions"]
        assert assertions and all(a["success"] for a in assertions)
        fields = output["facets"]["schema"]["fields"]
        assert [f["name"] for f in fields] == [
            c for c in lake.spark.read.format("delta").load(output["name"]).columns
        ]

    # 2. Changes on both sides: the counts, the change ranges and column lineage.
    merchants_before = version(paths["merchants"])
    lake.upsert("merchants", "merchant_id", [("m1", "Acme Ltd", "a.png")])
    lake.upsert("products", "product_id", [("p3", "mug", 3.0, "m2")])
    lake.upsert("masters", "merchant_id", [("m2", "Bolt", "NO", "b.png")])
    lake.upsert("addresses", "address_id", [("a9", "High St", "Bergen")])
    events = {}
    for view in spec.view_order():
        lake.run(spec, view)
        start, complete = lineage_events()
        events[view] = complete
    display = events["display_products"]
    changes = by_name(display["inputs"])[paths["merchants"]]["inputFacets"]["lakejoin_changes"]
    assert (changes["startVersion"], changes["pinnedVersion"], changes["changedKeys"]) == (
        merchants_before,
        version(paths["merchants"]),
        1,
    )
    assert changes["readBy"] == "driver"  # one changed row: its range read with delta-rs
    written = display["outputs"][0]["outputFacets"]["lakejoin_output"]
    assert (written["mode"], written["inserted"], written["updated"], written["deleted"]) == (
        "incremental",
        1,
        1,
        0,
    )
    columns = display["outputs"][0]["facets"]["columnLineage"]
    assert columns["fields"]["merchant_display_name"]["inputFields"][0]["name"] == paths["merchants"]
    assert columns["fields"]["merchant_display_name"]["inputFields"][0]["field"] == "display_name"
    assert {(f["name"], f["field"]) for f in columns["dataset"]} == {
        (paths["products"], "merchant_id"),
        (paths["merchants"], "merchant_id"),
    }
    enriched = by_name(events["enriched_products"]["inputs"])
    assert spec.views["display_products"].path in enriched  # the upstream view's output
    listed = events["person_addresses"]["outputs"][0]["facets"]["columnLineage"]["fields"]["addresses"]
    assert {(f["field"], f["transformations"][0]["subtype"]) for f in listed["inputFields"]} >= {
        ("address_ids", "TRANSFORMATION"),
        ("city", "AGGREGATION"),
    }

    # 3. A full refresh and a repair say so.
    lake.run(spec, "display_products", full_refresh=True)
    _, complete = lineage_events()
    assert complete["outputs"][0]["outputFacets"]["lakejoin_output"]["mode"] == "full_refresh"
    lake.run(spec, "display_products", repair=RepairRange.parse("0"))
    _, complete = lineage_events()
    assert complete["run"]["facets"]["lakejoin_batch"]["mode"] == "repair"
    # Its output commit says where each re-derived range ended (what `explain` lists).
    found = find_commit(spec.views["display_products"].path, lambda m: m.part == FINAL)
    assert found is not None and found[1].mode is BatchMode.REPAIR
    repaired = found[1]
    inputs = spec.views["display_products"].inputs
    assert repaired.repair_ends == {s: repaired.pinned_versions[s] for s in inputs}

    # 4. Nothing new sends nothing; rows written back as they were: COMPLETE without output.
    assert lake.run(spec, "display_products").outcome.value == "skipped"
    assert lineage_events() == []
    assert lake.rewrite("products", "product_id", ["p1"], writer="spark")
    lake.run(spec, "display_products")
    start, complete = lineage_events()
    assert complete["eventType"] == "COMPLETE" and complete["outputs"] == []
    assert complete["run"]["facets"]["lakejoin_batch"]["reason"].startswith("nothing new")

    # 5. A failing blocking check: FAIL with the error; the retry is another batch (a new run).
    expectations = lake.root / "expectations"
    (expectations / spec.name).mkdir(parents=True)
    (expectations / spec.name / "display_products.json").write_text(
        json.dumps(
            {
                "name": "display_products",
                "expectations": [
                    {
                        "type": "expect_column_values_to_be_between",
                        "kwargs": {"column": "price", "max_value": 10},
                    }
                ],
            }
        )
    )
    monkeypatch.setenv("LAKEJOIN_EXPECTATIONS_DIR", str(expectations))
    lake.upsert("products", "product_id", [("p4", "gold pen", 50.0, "m1")])
    with pytest.raises(QualityCheckError):
        lake.run(spec, "display_products")
    start, fail = lineage_events()
    assert (start["eventType"], fail["eventType"]) == ("START", "FAIL")
    assert fail["run"]["runId"] == start["run"]["runId"]
    assert "expect_column_values_to_be_between" in fail["run"]["facets"]["errorMessage"]["message"]
    assert fail["outputs"] == []
