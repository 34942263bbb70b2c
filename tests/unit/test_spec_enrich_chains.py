"""Specs of enrich views and of views that read views (issue 4): parsing, dependency order,
cycles and bad settings, each error naming its line. No Spark needed."""

from __future__ import annotations

import pytest

from lakejoin.errors import SpecError
from lakejoin.spec.model import EnrichMode, JoinHow
from lakejoin.spec.parse import parse_spec

pytestmark = pytest.mark.unit

SPEC = """\
pipeline: shop
storage: ./store
sources:
  purchases: {path: ./purchases, key: purchase_id}
  customers: {path: ./customers, key: customer_id}
  products:  {path: ./products,  key: product_id}
  merchants: {path: ./merchants, key: merchant_id}
  persons:   {path: ./persons,   key: person_id}
views:
  enriched_purchases:
    enrich:
      fact: purchases
      mode: propagate
      dimensions:
        - {table: customers, fk: customer_id, prefix: customer_}
        - {table: display_products, fk: product_id, prefix: product_, how: inner, columns: [title]}
  person_favourites:
    list_join: {left: persons, list: favourite_ids, right: display_products, into: favourites}
  display_products:
    fk_join: {left: products, right: merchants, fk: merchant_id, how: left}
"""


def test_enrich_parses_with_modes_dimensions_and_defaults():
    spec = parse_spec(SPEC, "shop.yaml")
    enrich = spec.views["enriched_purchases"].enrich
    assert enrich.mode is EnrichMode.PROPAGATE
    assert enrich.fanout_threshold == 0.2 and enrich.broadcast_limit_mb == 64
    assert enrich.fanout_min_rows == 1000
    customers, products = enrich.dimensions
    assert (customers.table, customers.fk, customers.how, customers.prefix) == (
        "customers",
        ("customer_id",),
        JoinHow.LEFT,
        "customer_",
    )
    assert products.how is JoinHow.INNER and products.columns == ("title",)
    assert spec.views["enriched_purchases"].inputs == ("purchases", "customers", "display_products")


def test_views_run_after_the_views_they_read():
    spec = parse_spec(SPEC, "shop.yaml")
    order = spec.view_order()
    assert order.index("display_products") < order.index("enriched_purchases")
    assert order.index("display_products") < order.index("person_favourites")
    assert spec.upstream_views("person_favourites") == ["display_products"]
    assert spec.upstream_views("display_products") == []


def test_a_view_read_as_a_source_is_its_output_table_keyed_by_its_output_key():
    spec = parse_spec(SPEC, "shop.yaml")
    upstream = spec.sources["display_products"]
    assert upstream.path == spec.views["display_products"].path
    assert upstream.key == ("product_id",) and upstream.upstream == "display_products"


def test_a_unique_rekey_can_be_read_by_its_derived_key():
    text = SPEC + (
        "  by_name:\n    rekey: {source: merchants, key: display_name}\n"
        "  products_by_merchant_name:\n"
        "    fk_join: {left: products, right: by_name, fk: merchant_name}\n"
    )
    assert parse_spec(text, "shop.yaml").sources["by_name"].key == ("display_name",)


def error_of(text: str) -> SpecError:
    with pytest.raises(SpecError) as exc:
        parse_spec(text, "shop.yaml")
    return exc.value


def test_a_cycle_of_views_is_an_error_that_names_it():
    text = SPEC.replace("fk_join: {left: products,", "fk_join: {left: person_favourites,")
    error = error_of(text)
    message = " ".join(str(error).split())
    assert "views read each other in a cycle" in message
    assert "display_products -> person_favourites -> display_products" in message
    assert error.line == 19 and error.key == "views.display_products"
    assert "a view cannot read itself" in message


def test_a_view_cannot_read_itself():
    error = error_of(SPEC.replace("right: merchants,", "right: display_products,"))
    assert "display_products -> display_products" in str(error)


def test_a_non_unique_rekey_is_a_source_keyed_by_the_derived_and_the_master_key():
    """Its rows are one per (derived key, master key): a view reads it keyed by both (issue 38;
    before composite keys it could not be read at all)."""
    text = SPEC + (
        "  by_name:\n    rekey: {source: merchants, key: display_name, unique: false}\n"
        "  reader:\n    fk_join: {left: products, right: by_name, fk: [merchant_name, merchant_id]}\n"
    )
    spec = parse_spec(text, "shop.yaml")
    assert spec.sources["by_name"].key == ("display_name", "merchant_id")
    assert spec.views["reader"].fk_join.fk == ("merchant_name", "merchant_id")


@pytest.mark.parametrize(
    ("old", "new", "line", "key", "phrase"),
    [
        ("fact: purchases", "fact: sales", 12, "views.enriched_purchases.enrich.fact", "or one of the views"),
        ("mode: propagate", "mode: eager", 13, "views.enriched_purchases.enrich.mode", "use one of: lookup"),
        (
            "prefix: customer_}",
            "prefix: customer_, how: outer}",
            15,
            "views.enriched_purchases.enrich.dimensions[0].how",
            "unknown join type 'outer'",
        ),
        (
            "mode: propagate\n",
            "mode: propagate\n      fanout_threshold: 1.5\n",
            14,
            "views.enriched_purchases.enrich.fanout_threshold",
            "a number from 0 to 1",
        ),
        (
            "mode: propagate\n",
            "mode: propagate\n      fanout_min_rows: -1\n",
            14,
            "views.enriched_purchases.enrich.fanout_min_rows",
            "a whole number of rows, 0 or more",
        ),
        (
            "mode: propagate\n",
            "mode: lookup\n      fanout_min_rows: 10\n",
            14,
            "views.enriched_purchases.enrich.fanout_min_rows",
            "applies only to 'mode: propagate'",
        ),
        (
            "mode: propagate\n",
            "mode: lookup\n      fanout_threshold: 0.5\n",
            14,
            "views.enriched_purchases.enrich.fanout_threshold",
            "applies only to 'mode: propagate'",
        ),
        (
            "      dimensions:\n        - {table: customers, fk: customer_id, prefix: customer_}\n"
            "        - {table: display_products, fk: product_id, prefix: product_, how: inner, "
            "columns: [title]}\n",
            "      dimensions: []\n",
            14,
            "views.enriched_purchases.enrich.dimensions",
            "must be a non-empty list",
        ),
        (
            "{table: customers, fk: customer_id, prefix: customer_}",
            "{table: purchases, fk: customer_id}",
            15,
            "views.enriched_purchases.enrich.dimensions[0].table",
            "is the fact table",
        ),
        (
            "{table: customers, fk: customer_id, prefix: customer_}",
            "{table: customers, fk: customer_id, colour: red}",
            15,
            "views.enriched_purchases.enrich.dimensions[0].colour",
            "unknown setting 'colour'",
        ),
    ],
)
def test_a_malformed_enrich_names_the_line(old, new, line, key, phrase):
    assert old in SPEC
    error = error_of(SPEC.replace(old, new))
    assert (error.line, error.key) == (line, key)
    assert phrase in str(error)
