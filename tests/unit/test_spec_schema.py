"""The spec's JSON Schema (spec/json_schema.py, issue 54) and the parser agree: every spec in the
repository parses and validates, and each bad spec of a table, and each one made by breaking a
declared setting (spec/settings.py), is refused by both: `load_spec` raises SpecError, the
schema finds an error. The committed file is the generated one, and `lakejoin schema` prints it.
No JVM."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from lakejoin.cli.main import main
from lakejoin.errors import SpecError
from lakejoin.spec.json_schema import FILE, pipeline_schema, schema_text
from lakejoin.spec.kinds.enrich import DIMENSION
from lakejoin.spec.model import ViewKind
from lakejoin.spec.parse import load_spec, parse_spec
from lakejoin.spec.registry import KINDS
from lakejoin.spec.sections import PIPELINE, SOURCE, SPARK, VIEW
from lakejoin.spec.settings import Setting, Settings, Shape
from lakejoin.spec.trust import AGE_LIMIT, AMOUNT_LIMIT, AUDIT
from tests.spec_texts import GOOD, LIST_AND_REKEY
from tests.unit.shop import SHOP

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
EDITOR_LINE = "# yaml-language-server: $schema=../spark_jobs/lakejoin/spec/pipeline.schema.json"
VALIDATOR = jsonschema.Draft202012Validator(pipeline_schema())

# Every setting of every section, set (SUBMIT and LOCAL differ where settings exclude each other).
SUBMIT: dict[str, Any] = {
    "pipeline": "shop",
    "schedule": "@hourly",
    "storage": "./store",
    "spark": {"run": "submit", "conn_id": "cluster"},
    "sources": {
        "orders": {"path": "./orders", "key": "order_id"},
        "customers": {"path": "./customers", "key": ["tenant_id", "customer_id"]},
        "persons": {"path": "./persons", "key": "person_id"},
        "addresses": {"path": "./addresses", "key": "address_id"},
    },
    "views": {
        "orders_customers": {
            "fk_join": {
                "left": "orders",
                "right": "customers",
                "fk": ["tenant_id", "customer_id"],
                "how": "left",
                "right_columns": ["name"],
                "right_prefix": "customer_",
                "fanout_threshold": 0.3,
                "fanout_min_rows": 10,
            },
            "path": "./out/orders_customers",
            "on_definition_change": "fail",
            "on_input_replaced": "fail",
            "health": {
                "missing_right": {"max_share": 0.01, "max_rows": 100, "on_breach": "fail"},
                "waiting": {"max_batches": 3, "max_hours": 24, "on_breach": "warn"},
            },
            "audit": {"slices": 32, "budget": 0.2},
        },
        "person_addresses": {
            "list_join": {
                "left": "persons",
                "list": "address_ids",
                "right": "addresses",
                "into": "addresses",
                "duplicates": "drop",
                "right_columns": ["city"],
                "fanout_threshold": 1,
                "fanout_min_rows": 0,
            },
            "health": {"lists_with_missing": {"max_rows": 0}},
            "audit": {"every": 5},
        },
        "customers_by_name": {
            "rekey": {
                "source": "customers",
                "key": "name",
                "columns": ["country"],
                "unique": True,
                "on_conflict": "latest",
            },
            "health": {"conflicts": {"max_share": 0}},
            "audit": "off",
        },
        "enriched_orders": {
            "enrich": {
                "fact": "orders",
                "mode": "propagate",
                "dimensions": [
                    {
                        "table": "customers",
                        "fk": ["tenant_id", "customer_id"],
                        "how": "inner",
                        "prefix": "customer_",
                        "columns": ["name"],
                    },
                    {"table": "persons", "fk": "person_id"},
                ],
                "fanout_threshold": 0.5,
                "fanout_min_rows": 0,
                "broadcast_limit_mb": 128,
            },
            "health": {"missing_dimension": {"max_share": 0.5}},
            "audit": False,
        },
    },
}
LOCAL = {**SUBMIT, "spark": {"run": "local", "master": "local[2]", "remote": "sc://localhost:15002"}}
SPECS = {"submit": SUBMIT, "local": LOCAL}

# Where each section sits in SUBMIT or LOCAL: (spec, path to the section, its settings).
KIND_VIEWS = {
    ViewKind.FK_JOIN: "orders_customers",
    ViewKind.LIST_JOIN: "person_addresses",
    ViewKind.REKEY: "customers_by_name",
    ViewKind.ENRICH: "enriched_orders",
}
SECTIONS: list[tuple[str, tuple[str | int, ...], Settings]] = [
    ("submit", (), PIPELINE),
    ("submit", ("spark",), SPARK),
    ("local", ("spark",), SPARK),
    ("submit", ("sources", "orders"), SOURCE),
    ("submit", ("views", "orders_customers"), VIEW),
    *(("submit", ("views", view, kind.value), KINDS[kind].settings) for kind, view in KIND_VIEWS.items()),
    ("submit", ("views", "enriched_orders", "enrich", "dimensions", 0), DIMENSION),
    ("submit", ("views", "orders_customers", "audit"), AUDIT),
    ("submit", ("views", "person_addresses", "audit"), AUDIT),
    ("submit", ("views", "orders_customers", "health", "missing_right"), AMOUNT_LIMIT),
    ("submit", ("views", "orders_customers", "health", "waiting"), AGE_LIMIT),
]


def parses(spec: Any, tmp_path: Path) -> SpecError | None:
    """The parser's error on `spec`, written to a file, or None when it parses."""
    file = tmp_path / "shop.yaml"
    file.write_text(yaml.safe_dump(spec, sort_keys=False))
    try:
        load_spec(file)
    except SpecError as exc:
        return exc
    return None


