"""The view-kind registry (spec/registry.py, issue 25) lists every kind's parts, and they fit:
its logic path names a ViewKindLogic, and its labels cover every metric its logic reports; and
each kind's declarations (spec/kinds/<kind>.py, issue 53) agree with the code that acts on them:
the health flags and counts its logic writes, its fan-out rule, its checks, its settings, its
output key wherever it is read, and the health table of the guide (docs/join-health.md). No JVM:
the kinds' modules are imported, never run."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from dataclasses import replace
from pathlib import Path
from typing import get_type_hints

import pytest

from lakejoin.engine.kinds import kind_logic
from lakejoin.spec.definition import KEY_FIELDS, PERFORMANCE, output_key
from lakejoin.spec.kind_parts import FANOUT_LABELS, FANOUT_SETTINGS
from lakejoin.spec.model import ViewKind
from lakejoin.spec.registry import KINDS
from lakejoin.views import fanout
from lakejoin.views.base import ViewKindLogic
from tests.unit.shop import shop

pytestmark = pytest.mark.unit


def reported_metrics(module: object) -> set[str]:
    """The metric names a module's code reports, read with `ast`: the keys it writes into a
    `counts` or `metrics` dict (literal keys; `shuffled.<dimension>` is built per dimension), and
    the fan-out figures when it declares a fan-out rule (`FanOutRule`, which the base applies)."""
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
        if isinstance(node, ast.Name) and node.id in FAN_OUT_RULE and module is not fanout:
            names |= reported_metrics(fanout)
    return names


# The fan-out rule (views/fanout.py): a kind that declares one applies it.
FAN_OUT_RULE = ("FanOutRule",)


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


# --- Each kind's declarations and the code that acts on them agree (issue 53) ----------------


def _calls(module: object, name: str) -> list[ast.Call]:
    """The calls of `name` (a function, or a class) in a module's code."""
    return [
        node
        for node in ast.walk(ast.parse(inspect.getsource(module)))  # type: ignore[arg-type]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
    ]


def _first_texts(calls: list[ast.Call]) -> set[str]:
    return {c.args[0].value for c in calls if c.args and isinstance(c.args[0], ast.Constant)}


def _logic_module(kind: ViewKind) -> object:
    return inspect.getmodule(kind_logic(kind))


@pytest.mark.parametrize("kind", list(ViewKind), ids=lambda k: k.value)
def test_the_health_flags_a_kinds_logic_writes_are_its_flagged_measures(kind):
    flagged = {m.name for m in KINDS[kind].measures if m.flagged}

    assert _first_texts(_calls(_logic_module(kind), "flag")) == flagged


@pytest.mark.parametrize("kind", list(ViewKind), ids=lambda k: k.value)
def test_a_kinds_measures_are_linked_as_its_logic_counts_them(kind):
    declared = KINDS[kind]
    names = [m.name for m in declared.measures]
    counted_whole = set()  # `Gathered(health_counts={...})`: counted by a full recompute, not flagged
    for call in [*_calls(_logic_module(kind), "Rebuilt"), *_calls(_logic_module(kind), "Gathered")]:
        for keyword in call.keywords:
            if keyword.arg == "health_counts":
                counted_whole |= {
                    k.value for n in ast.walk(keyword.value) if isinstance(n, ast.Dict) for k in n.keys if k
                }

    assert len(names) == len(set(names)) and "waiting" not in names
    assert declared.waits is None or declared.waits in {m.name for m in declared.measures if m.flagged}
    assert counted_whole <= {m.name for m in declared.measures if m.from_changes and not m.flagged}
    assert all(m.flagged or m.from_changes for m in declared.measures), "a measure nothing counts"


@pytest.mark.parametrize("kind", list(ViewKind), ids=lambda k: k.value)
def test_a_kind_has_the_fan_out_settings_and_labels_when_its_logic_applies_the_fan_out_rule(kind):
    declared = KINDS[kind]
    fans_out = kind_logic(kind).fanout is not ViewKindLogic.fanout
    settings = get_type_hints(declared.parse)["return"]
    fields = {f.name for f in dataclasses.fields(settings)}

    assert fans_out == (FANOUT_SETTINGS <= declared.performance)
    assert fans_out == (set(FANOUT_LABELS) <= set(declared.labels))
    assert fans_out == (FANOUT_SETTINGS <= fields)


@pytest.mark.parametrize("kind", list(ViewKind), ids=lambda k: k.value)
def test_a_kinds_performance_and_key_settings_are_settings_of_its_definition(kind):
    declared = KINDS[kind]
    settings = get_type_hints(declared.parse)["return"]
    nested = [get_type_hints(settings)[f.name] for f in dataclasses.fields(settings)]
    fields = {f.name for c in (settings, *_dataclasses_in(nested)) for f in dataclasses.fields(c)}

    assert declared.performance <= fields
    assert declared.key_fields <= fields


