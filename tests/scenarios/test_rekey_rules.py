"""Truth tables of rekey on real Delta tables (DESIGN §1, issue 3).

merchants(merchant_id, display_name, country, photo_url) re-keyed by display_name, carrying
country. After every batch the output must equal the plain-Python oracle at the pinned
versions, and the output's change feed must hold exactly the derived rows the rules say.
"""

from __future__ import annotations

import signal
from typing import Any

import pytest

from lakejoin.delta.records import BatchStatus
from lakejoin.engine.batch import batch_log
from lakejoin.errors import KeyConflictError
from tests.lakehouse import (
    MASTERS,
    output_rows,
    rekey_oracle,
    run_and_watch,
    run_cli_with_failpoint,
    state_table,
    write_spec,
)

pytestmark = pytest.mark.scenario

VIEW = "merchants_by_name"


def spec_of(lake, settings: str = ""):
    views = f"""\
  {VIEW}:
    rekey: {{source: merchants, key: display_name, columns: [country]{settings}}}
"""
    return write_spec(lake, {"merchants": "merchant_id"}, views)


def run(lake, spec, **kwargs: Any):
    """One batch; returns its summary and the output's change rows as (change, name, merchant)."""
    summary, rows = run_and_watch(lake, spec, VIEW, **kwargs)
    changed = {(r["_change_type"], r["display_name"], r["merchant_id"]) for r in rows}
    assert output_rows(lake, spec, VIEW) == rekey_oracle(lake, spec, VIEW)
    return summary, changed


def table(lake, spec) -> dict[str, tuple[str, str]]:
    """display_name -> (merchant_id, country)."""
    return {r["display_name"]: (r["merchant_id"], r["country"]) for r in output_rows(lake, spec, VIEW)}


def test_rekey_rules_under_fail(lake):
    lake.create(
        "merchants",
        MASTERS,
        [("m1", "Acme", "NO", "a.png"), ("m2", "Bolt", "SE", "b.png"), ("m3", None, "DK", "c.png")],
    )
    spec = spec_of(lake)
    summary, _ = run(lake, spec)
    assert table(lake, spec) == {"Acme": ("m1", "NO"), "Bolt": ("m2", "SE")}
    assert summary.metrics()["null_keys_dropped"] == 1  # m3 has no name

    # v1 -> v2 deletes v1 and writes v2; an update that keeps v (and the chosen columns) writes
    # nothing; a new master with a null key is dropped and counted.
    lake.upsert("merchants", "merchant_id", [("m1", "Apex", "NO", "a.png"), ("m2", "Bolt", "SE", "b2.png")])
    lake.upsert("merchants", "merchant_id", [("m4", None, "FI", "d.png")])
    summary, changed = run(lake, spec)
    assert changed == {("delete", "Acme", "m1"), ("insert", "Apex", "m1")}
    assert summary.metrics()["null_keys_dropped"] == 1

    # Two masters swap their values within one batch.
    lake.upsert("merchants", "merchant_id", [("m1", "Bolt", "NO", "a.png"), ("m2", "Apex", "SE", "b2.png")])
    summary, changed = run(lake, spec)
    assert table(lake, spec) == {"Bolt": ("m1", "NO"), "Apex": ("m2", "SE")}
    assert changed == {("update_postimage", "Bolt", "m1"), ("update_postimage", "Apex", "m2")}

    # A master delete deletes its derived row; a master that moves to a null key loses its row.
    lake.delete("merchants", "merchant_id", ["m2"])
    lake.upsert("merchants", "merchant_id", [("m1", None, "NO", "a.png")])
    summary, changed = run(lake, spec)
    assert changed == {("delete", "Apex", "m2"), ("delete", "Bolt", "m1")}
    assert table(lake, spec) == {}

    # Two masters claiming one derived key: the batch stops before it writes, listing both.
    lake.upsert("merchants", "merchant_id", [("m1", "Cord", "NO", "a.png"), ("m5", "Cord", "IS", "e.png")])
    output_before = output_rows(lake, spec, VIEW)
    with pytest.raises(KeyConflictError) as exc:
        lake.run(spec, VIEW)
    message = str(exc.value)
    assert "display_name='Cord' <- merchant_id ['m1', 'm5']" in message
    assert "on_conflict: latest" in message and "nothing was written" in message
    assert output_rows(lake, spec, VIEW) == output_before
    assert batch_log(spec).last(VIEW).status is BatchStatus.ABANDONED

    # Once the data is fixed the next run goes on, incrementally, from the last commit.
    lake.upsert("merchants", "merchant_id", [("m5", "Dune", "IS", "e.png")])
    summary, changed = run(lake, spec)
    assert summary.mode.value == "incremental"
    assert changed == {("insert", "Cord", "m1"), ("insert", "Dune", "m5")}


