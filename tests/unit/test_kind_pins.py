"""Each view kind's declarations as literals, taken from the code before issue 53 gathered
them into one registry entry per kind: the health measures (their order is the error text and
the flagged keys table's columns), the state tables, the output key, the columns listed per
input, the setting that names each input, and the definition fingerprint of every view of
tests/unit/shop.py (so no upgrade refreshes a view). No JVM."""

from __future__ import annotations

import pytest

from lakejoin.engine.kinds import kind_logic
from lakejoin.spec.definition import fingerprint, listed_columns, output_key, view_definition
from lakejoin.spec.model import PipelineSpec, ViewKind
from lakejoin.spec.parse import parse_spec
from lakejoin.spec.registry import KINDS
from lakejoin.spec.schema_checks import _setting
from tests.unit.shop import SHOP
from tests.unit.test_view_kinds import SCHEMAS

pytestmark = pytest.mark.unit


def spec() -> PipelineSpec:
    return parse_spec(SHOP, "/lake/shop.yaml")


# The words `health:` limits accept per kind, in the order the error text lists them.
MEASURES = {
    ViewKind.FK_JOIN: {
        "missing_right": "left rows whose fk finds no right row (null-filled, or held back by an inner join)",
        "null_fk": "left rows whose fk holds a null",
        "waiting": "the oldest left row still without its right row",
    },
    ViewKind.LIST_JOIN: {
        "missing_elements": "list elements without a right row",
        "lists_with_missing": "left rows whose list has an element without a right row",
        "waiting": "the oldest list still waiting for an element's right row",
    },
    ViewKind.REKEY: {
        "null_keys": "master rows dropped for a null derived key",
        "conflicts": "derived keys claimed by more than one master",
        "waiting": "the oldest conflict not yet resolved",
    },
    ViewKind.ENRICH: {
        "missing_dimension": "facts whose row of some dimension is missing",
        "waiting": "the oldest fact still without a dimension row",
    },
}

# Per view: health_measures, health_changes, health_kept, waits, state_tables("S"), output_key,
# change_sources.
HEALTH = {
    "display_products": (
        ("missing_right", "null_fk"),
        {"null_fk": ("products", ("merchant_id",))},
        ("missing_right",),
        "missing_right",
        {},
        ("product_id",),
        ("products", "merchants"),
    ),
    "person_addresses": (
        ("missing_elements", "lists_with_missing"),
        {},
        ("missing_elements", "lists_with_missing"),
        "lists_with_missing",
        {},
        ("person_id",),
        ("persons", "addresses"),
    ),
    "merchants_by_name": (
        ("conflicts",),
        {"null_keys": ("merchants", ("display_name",))},
        ("conflicts",),
        "conflicts",
        {"_routing": "S"},
        ("display_name",),
        ("merchants",),
    ),
    "merchants_named": (
        ("conflicts",),
        {"null_keys": ("merchants", ("display_name",))},
        ("conflicts",),
        "conflicts",
        {"_routing": "S"},
        ("display_name", "merchant_id"),
        ("merchants",),
    ),
    "looked_up": (
        ("missing_dimension",),
        {},
        ("missing_dimension",),
        "missing_dimension",
        {},
        ("purchase_id",),
        ("purchases",),
    ),
    "propagated": (
        ("missing_dimension",),
        {},
        ("missing_dimension",),
        "missing_dimension",
        {},
        ("purchase_id",),
        ("purchases", "customers"),
    ),
}

HEALTH["logos"] = HEALTH["display_products"]

FINGERPRINTS = {
    "display_products": "1:55bff8364bf4df1a.c735071baf93dbd4",
    "logos": "1:b7fba4c6625a66ee.7ba778cf47b0ba94",
    "person_addresses": "1:1a0a91b9df605e51.064528d5d74005bf",
    "merchants_by_name": "1:aae346ca7a9b235f.5e0fb9b7ce0bb103",
    "merchants_named": "1:e4faf7cb931ca1c6.a370d0378a4c4489",
    "looked_up": "1:ababd1fc0f80300c.b798505012b2fa07",
    "propagated": "1:aae871e65800fd3f.5c4338cfe8c33253",
}

# Per view: its inputs, each with the columns the spec lists (None: all) and the settings that
# name it and list its columns.
INPUTS = {
    "display_products": {"products": (None, ("left", None)), "merchants": (None, ("right", "right_columns"))},
    "logos": {"products": (None, ("left", None)), "merchants": (("logo",), ("right", "right_columns"))},
    "person_addresses": {"persons": (None, ("left", None)), "addresses": (None, ("right", "right_columns"))},
    "merchants_by_name": {
        "merchants": (("display_name", "country", "display_name", "merchant_id"), ("source", "columns"))
    },
    "merchants_named": {"merchants": (None, ("source", "columns"))},
    "looked_up": {
        "purchases": (None, ("fact", None)),
        "customers": (None, ("dimensions[0]", "dimensions[0].columns")),
        "display_products": (("title",), ("dimensions[1]", "dimensions[1].columns")),
    },
    "propagated": {
        "purchases": (None, ("fact", None)),
        "customers": (None, ("dimensions[0]", "dimensions[0].columns")),
    },
}


def test_each_kinds_health_measures_are_as_they_were():
    today = {kind: KINDS[kind].limits() for kind in ViewKind}  # was spec/trust.MEASURES

    assert today == MEASURES
    assert [list(today[kind]) for kind in ViewKind] == [list(MEASURES[kind]) for kind in ViewKind]


@pytest.mark.parametrize("name", list(HEALTH))
def test_each_views_health_state_and_output_key_are_as_they_were(name):
    shop = spec()
    view = shop.views[name]
    kind = kind_logic(view.kind)(shop, view)
    measures, changes, kept, waits, state, key, change_sources = HEALTH[name]

    assert kind.health_measures == measures
    assert dict(kind.health_changes) == changes
    assert kind.health_kept == kept
    assert kind.waits == waits
    assert kind.state_tables("S") == state
    assert tuple(kind.output_key) == key
    assert list(output_key(shop, view)) == list(key)
    if name in shop.sources:  # read by another view: keyed by its output key
        assert shop.sources[name].key == key
    assert tuple(s.name for s in kind.change_sources) == change_sources
    if state:  # named in messages only when the view has a state table
        assert kind.state_name == "rekey index"


@pytest.mark.parametrize("name", list(FINGERPRINTS))
def test_each_views_definition_fingerprint_is_as_it_was(name):
    shop = spec()

    assert fingerprint(view_definition(shop, shop.views[name], SCHEMAS)) == FINGERPRINTS[name]


@pytest.mark.parametrize("name", list(INPUTS))
def test_each_views_inputs_listed_columns_and_settings_are_as_they_were(name):
    view = spec().views[name]
    inputs = INPUTS[name]

    assert view.inputs == tuple(inputs)
    assert listed_columns(view) == {source: listed for source, (listed, _) in inputs.items()}
    assert {source: _setting(view, source) for source in view.inputs} == {
        source: setting for source, (_, setting) in inputs.items()
    }


def test_an_fk_join_of_a_table_with_itself_lists_it_twice_and_takes_it_whole():
    text = SHOP.replace(
        "  logos:\n", "  parents:\n    fk_join: {left: products, right: products, fk: title}\n  logos:\n"
    )
    view = parse_spec(text, "/lake/shop.yaml").views["parents"]

    assert view.inputs == ("products", "products")
    assert listed_columns(view) == {"products": None}
    assert _setting(view, "products") == ("left", None)
