"""spec/definition.py as truth tables: which edits of a spec change a view's definition (the next
batch then refreshes in full, or stops), which do not, and how a change is named. No JVM."""

from __future__ import annotations

import pytest

from lakejoin.spec.definition import comparable, differences, fingerprint, view_definition
from lakejoin.spec.parse import parse_spec

pytestmark = pytest.mark.unit

BASE = """\
pipeline: shop
schedule: "*/10 * * * *"
storage: ./store
sources:
  products:  {path: ./store/products,  key: product_id}
  merchants: {path: ./store/merchants, key: merchant_id}
  persons:   {path: ./store/persons,   key: person_id}
  addresses: {path: ./store/addresses, key: address_id}
  purchases: {path: ./store/purchases, key: purchase_id}
views:
  display_products:
    fk_join: {left: products, right: merchants, fk: merchant_id, how: left,
              right_columns: [display_name], fanout_threshold: 0.2}
  person_addresses:
    list_join: {left: persons, list: address_ids, right: addresses, into: addresses, duplicates: drop}
  merchants_by_name:
    rekey: {source: merchants, key: display_name, on_conflict: latest}
  enriched:
    enrich:
      fact: purchases
      mode: propagate
      dimensions:
        - {table: persons, fk: person_id, prefix: buyer_, columns: [name]}
        - {table: display_products, fk: product_id, prefix: product_, how: inner}
"""

SCHEMAS = {
    "products": {"product_id": "string", "title": "string", "merchant_id": "string"},
    "merchants": {"merchant_id": "string", "display_name": "string", "photo_url": "string"},
    "persons": {"person_id": "string", "name": "string", "address_ids": "array<string>"},
    "addresses": {"address_id": "string", "street": "string", "city": "string"},
    "purchases": {"purchase_id": "string", "person_id": "string", "product_id": "string"},
    "display_products": {"product_id": "string", "title": "string", "display_name": "string"},
}


def definition(text: str, view: str, schemas: dict | None = None, file: str = "/lake/shop.yaml") -> dict:
    spec = parse_spec(text, file)
    return view_definition(spec, spec.views[view], SCHEMAS if schemas is None else schemas)


def edited(old: str, new: str, count: int = 1) -> str:
    assert BASE.count(old) >= 1, old
    return BASE.replace(old, new, count)


# (view, edit of the spec's text): none of these changes what the view computes.
SAME = [
    ("display_products", ("views:\n", "# the views\nviews:  # comments are not definitions\n")),
    (
        "display_products",
        (
            "{left: products, right: merchants, fk: merchant_id,",
            "{fk: merchant_id, right: merchants, left: products,",
        ),
    ),
    ("display_products", ('schedule: "*/10 * * * *"', 'schedule: "@daily"')),
    ("display_products", ("fanout_threshold: 0.2", "fanout_threshold: 0.9")),
    (
        "display_products",
        (
            "  person_addresses:",
            "  display_products_2:\n    rekey: {source: merchants, key: display_name}\n  person_addresses:",
        ),
    ),
    (
        "display_products",
        ("  persons:   {path: ./store/persons,", "  persons:   {path: ./elsewhere/persons,"),
    ),
    ("display_products", ("    fk_join: {left", "    on_definition_change: fail\n    fk_join: {left")),
    ("enriched", ("mode: propagate\n", "mode: propagate\n      broadcast_limit_mb: 512\n")),
    ("merchants_by_name", ("on_conflict: latest}", "on_conflict: latest}  # the newest wins")),
]


@pytest.mark.parametrize(("view", "edit"), SAME, ids=[
    "a_comment", "the_order_of_a_mappings_keys", "the_schedule", "a_fanout_threshold", "another_view",
    "a_source_the_view_does_not_read", "the_on_definition_change_policy", "a_broadcast_limit",
    "a_trailing_comment",
])  # fmt: skip
def test_an_edit_that_changes_no_row_keeps_the_definition(view, edit):
    assert definition(edited(*edit), view) == definition(BASE, view)


