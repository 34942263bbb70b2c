"""Repairs: only the output keys that source changes in a range touched are re-derived, at the
last committed pins, and the checkpoint does not move."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lakejoin.delta.records import BatchMode
from lakejoin.engine.batch import BatchOutcome, batch_log
from lakejoin.engine.repair import RepairRange, requested_repair
from lakejoin.errors import RepairError
from tests.lakehouse import (
    ADDRESSES,
    MASTERS,
    MERCHANTS,
    PERSONS,
    PRODUCTS,
    drift,
    list_join_oracle,
    output_rows,
    write_spec,
)

pytestmark = pytest.mark.scenario

VIEW = "display_products"


def corrupt(lake, spec, view: str, column: str, where: str) -> None:
    """Drift, as an old bug would leave it: rows the sources do not explain, committed under
    lakejoin's marker, so the log cannot tell (someone's plain edit shows in the log: the next
    batch recomputes the view, and a repair is refused, tests/scenarios/test_replaced_inputs.py)."""
    drift(spec.views[view].path, where, {column: "'STALE'"})


def rewritten_keys(lake, spec, since_version: int) -> list[str]:
    """The output keys the commits after `since_version` wrote (inserted, updated or deleted)."""
    changes = lake.output_changes(spec, since_version + 1)
    return sorted({r["product_id"] for r in changes if r["_change_type"] != "update_preimage"})


def output_version(lake, spec, view: str = VIEW) -> int:
    from delta.tables import DeltaTable

    return int(DeltaTable.forPath(lake.spark, spec.views[view].path).history(1).first()["version"])


def commit_time(lake, table: str, version: int) -> datetime:
    from delta.tables import DeltaTable

    history = DeltaTable.forPath(lake.spark, lake.path(table)).history()
    stamp = history.where(f"version = {version}").first()["timestamp"]
    return stamp.replace(tzinfo=UTC)


def test_a_repair_rewrites_only_the_keys_its_range_touched(lake):
    lake.create("merchants", MERCHANTS, [("m1", "Acme", "a"), ("m2", "Bolt", "b"), ("m3", "Cord", "c")])
    lake.create(
        "products",
        PRODUCTS,
        [
            ("p1", "pen", 1.0, "m1"),
            ("p2", "cup", 2.0, "m2"),
            ("p3", "jar", 3.0, "m2"),
            ("p4", "mug", 4.0, "m3"),
        ],
    )
    spec = lake.spec("left", right_columns="[display_name]")
    lake.run(spec)  # products@1, merchants@1
    lake.upsert("products", "product_id", [("p1", "pencil", 1.0, "m1")])  # products@2
    lake.upsert("merchants", "merchant_id", [("m2", "Bolt & Co", "b")])  # merchants@2 -> p2, p3
    lake.upsert("products", "product_id", [("p4", "mug", 5.0, "m3")])  # products@3
    lake.run(spec)
    checkpoint = batch_log(spec).last_committed(VIEW)
    assert lake.output(spec) == lake.expected(spec)

    corrupt(lake, spec, VIEW, "display_name", "product_id IN ('p1', 'p2', 'p4')")
    before = output_version(lake, spec)

    # Versions 2..2 of every source: p1's change and m2's change (which reaches p2 and p3).
    summary = lake.run(spec, repair=RepairRange.parse("2", "2"))
    assert summary.outcome is BatchOutcome.COMMITTED and summary.mode is BatchMode.REPAIR
    assert summary.affected_keys == 3  # p1, p2, p3: p3 was right, so the MERGE leaves it alone
    assert rewritten_keys(lake, spec, before) == ["p1", "p2"]
    rows = {r["product_id"]: r for r in lake.output(spec)}
    assert rows["p1"]["display_name"] == "Acme" and rows["p2"]["display_name"] == "Bolt & Co"
    assert rows["p4"]["display_name"] == "STALE"  # products@3 is outside the range

    # The checkpoint did not move: the repair pinned what the last batch pinned, and a normal
    # run still finds nothing new.
    repair = batch_log(spec).last(VIEW)
    assert repair.mode is BatchMode.REPAIR
    assert {s: repair.pinned_versions[s] for s in ("products", "merchants")} == {
        s: checkpoint.pinned_versions[s] for s in ("products", "merchants")
    }
    assert "versions products 2..2, merchants 2..2" in repair.notes["repair"]
    assert lake.run(spec).outcome is BatchOutcome.SKIPPED

    # By time: products' commit 3 and after; merchants have no commit in that window.
    before = output_version(lake, spec)
    summary = lake.run(spec, repair=RepairRange.parse(commit_time(lake, "products", 3).isoformat()))
    assert rewritten_keys(lake, spec, before) == ["p4"]
    assert "merchants none" in summary.notes["repair"]
    assert lake.output(spec) == lake.expected(spec)

    # The next incremental batch starts from the checkpoint, as if no repair had run.
    lake.upsert("products", "product_id", [("p3", "jar", 3.5, "m1")])
    summary = lake.run(spec)
    assert summary.mode is BatchMode.INCREMENTAL
    assert summary.start_versions["products"] == checkpoint.pinned_versions["products"]
    assert lake.output(spec) == lake.expected(spec)


def test_a_repair_from_the_start_mends_list_join_and_rekey_outputs(lake):
    """From version 0 every key is touched: the output equals a recompute, however it drifted.
    A list_join repair must re-join lists it would otherwise carry over from the output (its
    fan-out fallback is off, or the repair would be a full recompute and prove nothing)."""
    lake.create("persons", PERSONS, [("u1", "Ann", ["a1", "a2"]), ("u2", "Bo", ["a2"])])
    lake.create("addresses", ADDRESSES, [("a1", "Elm", "Oslo"), ("a2", "Oak", "Rome")])
    lake.create("masters", MASTERS, [("m1", "Acme", "DE", "x"), ("m2", "Bolt", "FR", "y")])
    spec = write_spec(
        lake,
        {"persons": "person_id", "addresses": "address_id", "masters": "merchant_id"},
        "  person_addresses:\n    list_join: {left: persons, list: address_ids, right: addresses, "
        "into: addresses, fanout_threshold: 1.0}\n"
        "  by_name:\n    rekey: {source: masters, key: display_name, columns: [country]}\n",
    )
    for view in spec.views:
        lake.run(spec, view)
    lake.upsert("addresses", "address_id", [("a2", "Oak", "Milan")])
    lake.upsert("masters", "merchant_id", [("m2", "Bolt", "ES", "y")])
    for view in spec.views:
        lake.run(spec, view)
    expected = {view: output_rows(lake, spec, view) for view in spec.views}
    assert expected["person_addresses"] == list_join_oracle(lake, spec, "person_addresses")

    drift(
        spec.views["person_addresses"].path,
        "person_id = 'u1'",
        {"name": "'STALE'", "addresses": "array_slice(addresses, 1, 1)"},  # one of u1's two
    )
    corrupt(lake, spec, "by_name", "country", "merchant_id = 'm1'")
    for view in spec.views:
        lake.run(spec, view, repair=RepairRange.parse("0"))
        assert output_rows(lake, spec, view) == expected[view], view


def test_repair_ranges_and_refusals(lake):
    with pytest.raises(RepairError, match="neither a version number nor an ISO timestamp"):
        RepairRange.parse("yesterday")
    with pytest.raises(RepairError, match="mix a version and a timestamp"):
        RepairRange.parse("3", "2026-11-01T00:00:00")
    with pytest.raises(RepairError, match="ends .* before it starts"):
        RepairRange.parse("5", "2")
    assert RepairRange.parse("2026-11-01T10:00:00").start == datetime(2026, 11, 1, 10, tzinfo=UTC)

    # A backfill run repairs its data interval; a form's range wins; other runs repair nothing.
    start, end = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC)
    assert requested_repair({}, backfill=True, interval=(start, end)) == RepairRange(start, end)
    assert requested_repair({"repair_from": "7"}, backfill=True, interval=(start, end)) == RepairRange(7)
    assert requested_repair({"full_refresh": True}, backfill=False, interval=(start, end)) is None

    lake.create("merchants", MERCHANTS, [("m1", "Acme", "a")])
    lake.create("products", PRODUCTS, [("p1", "pen", 1.0, "m1")])
    spec = lake.spec()
    with pytest.raises(RepairError, match="no committed batch") as refused:
        lake.run(spec, repair=RepairRange.parse("0"))
    assert "run the view first" in str(refused.value)
    lake.run(spec)
    # Right after a first, full batch: its record pins the state tables from before it made them.
    assert lake.run(spec, repair=RepairRange.parse("0")).outcome is BatchOutcome.COMMITTED
    assert lake.output(spec) == lake.expected(spec)
    with pytest.raises(RepairError, match="both asked for"):
        lake.run(spec, full_refresh=True, repair=RepairRange.parse("0"))
