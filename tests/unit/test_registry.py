"""The view-kind registry (spec/registry.py, issue 25) lists every kind's parts, and they fit:
its logic path names a ViewKindLogic, and its labels cover every metric its logic reports. No
JVM: the kinds' modules are imported, never run."""

from __future__ import annotations

import ast
import inspect
from dataclasses import replace

import pytest

from lakejoin.engine.kinds import kind_logic
from lakejoin.spec.model import ViewKind
from lakejoin.spec.registry import KINDS
from lakejoin.views import fanout
from lakejoin.views.base import ViewKindLogic

pytestmark = pytest.mark.unit


def reported_metrics(module: object) -> set[str]:
    """The metric names a module's code reports, read with `ast`: the keys it writes into a
    `counts` or `metrics` dict (literal keys; `shuffled.<dimension>` is built per dimension), and
    the fan-out figures when it calls `fans_out`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(inspect.getsource(module))):  # type: ignore[arg-type]
        if isinstance(node, ast.Assign) and any(_is_counts(t) for t in node.targets):
            if isinstance(node.value, ast.Dict):
                names |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
            for target in node.targets:
                if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
                    names.add(target.slice.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "update" and _is_counts(node.func.value):
                names |= {k.arg for k in node.keywords if k.arg}
        if isinstance(node, ast.Name) and node.id == "fans_out" and module is not fanout:
            names |= reported_metrics(fanout)
    return names


def _is_counts(node: ast.expr) -> bool:
    if isinstance(node, ast.Subscript):
        node = node.value
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name in ("counts", "metrics")


def test_every_view_kind_has_an_entry():
    assert set(KINDS) == set(ViewKind)


@pytest.mark.parametrize("kind", list(ViewKind), ids=lambda k: k.value)
def test_a_kinds_logic_path_names_a_view_kind_logic(kind):
    logic = kind_logic(kind)

    assert issubclass(logic, ViewKindLogic) and logic is not ViewKindLogic
    assert not inspect.isabstract(logic)


def test_a_logic_path_that_names_no_view_kind_logic_says_where_to_fix_it(monkeypatch):
    wrong = replace(KINDS[ViewKind.REKEY], logic="lakejoin.views.rekey:conflicts")
    monkeypatch.setitem(KINDS, ViewKind.REKEY, wrong)

    with pytest.raises(TypeError, match=r"'lakejoin.views.rekey:conflicts' is not a ViewKindLogic.*registry"):
        kind_logic(ViewKind.REKEY)


@pytest.mark.parametrize("kind", list(ViewKind), ids=lambda k: k.value)
def test_a_kinds_labels_cover_the_metrics_its_logic_reports(kind):
    reported = reported_metrics(inspect.getmodule(kind_logic(kind)))
    unlabelled = reported - set(KINDS[kind].labels)

    assert reported, f"found no metric of {kind.value}: the scan no longer reads its code"
    assert not unlabelled, f"{kind.value} reports {sorted(unlabelled)}: label them in spec/registry.py"


def test_the_scan_finds_the_metrics_the_kinds_are_known_to_report():
    def reported(kind: ViewKind) -> set[str]:
        return reported_metrics(inspect.getmodule(kind_logic(kind)))

    assert reported(ViewKind.REKEY) == {"conflicts", "null_keys_dropped"}
    assert reported(ViewKind.LIST_JOIN) >= {"composite_rows_rebuilt", "left_rows_carried", "full_recompute"}
    assert reported(ViewKind.FK_JOIN) == {"fanout_facts", "fanout_permille", "full_recompute"}


def test_kinds_that_share_a_metric_label_it_alike():
    # The command line's summary does not know a view's kind: it labels by the union of all kinds'.
    labels: dict[str, set[str]] = {}
    for kind in KINDS.values():
        for name, label in kind.labels.items():
            labels.setdefault(name, set()).add(label)

    assert {name: found for name, found in labels.items() if len(found) > 1} == {}