def test_rekey_latest_keeps_the_master_changed_last_and_reports_it(lake):
    lake.create("merchants", MASTERS, [("m1", "Acme", "NO", "a.png")])
    spec = spec_of(lake, ", on_conflict: latest")
    run(lake, spec)

    # m2 claims Acme later than m1: m2 wins, and the batch reports the conflict.
    lake.upsert("merchants", "merchant_id", [("m2", "Acme", "SE", "b.png")])
    summary, changed = run(lake, spec)
    assert table(lake, spec) == {"Acme": ("m2", "SE")}
    assert summary.metrics()["conflicts"] == 1
    assert "display_name='Acme' <- merchant_id ['m1', 'm2']" in summary.notes["conflicts"]

    # m1 changes after m2 (even a column the view does not carry): m1 is now the latest. Two
    # masters claiming one key in the same commit: the greatest master key wins.
    lake.upsert("merchants", "merchant_id", [("m1", "Acme", "NO", "a2.png")])
    lake.upsert("merchants", "merchant_id", [("m3", "Cord", "DK", "c.png"), ("m4", "Cord", "FI", "d.png")])
    summary, changed = run(lake, spec)
    assert table(lake, spec) == {"Acme": ("m1", "NO"), "Cord": ("m4", "FI")}
    assert summary.metrics()["conflicts"] == 2

    # The winner leaves: the other claimant takes the key over, from the index, without a rescan.
    lake.delete("merchants", "merchant_id", ["m1", "m4"])
    summary, changed = run(lake, spec)
    assert table(lake, spec) == {"Acme": ("m2", "SE"), "Cord": ("m3", "DK")}
    assert summary.metrics()["conflicts"] == 0

    # A full refresh derives the same table from the master's history: it writes nothing.
    summary, changed = run(lake, spec, full_refresh=True)
    assert changed == set()


def test_a_master_written_back_unchanged_does_not_take_its_key_back(lake):
    """Issue 36, `on_conflict: latest`: a master's claim dates from its last change of content. A
    master written back unchanged (Spark's MERGE, delta-rs's MERGE, an overwrite of the whole
    table: a daily reload, a CDC re-snapshot) after another master took its derived key does
    not take it back, in incremental batches or a full refresh; a change of any of its columns
    does."""
    lake.create("merchants", MASTERS, [("m4", "Bolt", "SE", "d.png"), ("m2", "Cord", "DK", "c.png")])
    spec = spec_of(lake, ", on_conflict: latest")
    run(lake, spec)

    # m1 claims Bolt, which m4 has held for a while: m1 changed last and takes it.
    lake.upsert("merchants", "merchant_id", [("m1", "Bolt", "NO", "a.png")])
    run(lake, spec)
    assert table(lake, spec) == {"Bolt": ("m1", "NO"), "Cord": ("m2", "DK")}

    # m4 written back as it was, alone and then with the whole table: m1 keeps Bolt, and the
    # batches are nothing new (no output commit, no index write).
    for writes in ([("spark", ["m4"])], [("delta-rs", ["m4"]), ("overwrite", None)]):
        index_before = state_table(lake, spec, VIEW)
        for writer, keys in writes:
            assert lake.rewrite("merchants", "merchant_id", keys, writer=writer)
        summary, changed = run(lake, spec)
        assert summary.outcome.value == "skipped", writes
        assert summary.reason.startswith("nothing new: no change of content")
        assert summary.changed_keys == {"merchants": 0}
        assert changed == set()
        assert state_table(lake, spec, VIEW) == index_before
        assert table(lake, spec) == {"Bolt": ("m1", "NO"), "Cord": ("m2", "DK")}

    # A rewrite in the batch of another master's real change: only the change counts.
    assert lake.rewrite("merchants", "merchant_id", ["m4"], writer="delta-rs")
    lake.upsert("merchants", "merchant_id", [("m2", "Cord", "IS", "c.png")])
    summary, changed = run(lake, spec)
    assert summary.changed_keys == {"merchants": 1}
    assert changed == {("update_postimage", "Cord", "m2")}
    assert table(lake, spec)["Bolt"] == ("m1", "NO")

    # A full refresh reads the master's whole change feed: the rewrites renew nothing there.
    summary, changed = run(lake, spec, full_refresh=True)
    assert changed == set()
    assert table(lake, spec) == {"Bolt": ("m1", "NO"), "Cord": ("m2", "IS")}

    # m4 changes a column the view does not carry (its photo): a change of content, the latest.
    lake.upsert("merchants", "merchant_id", [("m4", "Bolt", "SE", "d2.png")])
    summary, changed = run(lake, spec)
    assert changed == {("update_postimage", "Bolt", "m4")}
    assert table(lake, spec) == {"Bolt": ("m4", "SE"), "Cord": ("m2", "IS")}
    assert summary.metrics()["conflicts"] == 1