def schema_errors(spec: Any) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(spec)]


def assert_both_refuse(spec: Any, tmp_path: Path) -> None:
    error = parses(spec, tmp_path)
    assert error is not None, "the parser accepts it"
    assert schema_errors(spec), f"the schema accepts what the parser refuses: {error}"


def changed(spec: dict[str, Any], path: tuple[str | int, ...], change: Callable[[Any], None]) -> Any:
    """A copy of `spec` with `change` applied to the mapping at `path`."""
    spec = copy.deepcopy(spec)
    here: Any = spec
    for step in path:
        here = here[step]
    change(here)
    return spec


def at(path: str) -> tuple[str | int, ...]:
    return tuple(int(p) if p.isdigit() else p for p in path.split(".")) if path else ()


def setting(path: str, name: str, value: Any) -> Callable[[], Any]:
    return lambda: changed(SUBMIT, at(path), lambda m: m.__setitem__(name, value))


def removing(path: str, name: str) -> Callable[[], Any]:
    return lambda: changed(SUBMIT, at(path), lambda m: m.pop(name))


FK = "views.orders_customers.fk_join"
LIST = "views.person_addresses.list_join"
REKEY = "views.customers_by_name.rekey"
ENRICH = "views.enriched_orders.enrich"
HEALTH = "views.orders_customers.health"

