"""What each view kind decides from the spec and the sources' columns alone, before any row is
read: its output key, the columns it carries, the sources whose changes a batch reads, its state
tables; and the texts it reports (conflicts, sizes). No Spark."""

from __future__ import annotations

import pytest

from lakejoin.spec.model import JoinHow, OnConflict
from lakejoin.views.enrich import MB, EnrichView, _size, broadcasts
from lakejoin.views.fk_join import FkJoinView, chosen_right_columns
from lakejoin.views.list_join import ListJoinView
from lakejoin.views.rekey import SINCE, RekeyView, Resolution, resolution, shown_conflicts
from tests.unit.shop import shop

pytestmark = pytest.mark.unit

SCHEMAS = {
    "products": {"product_id": "string", "title": "string", "merchant_id": "string"},
    "merchants": {"merchant_id": "string", "display_name": "string", "logo": "string", "country": "string"},
    "persons": {"person_id": "string", "address_ids": "array<string>"},
    "addresses": {"address_id": "string", "street": "string", "city": "string"},
    "purchases": {"purchase_id": "string", "customer_id": "string", "product_id": "string"},
    "customers": {"customer_id": "string", "name": "string"},
    "display_products": {"product_id": "string", "title": "string", "merchant_display_name": "string"},
}


def names(sources) -> list[str]:  # noqa: ANN001 - Sources
    return [s.name for s in sources]


@pytest.mark.parametrize(
    ("view", "columns"),
    [("display_products", ["display_name", "logo", "country"]), ("logos", ["logo"])],
    ids=["all_but_the_right_key", "declared"],
)
def test_an_fk_join_carries_the_declared_right_columns_or_all_but_the_right_key(view, columns):
    join = shop().views[view].fk_join

    assert chosen_right_columns(join, list(SCHEMAS["merchants"]), "merchant_id") == columns


def test_an_fk_join_is_keyed_by_its_left_key_reads_both_sides_and_keeps_no_state():
    spec = shop()
    kind = FkJoinView(spec, spec.views["logos"])

    assert kind.output_key == ("product_id",)
    assert names(kind.change_sources) == ["products", "merchants"]
    assert kind.state_tables("/state") == {}
    assert kind.join.how is JoinHow.INNER


def test_a_list_join_is_keyed_by_its_left_key_and_keeps_no_state():
    spec = shop()
    kind = ListJoinView(spec, spec.views["person_addresses"])

    assert kind.output_key == ("person_id",)
    assert names(kind.change_sources) == ["persons", "addresses"]
    assert kind.state_tables("/state") == {}
    assert kind._right_columns(SCHEMAS) == ["street", "city"]


@pytest.mark.parametrize(
    ("view", "key", "index"),
    [
        # Its declared columns, less the two keys the index holds anyway, in the declared order.
        ("merchants_by_name", ("display_name",), ["merchant_id", "display_name", SINCE, "country"]),
        (
            "merchants_named",  # unique: false, every column
            ("display_name", "merchant_id"),
            ["merchant_id", "display_name", SINCE, "logo", "country"],
        ),
    ],
    ids=["unique", "not_unique"],
)
def test_a_rekey_is_keyed_by_its_derived_key_or_with_its_master_key_when_not_unique(view, key, index):
    spec = shop()
    kind = RekeyView(spec, spec.views[view])

    assert kind.output_key == key
    assert kind._index_columns(SCHEMAS) == index
    assert kind.state_tables("/state") == {"_routing": "/state"}  # its index, pinned as _routing


@pytest.mark.parametrize(
    ("view", "read"),
    [("looked_up", ["purchases"]), ("propagated", ["purchases", "customers"])],
    ids=["lookup_reads_the_facts_changes_only", "propagate_reads_every_dimension"],
)
def test_an_enrich_reads_the_dimensions_changes_only_when_it_propagates_them(view, read):
    spec = shop()
    kind = EnrichView(spec, spec.views[view])

    assert names(kind.change_sources) == read
    assert kind.output_key == ("purchase_id",)
    assert kind.state_tables("/state") == {}


def test_an_enrich_carries_each_dimensions_columns_and_routes_by_its_fk():
    spec = shop()
    kind = EnrichView(spec, spec.views["looked_up"])

    assert {d.id: kind._columns(d, SCHEMAS) for d in kind.enrich.dimensions} == {
        "customers_by_customer_id": ["name"],
        "display_products_by_product_id": ["title"],
    }
    assert kind._routes() == {
        "customers_by_customer_id": ("customer_id",),
        "display_products_by_product_id": ("product_id",),
    }


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (0, "0 bytes"),
        (1023, "1023 bytes"),
        (1024, "1.0 KB"),
        (5 * 1024**2 + 1, "5.0 MB"),
        (3 * 1024**3 // 2, "1.5 GB"),
    ],
)
def test_a_dimension_size_is_shown_in_its_largest_unit(size, shown):
    assert _size(size) == shown


def test_a_conflict_names_each_derived_key_and_its_masters_up_to_a_limit():
    clashes = [{"name": "Acme", "masters": ["m1", "m2"]}, {"name": "Bolt", "masters": ["m3", "m4", "m5"]}]

    assert (
        shown_conflicts(clashes, ("name",), ("id",), limit=5)
        == "name='Acme' <- id ['m1', 'm2']; name='Bolt' <- id ['m3', 'm4', 'm5']"
    )
    assert shown_conflicts(clashes, ("name",), ("id",), limit=1) == "name='Acme' <- id ['m1', 'm2']"


@pytest.mark.parametrize(
    ("size_bytes", "limit_mb", "broadcast"),
    [
        (0, 0, True),  # an empty dimension, even with a limit of 0
        (1, 0, False),
        (10 * MB, 10, True),  # at the limit
        (10 * MB + 1, 10, False),
        (MB // 2, 0.5, True),
        (MB // 2 + 1, 0.5, False),
    ],
)
def test_a_dimension_is_broadcast_within_its_views_limit(size_bytes, limit_mb, broadcast):
    assert broadcasts(size_bytes, limit_mb) is broadcast


@pytest.mark.parametrize(
    ("unique", "on_conflict", "resolved"),
    [
        (True, OnConflict.FAIL, Resolution.FAIL),
        (True, OnConflict.LATEST, Resolution.LATEST),
        (False, OnConflict.FAIL, Resolution.EVERY_CLAIM),  # not unique: on_conflict is not read
        (False, OnConflict.LATEST, Resolution.EVERY_CLAIM),
    ],
)
def test_a_rekey_resolves_its_claims_by_its_declared_uniqueness_and_conflict_policy(
    unique, on_conflict, resolved
):
    assert resolution(unique, on_conflict) is resolved


@pytest.mark.parametrize(
    ("view", "resolved"),
    [("merchants_by_name", Resolution.FAIL), ("merchants_named", Resolution.EVERY_CLAIM)],
    ids=["unique_fails_by_default", "not_unique"],
)
def test_a_rekey_view_resolves_as_declared(view, resolved):
    spec = shop()

    assert RekeyView(spec, spec.views[view]).resolution is resolved