def test_rekey_without_unique_gives_one_row_per_master(lake):
    lake.create("merchants", MASTERS, [("m1", "Acme", "NO", "a.png"), ("m2", "Acme", "SE", "b.png")])
    spec = spec_of(lake, ", unique: false")
    run(lake, spec)
    assert {(r["display_name"], r["merchant_id"]) for r in output_rows(lake, spec, VIEW)} == {
        ("Acme", "m1"),
        ("Acme", "m2"),
    }

    lake.upsert("merchants", "merchant_id", [("m1", "Bolt", "NO", "a.png"), ("m3", "Acme", "DK", "c.png")])
    lake.delete("merchants", "merchant_id", ["m2"])
    summary, changed = run(lake, spec)
    assert changed == {
        ("delete", "Acme", "m1"),
        ("insert", "Bolt", "m1"),
        ("delete", "Acme", "m2"),
        ("insert", "Acme", "m3"),
    }


def test_a_batch_killed_after_its_index_write_ends_exact_on_the_next_run(lake):
    """The batch dies (SIGKILL, its own JVM) after it wrote its rekey index, before its output
    commit: nothing of the batch is visible, though the index already holds m1's new key. The
    next run plans afresh at newer versions, reads the index at the version the last committed
    batch pinned, and ends exact; so does the batch after it, which needs the index's versions
    to hand a key over to the other claimant."""
    lake.create("merchants", MASTERS, [("m1", "Acme", "NO", "a.png"), ("m2", "Bolt", "SE", "b.png")])
    spec = spec_of(lake, ", on_conflict: latest")
    run(lake, spec)
    state_before, _ = state_table(lake, spec, VIEW)
    output_before = output_rows(lake, spec, VIEW)
    lake.upsert("merchants", "merchant_id", [("m1", "Apex", "NO", "a.png")])  # m1 leaves Acme

    crashed = run_cli_with_failpoint(spec.file, "after_state_write")

    assert crashed.returncode == -signal.SIGKILL, crashed.stdout[-3000:] + crashed.stderr[-3000:]
    assert [r.batch_id for r in batch_log(spec).history(VIEW)] == [1]
    assert output_rows(lake, spec, VIEW) == output_before
    assert state_table(lake, spec, VIEW)[0] > state_before  # the dead run wrote its index
    lake.upsert("merchants", "merchant_id", [("m2", "Apex", "SE", "b2.png")])  # m2 claims Apex later

    retry, changed = run(lake, spec)

    assert retry.batch_id == 2
    assert table(lake, spec) == {"Apex": ("m2", "SE")}
    assert changed == {("delete", "Acme", "m1"), ("delete", "Bolt", "m2"), ("insert", "Apex", "m2")}
    assert retry.metrics()["conflicts"] == 1

    lake.delete("merchants", "merchant_id", ["m2"])  # Apex goes back to m1, from the index
    following, changed = run(lake, spec)
    assert following.batch_id == 3 and changed == {("update_postimage", "Apex", "m1")}
    assert table(lake, spec) == {"Apex": ("m1", "NO")}