def _dataclasses_in(types: list[object]) -> list[type]:
    """The dataclasses among `types`, and inside `tuple[X, ...]` (enrich's dimensions)."""
    found = [t for t in types if dataclasses.is_dataclass(t)]
    for t in types:
        found += [a for a in getattr(t, "__args__", ()) if dataclasses.is_dataclass(a)]
    return found  # type: ignore[return-value]


def test_the_settings_left_out_of_a_definition_and_those_holding_keys_are_the_kinds():
    assert frozenset().union(*(k.performance for k in KINDS.values())) == PERFORMANCE
    assert PERFORMANCE == {"fanout_threshold", "fanout_min_rows", "broadcast_limit_mb"}
    assert KEY_FIELDS == {"fk", "key"}


@pytest.mark.parametrize("kind", list(ViewKind), ids=lambda k: k.value)
def test_the_checks_a_kinds_logic_runs_are_the_ones_it_declares(kind):
    run = _first_texts(_calls(_logic_module(kind), "Validation"))

    assert run == set(KINDS[kind].validations)


@pytest.mark.parametrize("name", list(shop().views))
def test_a_views_output_key_is_the_same_wherever_it_is_read(name):
    spec = shop()
    view = spec.views[name]
    logic = kind_logic(view.kind)(spec, view)

    assert list(logic.output_key) == output_key(spec, view)
    if name in spec.sources:  # read by another view, keyed by its output key (spec/parse.py)
        assert list(spec.sources[name].key) == output_key(spec, view)
    for measure, (source, columns) in logic.health_changes.items():
        assert source in view.inputs and columns, measure
    assert bool(logic.state_tables("s")) == (KINDS[view.kind].state is not None)


def test_the_guide_health_table_names_each_kinds_measures_and_its_waiting_one():
    page = (Path(__file__).resolve().parents[2] / "docs" / "join-health.md").read_text()
    section = "| kind |" + page.split("\n| kind |", 1)[1].split("\n\n", 1)[0]
    rows = [
        line.split("|")[1:4] for line in section.splitlines() if line.startswith("| ") and "---" not in line
    ]
    table = {kind.strip(): (measures, waiting) for kind, measures, waiting in rows[1:]}

    assert set(table) == {kind.value for kind in ViewKind}
    for kind, (measures, waiting) in table.items():
        declared = KINDS[ViewKind(kind)]
        named = {part.split("`")[1] for part in measures.split(";")}
        assert named == {m.name for m in declared.measures}, kind
        assert waiting.split("`")[1] == declared.waits, kind


# The names that tie code to one kind: its `ViewKind` member, its definition and logic classes,
# and the view's accessor of its definition (`view.fk_join`).
NAMES = {
    ViewKind.FK_JOIN: ("FkJoin", "FkJoinView"),
    ViewKind.LIST_JOIN: ("ListJoin", "ListJoinView"),
    ViewKind.REKEY: ("Rekey", "RekeyView"),
    ViewKind.ENRICH: ("Enrich", "EnrichView"),
}
PACKAGE = Path(__file__).resolve().parents[2] / "spark_jobs" / "lakejoin"


def files_naming(kind: ViewKind) -> set[str]:
    """The package's files that name `kind` (read with `ast`): those a new kind must touch."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            named = (
                (isinstance(node, ast.Name) and node.id in NAMES[kind])
                or (isinstance(node, ast.alias) and node.name in NAMES[kind])
                or (isinstance(node, ast.Attribute) and node.attr == kind.value)
                or (
                    isinstance(node, ast.Attribute)
                    and node.attr == kind.name
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "ViewKind"
                )
            )
            if named:
                found.add(path.relative_to(PACKAGE).as_posix())
                break
    return found


PLACES = (
    "spec/model.py",
    "spec/kinds/<kind>.py",
    "spec/registry.py",
    "views/<kind>.py",
)


@pytest.mark.parametrize("kind", list(ViewKind), ids=lambda k: k.value)
def test_a_kind_is_named_in_the_places_the_code_map_lists_and_nowhere_else(kind):
    expected = {place.replace("<kind>", kind.value) for place in PLACES}
    code_map = (PACKAGE.parents[1] / "docs" / "code.md").read_text()
    adding = code_map.split("A new view kind is:", 1)[1].split("\n\n", 1)[0]

    assert files_naming(kind) == expected
    assert all(f"`{place}`" in adding for place in PLACES), "docs/code.md's list of places differs"