# (view, edit, the change as the plan names it)
CHANGED = [
    ("display_products", ("how: left", "how: inner"), "how: left -> inner"),
    ("display_products", ("fk: merchant_id,", "fk: seller_id,"), "fk: merchant_id -> seller_id"),
    (
        "display_products",
        ("right_columns: [display_name]", "right_columns: [display_name, photo_url]"),
        "right_columns: [display_name] -> [display_name, photo_url]",
    ),
    ("display_products", ("how: left,", "how: left, right_prefix: m_,"), "right_prefix:  -> m_"),
    (
        "display_products",
        ("merchants: {path: ./store/merchants,", "merchants: {path: ./store/merchants_v2,"),
        "inputs.merchants.path: merchants -> merchants_v2",
    ),
    (
        "display_products",
        ("path: ./store/merchants, key: merchant_id}", "path: ./store/merchants, key: merchant_code}"),
        "inputs.merchants.key: merchant_id -> merchant_code",
    ),
    ("person_addresses", ("duplicates: drop", "duplicates: keep"), "duplicates: drop -> keep"),
    (
        "person_addresses",
        ("list: address_ids", "list: old_address_ids"),
        "list: address_ids -> old_address_ids",
    ),
    ("person_addresses", ("into: addresses,", "into: places,"), "into: addresses -> places"),
    ("merchants_by_name", ("on_conflict: latest", "on_conflict: fail"), "on_conflict: latest -> fail"),
    (
        "merchants_by_name",
        ("key: display_name, on_conflict: latest", "key: display_name, unique: false"),
        "on_conflict: latest -> fail",
    ),
    ("merchants_by_name", ("key: display_name, on", "key: photo_url, on"), "key: display_name -> photo_url"),
    ("enriched", ("mode: propagate", "mode: lookup"), "mode: propagate -> lookup"),
    (
        "enriched",
        ("fk: person_id, prefix", "fk: payer_id, prefix"),
        "dimensions[0].fk: person_id -> payer_id",
    ),
    ("enriched", ("how: inner}", "how: left}"), "dimensions[1].how: inner -> left"),
    ("enriched", ("prefix: buyer_", "prefix: payer_"), "dimensions[0].prefix: buyer_ -> payer_"),
]


@pytest.mark.parametrize(("view", "edit", "named"), CHANGED, ids=[
    "fk_join_how", "fk_join_fk", "fk_join_right_columns", "fk_join_right_prefix", "a_sources_path",
    "a_sources_key", "list_join_duplicates", "list_join_list", "list_join_into", "rekey_on_conflict",
    "rekey_unique", "rekey_key", "enrich_mode", "a_dimensions_fk", "a_dimensions_how", "a_dimensions_prefix",
])  # fmt: skip
def test_an_edit_that_changes_rows_changes_the_definition_and_is_named(view, edit, named):
    old, new = definition(BASE, view), definition(edited(*edit), view)

    assert old != new and fingerprint(old) != fingerprint(new)
    assert named in differences(old, new)


def test_unique_false_is_named_as_such():
    old = definition(BASE, "merchants_by_name")
    new = definition(
        edited("key: display_name, on_conflict: latest", "key: display_name, unique: false"),
        "merchants_by_name",
    )

    assert "unique: True -> False" in differences(old, new)


# --- the columns a view takes ------------------------------------------------------------------


def with_column(table: str, column: str, kind: str = "string") -> dict:
    return {**SCHEMAS, table: {**SCHEMAS[table], column: kind}}


@pytest.mark.parametrize(
    ("view", "table", "named"),
    [
        ("display_products", "products", "products gained column 'zip' (string)"),  # the left: all columns
        ("person_addresses", "addresses", "addresses gained column 'zip' (string)"),  # no right_columns
        ("person_addresses", "persons", "persons gained column 'zip' (string)"),
        ("merchants_by_name", "merchants", "merchants gained column 'zip' (string)"),  # no columns
        ("enriched", "purchases", "purchases gained column 'zip' (string)"),  # the fact
        ("enriched", "display_products", "display_products gained column 'zip' (string)"),  # a dimension, all
    ],
)
def test_a_column_gained_by_an_input_the_view_takes_whole_changes_the_definition(view, table, named):
    old, new = definition(BASE, view), definition(BASE, view, with_column(table, "zip"))

    assert differences(old, new) == [named]
    assert differences(old, new, columns=False) == []  # the spec's own part did not change


@pytest.mark.parametrize(
    ("view", "table"),
    [("display_products", "merchants"), ("enriched", "persons"), ("display_products", "persons")],
    ids=["fk_join_lists_its_right_columns", "a_dimension_with_columns", "a_table_the_view_does_not_read"],
)
def test_a_column_gained_by_an_input_whose_columns_the_spec_lists_changes_nothing(view, table):
    assert definition(BASE, view, with_column(table, "zip")) == definition(BASE, view)


