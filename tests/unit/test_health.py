"""Join health's arithmetic and limits (issue 40), without Spark."""

from __future__ import annotations

import pytest

from lakejoin.quality.health import Health, breaches, totals
from lakejoin.spec.model import Limit, OnBreach

pytestmark = pytest.mark.unit


def test_a_total_is_the_last_one_less_the_affected_keys_before_plus_after():
    previous = {"missing_right": 10, "null_fk": 4}
    after = totals(previous, old={"missing_right": 3, "null_fk": 0}, new={"missing_right": 1, "null_fk": 2})
    assert after == {"missing_right": 8, "null_fk": 6}
    assert totals({}, old={}, new={"missing_right": 5}) == {"missing_right": 5}  # the first batch
    with pytest.raises(ValueError, match="below zero"):
        totals({"missing_right": 1}, old={"missing_right": 2}, new={})


def test_health_goes_to_the_batch_log_and_back():
    health = Health(
        {"missing_right": 8, "null_fk": 0}, rows=400, waiting_batches=3, waiting_seconds=7200.4, late=2
    )
    metrics = health.metrics()
    assert metrics == {
        "health.missing_right": 8,
        "health.null_fk": 0,
        "health.rows": 400,
        "health.late": 2,
        "health.waiting_batches": 3,
        "health.waiting_s": 7200,
    }
    back = Health.from_metrics({**metrics, "inserted": 5})
    assert back == Health({"missing_right": 8, "null_fk": 0}, 400, 3, 7200.0, 2)
    assert Health.from_metrics({"inserted": 5}) is None
    assert "health.waiting_batches" not in Health({"missing_right": 0}, rows=4).metrics()


def test_a_limit_is_broken_by_a_share_a_count_or_an_age():
    health = Health(
        {"missing_right": 30, "null_fk": 2},
        rows=1000,
        waiting_batches=5,
        waiting_seconds=3 * 3600,
        examples={"missing_right": ["'o1'", "'o7'"]},
    )
    limits = (
        Limit("missing_right", max_share=0.01, on_breach=OnBreach.FAIL),
        Limit("null_fk", max_rows=2),  # 2 is not over 2
        Limit("waiting", max_batches=10, max_hours=2),
    )
    found = breaches(limits, health)
    assert [(b.limit.measure, b.bound, b.fails) for b in found] == [
        ("missing_right", "max_share", True),
        ("waiting", "max_hours", False),
    ]
    assert found[0].text() == "missing_right: 30 rows (3 % of 1,000), over max_share 0.01 (e.g. 'o1', 'o7')"
    assert found[1].text() == "waiting: the oldest row has waited 3 hours, over max_hours 2"
    assert breaches(limits, Health({"missing_right": 0}, rows=0)) == []  # nothing waits, no rows


def test_status_says_the_counts_and_the_oldest_waiting_row_in_a_line():
    health = Health(
        {"missing_right": 1200, "null_fk": 0}, rows=57000, waiting_batches=3, waiting_seconds=5400, late=2
    )
    assert (
        health.text()
        == "missing_right 1,200, null_fk 0 of 57,000 rows; oldest waiting 3 batches (1.5 h); 2 arrived late"
    )
    assert Health({"missing_right": 0}, rows=4).text() == "missing_right 0 of 4 rows"


def test_a_flagged_key_read_back_by_delta_rs_matches_the_key_spark_collects():
    """delta-rs gives a timestamp key back in UTC with its zone; PySpark's `collect` gives it as a
    naive local time: the flagged keys compare them as Spark does (engine/health.py)."""
    from datetime import UTC, datetime

    from lakejoin.engine.health import _key

    spark_gave = datetime(2026, 11, 29, 8, 30)  # naive, local
    table_gave = spark_gave.astimezone(UTC)
    assert _key({"at": table_gave, "id": "a"}, ["id", "at"]) == ("a", spark_gave)
    assert _key({"id": 7}, ["id"]) == (7,)


def test_a_share_is_of_the_first_inputs_rows_from_its_file_statistics(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    from lakejoin.delta.lookups import row_count

    path = str(tmp_path / "orders")
    write_deltalake(path, pa.table({"order_id": [1, 2, 3]}))
    write_deltalake(path, pa.table({"order_id": [4, 5]}), mode="append")
    assert (row_count(path, 0), row_count(path, 1)) == (3, 5)


def test_runs_writing_the_flagged_keys_at_once_each_pin_their_own_rows(tmp_path):
    """Four runs of one batch rewrite the table together (tests/e2e's concurrent runs): delta-rs
    refuses all commits but one in each round, and a refused one is written again on the newest
    version, so none fails and each run's pinned version holds its own rows."""
    import threading

    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from lakejoin.engine.health import WRITE_ATTEMPTS, FlaggedUpdate

    path = str(tmp_path / "health")
    write_deltalake(path, pa.table({"k": ["k0"]}))
    runs = 4
    assert runs <= WRITE_ATTEMPTS  # each round lands one commit
    start, pinned, errors = threading.Barrier(runs), {}, []

    def run(i: int) -> None:
        update = FlaggedUpdate(path, pa.table({"k": [f"k{i}"]}), changed=True, version=0)
        start.wait()
        try:
            pinned[i] = update.write()
        except Exception as exc:  # noqa: BLE001 - the assertion below names it
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(1, runs + 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert sorted(pinned.values()) == list(range(1, runs + 1))
    for i, version in pinned.items():
        assert DeltaTable(path, version=version).to_pyarrow_table().column("k").to_pylist() == [f"k{i}"]
    unchanged = FlaggedUpdate(path, pa.table({"k": ["k0"]}), changed=False, version=0)
    assert unchanged.write() == 0