# name -> the bad spec: what an editor should underline while it is typed.
BAD: dict[str, Callable[[], Any]] = {
    "unknown key at the top level": setting("", "schedul", "daily"),
    "unknown key in a source": setting("sources.orders", "keys", "order_id"),
    "unknown key in spark": setting("spark", "cluster", "x"),
    "unknown key beside a view's kind": setting("views.orders_customers", "paths", "./x"),
    "unknown key in an fk_join": setting(FK, "right_column", ["name"]),
    "unknown key in a list_join": setting(LIST, "lists", "address_ids"),
    "unknown key in a rekey": setting(REKEY, "keys", "name"),
    "unknown key in an enrich": setting(ENRICH, "dimension", []),
    "unknown key in a dimension": setting(f"{ENRICH}.dimensions.0", "table_name", "x"),
    "unknown key in a health limit": setting(f"{HEALTH}.missing_right", "max_count", 3),
    "unknown key in the audit": setting("views.orders_customers.audit", "slice", 3),
    "a list_join's key in an fk_join": setting(FK, "into", "customers"),
    "an fk_join's key in a rekey": setting(REKEY, "right_prefix", "x_"),
    "an enrich's key in a list_join": setting(LIST, "mode", "propagate"),
    "a rekey's key in an enrich": setting(ENRICH, "unique", False),
    "two kinds in one view": setting("views.customers_by_name", "fk_join", {"left": "a", "right": "b"}),
    "no kind in a view": removing("views.customers_by_name", "rekey"),
    "an unknown kind": lambda: changed(
        SUBMIT, at("views.customers_by_name"), lambda m: m.__setitem__("re_key", m.pop("rekey"))
    ),
    "another kind's health measure": setting(HEALTH, "conflicts", {"max_rows": 1}),
    "a limit with no bound": setting(HEALTH, "missing_right", {"on_breach": "fail"}),
    "wrong enum: how": setting(FK, "how", "outer"),
    "wrong enum: a dimension's how": setting(f"{ENRICH}.dimensions.0", "how", "right"),
    "wrong enum: duplicates": setting(LIST, "duplicates", "first"),
    "wrong enum: mode": setting(ENRICH, "mode", "push"),
    "wrong enum: on_conflict": setting(REKEY, "on_conflict", "newest"),
    "wrong enum: spark run": setting("spark", "run", "cluster"),
    "wrong enum: on_definition_change": setting("views.orders_customers", "on_definition_change", "ignore"),
    "wrong enum: on_input_replaced": setting("views.orders_customers", "on_input_replaced", "ignore"),
    "wrong enum: on_breach": setting(f"{HEALTH}.missing_right", "on_breach", "stop"),
    "fanout_threshold above 1": setting(FK, "fanout_threshold", 1.5),
    "fanout_threshold below 0": setting(LIST, "fanout_threshold", -0.1),
    "fanout_min_rows below 0": setting(FK, "fanout_min_rows", -1),
    "broadcast_limit_mb above its most": setting(ENRICH, "broadcast_limit_mb", 10000),
    "max_share above 1": setting(f"{HEALTH}.missing_right", "max_share", 2),
    "audit budget of 0": setting("views.orders_customers.audit", "budget", 0),
    "audit slices of 0": setting("views.orders_customers.audit", "slices", 0),
    "audit every and budget": setting("views.orders_customers.audit", "every", 3),
    "conn_id with run: local": setting("spark", "run", "local"),
    "on_conflict of a rekey that is not unique": setting(REKEY, "unique", False),
    "fan-out settings of a lookup enrich": setting(ENRICH, "mode", "lookup"),
    "missing pipeline": removing("", "pipeline"),
    "missing storage": removing("", "storage"),
    "missing sources": removing("", "sources"),
    "missing views": removing("", "views"),
    "missing a source's key": removing("sources.orders", "key"),
    "missing an fk": removing(FK, "fk"),
    "missing a list_join's into": removing(LIST, "into"),
    "missing a rekey's source": removing(REKEY, "source"),
    "missing an enrich's dimensions": removing(ENRICH, "dimensions"),
    "no sources": setting("", "sources", {}),
    "no dimensions": setting(ENRICH, "dimensions", []),
    "wrong type: a key of numbers": setting("sources.orders", "key", [1, 2]),
    "wrong type: a key listed twice": setting("sources.orders", "key", ["order_id", "order_id"]),
    "wrong type: an empty key": setting("sources.orders", "key", []),
    "wrong type: a name with a space": setting(FK, "left", "my orders"),
    "wrong type: a view name with a dash": setting(
        "views", "orders-customers", SUBMIT["views"]["orders_customers"]
    ),
    "wrong type: right_columns as text": setting(FK, "right_columns", "name"),
    "wrong type: unique as text": setting(REKEY, "unique", "yes"),
    "wrong type: fanout_threshold as text": setting(FK, "fanout_threshold", "high"),
    "wrong type: fanout_min_rows a fraction": setting(FK, "fanout_min_rows", 2.5),
    "wrong type: a source as a list": setting("sources", "orders", ["./orders", "order_id"]),
    "wrong type: spark as a list": setting("", "spark", ["local"]),
    "wrong type: audit on": setting("views.orders_customers", "audit", "on"),
    "wrong type: a prefix with a dash": setting(FK, "right_prefix", "customer-"),
    "wrong type: the schedule true": setting("", "schedule", True),
}


