"""bench/targets.py's `replace_entries` replaces one writer's entries of targets.json and keeps
every other writer's (issue 53): the owner is matched exactly, not as a prefix, so running
`bench.audit_cost` keeps `audit_cost_dv`'s entries."""

from __future__ import annotations

import json

import pytest
from bench.targets import owns, replace_entries

pytestmark = pytest.mark.unit


def _entry(batch: str, target: str = "t") -> dict[str, object]:
    return {"target": target, "measured": 1.0, "limit": 2.0, "met": True, "batch": batch, "commit": "abc1234"}


@pytest.mark.parametrize(
    ("owner", "batch", "owned"),
    [
        ("audit_cost", "audit_cost", True),
        ("audit_cost", "audit_cost_dv", False),
        ("audit_cost_dv", "audit_cost", False),
        ("audit_cost_dv", "audit_cost_dv", True),
        ("matrix", "matrix 15,000,000 orders #57", True),
        ("fixed_cost", "fixed_cost tiny_2, 1.5 M orders", True),
        ("composite_key", "composite_key tiny", True),
        ("run_path", "run_path ci", True),
        ("tiny", "tiny_views", False),
        ("matrix", "", False),
    ],
)
def test_an_entry_belongs_to_the_writer_its_batch_names(owner, batch, owned):
    assert owns(owner, {"batch": batch}) is owned


def test_a_writer_replaces_its_own_entries_and_keeps_the_others_in_order(tmp_path):
    path = tmp_path / "targets.json"
    on_file = [
        _entry("audit_cost", "old"),
        _entry("audit_cost_dv", "dv 1"),
        _entry("audit_cost_dv", "dv 2"),
        _entry("matrix 1,500,000 orders #39"),
        _entry("audit_cost", "old too"),
    ]
    path.write_text(json.dumps(on_file))

    replace_entries(path, "audit_cost", [_entry("audit_cost", "new")])

    found = json.loads(path.read_text())
    assert [(e["batch"], e["target"]) for e in found] == [
        ("audit_cost_dv", "dv 1"),
        ("audit_cost_dv", "dv 2"),
        ("matrix 1,500,000 orders #39", "t"),
        ("audit_cost", "new"),
    ]


def test_a_missing_file_is_written_with_the_writers_entries(tmp_path):
    path = tmp_path / "targets.json"

    replace_entries(path, "lineage_cost", [_entry("lineage_cost")])

    assert json.loads(path.read_text()) == [_entry("lineage_cost")]