@pytest.mark.parametrize(
    ("table", "schemas", "named"),
    [
        ("merchants", {**SCHEMAS, "merchants": {"merchant_id": "string", "display_name": "int"}},
         "merchants.display_name string -> int"),
        ("merchants", {**SCHEMAS, "merchants": {"merchant_id": "string", "display_name": "string"}},
         "merchants lost column 'photo_url'"),
    ],
    ids=["a_retyped_column", "a_dropped_column"],
)  # fmt: skip
def test_a_retyped_or_dropped_column_is_named(table, schemas, named):
    assert named in differences(
        definition(BASE, "merchants_by_name"), definition(BASE, "merchants_by_name", schemas)
    )


def test_a_listed_column_retyped_changes_the_definition():
    schemas = {**SCHEMAS, "merchants": {**SCHEMAS["merchants"], "display_name": "int"}}

    assert differences(
        definition(BASE, "display_products"), definition(BASE, "display_products", schemas)
    ) == ["merchants.display_name string -> int"]


def test_a_lakehouse_moved_whole_is_the_same_definition():
    """Paths inside the pipeline's storage are recorded relative to it."""
    here, there = (
        definition(BASE, "person_addresses", file="/lake/a/shop.yaml"),
        definition(BASE, "person_addresses", file="/mnt/b/shop.yaml"),
    )
    assert here == there


def test_a_recorded_definition_is_compared_only_when_it_has_this_format():
    assert comparable(definition(BASE, "display_products"))
    assert not comparable(None)
    assert not comparable({**definition(BASE, "display_products"), "format": 0})


def test_the_recorded_output_key_is_the_one_each_view_kind_writes_by():
    from lakejoin.engine.kinds import view_logic
    from lakejoin.spec.definition import output_key
    from tests.unit.shop import shop

    spec = shop()
    for view in spec.views.values():
        assert output_key(spec, view) == list(view_logic(spec, view).output_key), view.name


def test_a_rekey_made_unique_changes_its_output_key():
    old = definition(BASE.replace("on_conflict: latest", "unique: false"), "merchants_by_name")
    new = definition(BASE, "merchants_by_name")

    assert old["output_key"] == ["display_name", "merchant_id"] and new["output_key"] == ["display_name"]
    assert "output_key: [display_name, merchant_id] -> [display_name]" in differences(old, new)


def test_a_misspelt_view_setting_is_named_with_the_settings_a_view_takes():
    from lakejoin.errors import SpecError

    with pytest.raises(SpecError) as raised:
        parse_spec(
            BASE.replace("    fk_join: {left", "    on_definiton_change: fail\n    fk_join: {left"),
            "/l/s.yaml",
        )

    text = str(raised.value)
    assert (
        "unknown setting 'on_definiton_change'" in text
        and "on_definition_change, on_input_replaced, path" in text
    )


def test_an_unknown_on_definition_change_is_refused_with_its_choices():
    from lakejoin.errors import SpecError

    with pytest.raises(SpecError) as raised:
        parse_spec(
            BASE.replace("    fk_join: {left", "    on_definition_change: rebuild\n    fk_join: {left"),
            "/l/s.yaml",
        )

    assert "unknown on_definition_change 'rebuild'" in str(raised.value) and "'fail'" in str(raised.value)


def test_a_fingerprint_compares_the_specs_part_alone_or_the_whole():
    from lakejoin.spec.definition import same

    old = definition(BASE, "person_addresses")
    wider = definition(BASE, "person_addresses", with_column("addresses", "zip"))
    edited_ = definition(BASE.replace("duplicates: drop", "duplicates: keep"), "person_addresses")

    kept = fingerprint(old)
    assert same(kept, old) and same(kept, wider, columns=False) and not same(kept, wider)
    assert not same(kept, edited_, columns=False)


def test_columns_in_another_order_are_a_change():
    reordered = {**SCHEMAS, "addresses": {"city": "string", "address_id": "string", "street": "string"}}

    assert differences(
        definition(BASE, "person_addresses"), definition(BASE, "person_addresses", reordered)
    ) == ["the columns of addresses are in another order: city, address_id, street"]