@pytest.mark.parametrize("name", list(SPECS))
def test_the_specs_that_set_every_setting_parse_and_validate(name, tmp_path):
    assert parses(SPECS[name], tmp_path) is None
    assert schema_errors(SPECS[name]) == []


def _settings_in(settings: Settings) -> Iterator[tuple[Settings, Setting]]:
    for s in settings:
        yield settings, s
        if s.of is not None:
            yield from _settings_in(s.of)
    if settings is VIEW:
        for declared in KINDS.values():
            yield from _settings_in(declared.settings)


def test_those_specs_set_every_declared_setting():
    """So the tables below break every setting: a new setting must be added to SUBMIT or LOCAL."""
    placed = {id(section) for _, _, section in SECTIONS}
    for section, declared in _settings_in(PIPELINE):
        assert id(section) in placed, f"no entry of SECTIONS is a section holding '{declared.name}'"
        assert any(declared.name in _section(spec, path) for spec, path, s in SECTIONS if s is section), (
            f"'{declared.name}' is set in no spec"
        )
    for limit in (AMOUNT_LIMIT, AGE_LIMIT):
        assert {s.name for s in limit} <= {
            n for _, p, s in SECTIONS if s is limit for n in _section("submit", p)
        }


def _section(spec: str, path: tuple[str | int, ...]) -> Any:
    here: Any = SPECS[spec]
    for step in path:
        here = here[step]
    return here


@pytest.mark.parametrize("case", list(BAD))
def test_the_parser_and_the_schema_refuse_a_bad_spec(case, tmp_path):
    assert_both_refuse(BAD[case](), tmp_path)


def broken() -> dict[str, Any]:
    """Each declared setting broken in each way its declaration allows: left out when required,
    an unknown key beside it, a value outside its choices or bounds or of the wrong type, set
    where its `only_with` does not hold, set with the one it `excludes`, a limit without its
    bounds."""
    cases: dict[str, Any] = {}
    for spec, path, section in SECTIONS:
        where = ".".join(map(str, path)) or "top level"
        base = SPECS[spec]
        cases[f"{where}: unknown key"] = changed(base, path, lambda m: m.__setitem__("typo_d", 1))
        present = _section(spec, path)
        for s in section:
            if s.name not in present:
                continue
            name = s.name
            if s.required:
                cases[f"{where}: no {name}"] = changed(base, path, lambda m, n=name: m.pop(n))
            for label, value in _bad_values(s):
                cases[f"{where}.{name}: {label}"] = changed(
                    base, path, lambda m, n=name, v=value: m.__setitem__(n, v)
                )
            if s.only_with:
                other, needed = s.only_with
                flipped = _other_value(section[other], needed)
                cases[f"{where}.{name}: with {other} {flipped}"] = changed(
                    base, path, lambda m, o=other, v=flipped: m.__setitem__(o, v)
                )
            if s.excludes:
                value = present.get(s.excludes, section[s.excludes].default)
                cases[f"{where}.{name}: with {s.excludes}"] = changed(
                    base, path, lambda m, o=s.excludes, v=value: m.__setitem__(o, v)
                )
        if section.one_of:
            cases[f"{where}: no bound"] = changed(
                base, path, lambda m, bounds=section.one_of: [m.pop(b, None) for b in bounds]
            )
    return cases


def unset() -> dict[str, Any]:
    """Each optional setting left out (with the settings that apply only with it): both accept."""
    cases: dict[str, Any] = {}
    for spec, path, section in SECTIONS:
        present = _section(spec, path)
        for s in section:
            if s.required or s.name not in present:
                continue
            gone = {s.name} | {t.name for t in section if t.only_with and t.only_with[0] == s.name}
            where = ".".join(map(str, path)) or "top level"
            cases[f"{where}: no {s.name}"] = changed(
                SPECS[spec], path, lambda m, names=gone: [m.pop(n, None) for n in names]
            )
    return cases


UNSET = unset()


@pytest.mark.parametrize("case", list(UNSET))
def test_the_parser_and_the_schema_accept_each_optional_setting_left_out(case, tmp_path):
    assert parses(UNSET[case], tmp_path) is None
    assert schema_errors(UNSET[case]) == []


def _bad_values(s: Setting) -> list[tuple[str, Any]]:
    if s.shape is Shape.CHOICE:
        return [("not a choice", "nonsense"), ("a list", ["x"])]
    if s.shape in (Shape.NUMBER, Shape.WHOLE):
        bad = [("text", "many"), ("true", True)]
        if s.least is not None:
            bad.append(("below its least", s.least - 1))
        if s.above is not None:
            bad.append(("at the value it must be above", s.above))
        if s.most is not None:
            bad.append(("above its most", s.most + 1))
        return bad
    if s.shape in (Shape.NAME, Shape.KEY, Shape.COLUMNS):
        return [("not a name", "a b" if s.shape is not Shape.COLUMNS else ["a b"]), ("a mapping", {"a": 1})]
    if s.shape is Shape.FLAG:
        return [("text", "yes")]
    if s.shape in (Shape.TEXT, Shape.PREFIX):
        return [("a list", ["x"])]
    return [("a number", 5)]  # a section, a list or a map of sections


def _other_value(s: Setting, value: Any) -> Any:
    if s.shape is Shape.FLAG:
        return not value
    assert s.choices is not None
    return next(c.value for c in s.choices if c.value != value)


BROKEN = broken()


@pytest.mark.parametrize("case", list(BROKEN))
def test_the_parser_and_the_schema_refuse_each_declared_setting_broken(case, tmp_path):
    assert_both_refuse(BROKEN[case], tmp_path)


def _repository_specs() -> list[Path]:
    candidates = [*ROOT.glob("pipelines/*.y*ml"), *ROOT.glob("tests/**/*.y*ml")]
    return sorted(p for p in candidates if "\nviews:" in p.read_text())


INLINE = {
    "tests/spec_texts.GOOD": GOOD,
    "tests/spec_texts.LIST_AND_REKEY": LIST_AND_REKEY.format(
        store="./s", persons="./p", addresses="./a", merchants="./m", list="address_ids", rekey="display_name"
    ),
    "tests/unit/shop.SHOP": SHOP,
}


@pytest.mark.parametrize("path", _repository_specs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_spec_file_in_the_repository_parses_and_validates(path):
    load_spec(path)
    assert schema_errors(yaml.safe_load(path.read_text())) == []


@pytest.mark.parametrize("name", list(INLINE))
def test_the_specs_the_tests_share_parse_and_validate(name):
    parse_spec(INLINE[name], "/lake/shop.yaml")
    assert schema_errors(yaml.safe_load(INLINE[name])) == []


def test_the_example_pipelines_name_the_schema_for_an_editor():
    for path in ROOT.glob("pipelines/*.y*ml"):
        first = path.read_text().splitlines()[0]
        assert first == EDITOR_LINE, f"{path.name}: its first line should be {EDITOR_LINE}"
        assert (path.parent / first.split("$schema=", 1)[1]).resolve() == FILE


def test_the_committed_schema_is_the_generated_one():
    assert FILE.read_text(encoding="utf-8") == schema_text(), (
        f"{FILE.name} is not what the settings declare: run `python -m lakejoin.spec.json_schema`"
    )


def test_the_schema_is_a_schema_of_draft_2020_12_and_of_draft_7():
    """Draft 7 as well: editors' YAML support validates with it."""
    jsonschema.Draft202012Validator.check_schema(pipeline_schema())
    jsonschema.Draft7Validator.check_schema(pipeline_schema())
    assert "$ref" not in schema_text()


def test_every_property_says_what_it_is_for():
    def walk(node: Any, where: str) -> Iterator[str]:
        if isinstance(node, dict):
            for name, child in node.get("properties", {}).items():
                if "description" not in child and where.rsplit(".", 1)[-1] != "then":
                    yield f"{where}.{name}"
            for key, child in node.items():
                yield from walk(child, f"{where}.{key}")
        elif isinstance(node, list):
            for i, child in enumerate(node):
                yield from walk(child, f"{where}[{i}]")

    assert list(walk(pipeline_schema(), "")) == []


def test_lakejoin_schema_prints_it_without_a_spec(capsys):
    assert main(["schema"]) == 0
    printed = capsys.readouterr().out
    assert printed == FILE.read_text(encoding="utf-8")
    assert json.loads(printed)["title"] == "lakejoin pipeline spec"
