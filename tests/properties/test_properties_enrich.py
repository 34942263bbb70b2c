"""Property: incremental == recompute after every batch, for enrich and for views that read views
(issue 4).

`propagate`: hypothesis draws purchases over two dimensions (customers, products), each dimension's
inner/left setting and a fan-out threshold (0 forces the full-recompute fallback whenever a
dimension change reaches a fact, 1 never takes it), then four more batches of commits on all three
tables. After every batch the view must equal its plain-Python oracle at the pinned versions.

`lookup` (issue 36): the same tables and commits, and rows of every table written back unchanged
(Spark's or delta-rs's MERGE, an overwrite). After every batch each fact must be as the batch that
last changed its content enriched it (`lookup_model`): a fact written back unchanged keeps its
enrichment, however the dimensions moved since.

The chain: `display_products` (fk_join of products and merchants) feeds an enrich
(`display_products` as a dimension of purchases), and in a second test a list_join (persons'
favourite product ids).
Each batch runs both views in dependency order. After every batch the upstream view equals its
recompute, the downstream view pinned the upstream output's latest version, and the downstream
equals its recompute over that version: together, the chain equals a recompute from the base
tables.

    LAKEJOIN_HYPOTHESIS_EXAMPLES=25 pytest tests/properties/test_properties_enrich.py
"""

from __future__ import annotations

import pytest
from delta.tables import DeltaTable
from hypothesis import given, note
from hypothesis import strategies as st

from tests.histories import (
    CHECKS_EVERY,
    apply,
    batches,
    deletes,
    drops,
    example_lake,
    examples,
    lookup_path,
    replaces,
    rewrites,
    rows_of,
    upserts,
)
from tests.lakehouse import (
    CUSTOMERS,
    ITEMS,
    MERCHANTS,
    PRODUCTS,
    PURCHASES,
    Lakehouse,
    enrich_oracle,
    health_recount,
    list_join_oracle,
    lookup_model,
    model_rows,
    output_rows,
    pinned,
    write_spec,
)

pytestmark = pytest.mark.property

PURCHASE_KEYS = tuple(f"o{i}" for i in range(6))
CUSTOMER_KEYS = tuple(f"c{i}" for i in range(4))
PRODUCT_KEYS = tuple(f"p{i}" for i in range(4))
MERCHANT_KEYS = tuple(f"m{i}" for i in range(3))
PERSON_KEYS = tuple(f"P{i}" for i in range(4))
KEYS = {
    "purchases": "purchase_id",
    "customers": "customer_id",
    "products": "product_id",
    "merchants": "merchant_id",
    "persons": "person_id",
}
FAVOURITES = "person_id STRING, name STRING, favourite_ids ARRAY<STRING>"


def fk_of(keys: tuple[str, ...]) -> st.SearchStrategy:
    """A foreign key: usually one of `keys`, sometimes one that never exists, sometimes null."""
    return st.one_of(st.sampled_from(keys), st.just("x9"), st.none())


purchase_values = st.tuples(fk_of(CUSTOMER_KEYS), fk_of(PRODUCT_KEYS), st.integers(1, 3))
customer_values = st.tuples(st.sampled_from(["Ann", "Ben", None]), st.sampled_from(["NO", "SE"]))
item_values = st.tuples(st.sampled_from(["pen", "cup"]), st.sampled_from([1.0, 2.5]))


# --- propagate --------------------------------------------------------------------------------

propagate_steps = st.one_of(
    upserts("purchases", PURCHASE_KEYS, purchase_values),
    upserts("customers", CUSTOMER_KEYS, customer_values),
    upserts("products", PRODUCT_KEYS, item_values),
    deletes("purchases", PURCHASE_KEYS),
    deletes("customers", CUSTOMER_KEYS),
    deletes("products", PRODUCT_KEYS),
    rewrites("purchases", PURCHASE_KEYS),
    rewrites("customers", CUSTOMER_KEYS),
)


@examples(1)
@given(
    customers_how=st.sampled_from(["left", "inner"]),
    products_how=st.sampled_from(["left", "inner"]),
    threshold=st.sampled_from([0.0, 0.3, 1.0]),
    purchases=st.dictionaries(st.sampled_from(PURCHASE_KEYS), purchase_values, min_size=2, max_size=6),
    customers=st.dictionaries(st.sampled_from(CUSTOMER_KEYS), customer_values, min_size=1, max_size=4),
    products=st.dictionaries(st.sampled_from(PRODUCT_KEYS), item_values, min_size=1, max_size=4),
    history=batches(propagate_steps),
)
def test_propagate_incremental_equals_recompute(
    spark, tmp_path, customers_how, products_how, threshold, purchases, customers, products, history
):
    lake = example_lake(spark, tmp_path)
    lake.create("purchases", PURCHASES, list(rows_of(purchases)))
    lake.create("customers", CUSTOMERS, list(rows_of(customers)))
    lake.create("products", ITEMS, list(rows_of(products)))
    views = f"""\
  enriched_purchases:
    enrich:
      fact: purchases
      mode: propagate
      fanout_threshold: {threshold}
      fanout_min_rows: 0
      dimensions:
        - {{table: customers, fk: customer_id, prefix: customer_, how: {customers_how}}}
        - {{table: products, fk: product_id, prefix: product_, columns: [title], how: {products_how}}}
"""
    spec = write_spec(lake, {t: KEYS[t] for t in ("purchases", "customers", "products")}, views)
    for number, batch in enumerate(((), *history)):
        note(f"batch {number}: {list(batch)}")
        for step in batch:
            apply(lake, step, KEYS)
        with lookup_path(lake.spark, number):
            summary = lake.run(spec, "enriched_purchases", checks=number % CHECKS_EVERY == 0)
        note(f"  -> {summary.outcome.value}, {summary.metrics()}, pinned {summary.pinned_versions}")
        expected = enrich_oracle(lake, spec, "enriched_purchases")
        assert output_rows(lake, spec, "enriched_purchases") == expected, f"after batch {number}"
        health = health_recount(lake, spec, "enriched_purchases")  # carried batch to batch
        assert health["logged"] == health["counted"], f"join health after batch {number}"


# --- lookup -----------------------------------------------------------------------------------


@examples(1)
@given(
    customers_how=st.sampled_from(["left", "inner"]),
    products_how=st.sampled_from(["left", "inner"]),
    purchases=st.dictionaries(st.sampled_from(PURCHASE_KEYS), purchase_values, min_size=2, max_size=6),
    customers=st.dictionaries(st.sampled_from(CUSTOMER_KEYS), customer_values, min_size=1, max_size=4),
    products=st.dictionaries(st.sampled_from(PRODUCT_KEYS), item_values, min_size=1, max_size=4),
    # A dimension changes, then the facts holding it are written back unchanged: they must keep
    # the enrichment of the batch that last changed them.
    history=batches(st.one_of(propagate_steps, rewrites("purchases", PURCHASE_KEYS))),
)
def test_lookup_keeps_each_fact_as_the_batch_that_last_changed_it_enriched_it(
    spark, tmp_path, customers_how, products_how, purchases, customers, products, history
):
    lake = example_lake(spark, tmp_path)
    lake.create("purchases", PURCHASES, list(rows_of(purchases)))
    lake.create("customers", CUSTOMERS, list(rows_of(customers)))
    lake.create("products", ITEMS, list(rows_of(products)))
    views = f"""\
  looked_up:
    enrich:
      fact: purchases
      mode: lookup
      dimensions:
        - {{table: customers, fk: customer_id, prefix: customer_, how: {customers_how}}}
        - {{table: products, fk: product_id, prefix: product_, columns: [title], how: {products_how}}}
"""
    spec = write_spec(lake, {t: KEYS[t] for t in ("purchases", "customers", "products")}, views)
    model, since = None, -1
    for number, batch in enumerate(((), *history)):
        note(f"batch {number}: {list(batch)}")
        for step in batch:
            apply(lake, step, KEYS)
        with lookup_path(lake.spark, number):
            summary = lake.run(spec, "looked_up", checks=number % CHECKS_EVERY == 0)
        note(f"  -> {summary.outcome.value}, {summary.metrics()}, {summary.reason}")
        model = lookup_model(lake, spec, "looked_up", model, since)
        since = pinned(lake, spec, "looked_up")["purchases"]
        assert output_rows(lake, spec, "looked_up") == model_rows(model), f"after batch {number}"


# --- a two-level chain ------------------------------------------------------------------------

product_values = st.tuples(st.sampled_from(["pen", "cup"]), st.sampled_from([1.0, 2.5]), fk_of(MERCHANT_KEYS))
merchant_values = st.tuples(st.sampled_from(["Acme", "Bolt", None]), st.just("x.png"))
favourite_values = st.tuples(
    st.just("Ada"), st.one_of(st.none(), st.lists(st.sampled_from((*PRODUCT_KEYS, "x9")), max_size=4))
)
chain_steps = st.one_of(
    upserts("products", PRODUCT_KEYS, product_values),
    upserts("merchants", MERCHANT_KEYS, merchant_values),
    deletes("products", PRODUCT_KEYS),
    deletes("merchants", MERCHANT_KEYS),
    replaces("products"),
    drops("store/views/display_products"),
)
DOWNSTREAM = {
    "enrich": (
        "purchases",
        """\
  downstream:
    enrich:
      fact: purchases
      mode: propagate
      fanout_threshold: 1.0
      dimensions:
        - {table: display_products, fk: product_id, prefix: product_, columns: [name, display_name]}
""",
        enrich_oracle,
        st.one_of(upserts("purchases", PURCHASE_KEYS, purchase_values), deletes("purchases", PURCHASE_KEYS)),
    ),
    "list_join": (
        "persons",
        """\
  downstream:
    list_join: {left: persons, list: favourite_ids, right: display_products, into: favourites,
                right_columns: [name, display_name]}
""",
        list_join_oracle,
        st.one_of(upserts("persons", PERSON_KEYS, favourite_values), deletes("persons", PERSON_KEYS)),
    ),
}


def latest_version(lake: Lakehouse, path: str) -> int:
    return int(DeltaTable.forPath(lake.spark, path).history(1).first()["version"])


@pytest.mark.parametrize("downstream", sorted(DOWNSTREAM))
@examples(1)
@given(data=st.data())
def test_a_view_reading_a_view_equals_the_recompute_of_the_chain(spark, tmp_path, data, downstream):
    fact, views, oracle, fact_steps = DOWNSTREAM[downstream]
    lake = example_lake(spark, tmp_path)
    products = data.draw(
        st.dictionaries(st.sampled_from(PRODUCT_KEYS), product_values, min_size=1, max_size=4)
    )
    merchants = data.draw(st.dictionaries(st.sampled_from(MERCHANT_KEYS), merchant_values, max_size=3))
    lake.create("products", PRODUCTS, list(rows_of(products)))
    lake.create("merchants", MERCHANTS, list(rows_of(merchants)))
    if fact == "purchases":
        facts = data.draw(
            st.dictionaries(st.sampled_from(PURCHASE_KEYS), purchase_values, min_size=1, max_size=6)
        )
        lake.create("purchases", PURCHASES, list(rows_of(facts)))
    else:
        facts = data.draw(
            st.dictionaries(st.sampled_from(PERSON_KEYS), favourite_values, min_size=1, max_size=4)
        )
        lake.create("persons", FAVOURITES, list(rows_of(facts)))
    chain = f"""\
  display_products:
    fk_join: {{left: products, right: merchants, fk: merchant_id, how: left,
              right_columns: [display_name]}}
{views}"""
    spec = write_spec(lake, {t: KEYS[t] for t in ("products", "merchants", fact)}, chain)
    assert list(spec.view_order()) == ["display_products", "downstream"]
    history = data.draw(batches(st.one_of(chain_steps, fact_steps)))
    for number, batch in enumerate(((), *history)):
        note(f"batch {number}: {list(batch)}")
        for step in batch:
            apply(lake, step, KEYS)
        for view in spec.view_order():
            with lookup_path(lake.spark, number):
                summary = lake.run(spec, view, checks=number % CHECKS_EVERY == 0)
            note(f"  {view} -> {summary.outcome.value}, pinned {summary.pinned_versions}")
        assert output_rows(lake, spec, "display_products") == lake.expected(spec), f"after batch {number}"
        upstream = spec.views["display_products"].path
        # The downstream's batch read the upstream up to its newest batch commit (a batch that
        # found no change of content there logs its pins but is not the last committed one).
        assert summary.pinned_versions["display_products"] == latest_version(lake, upstream)
        assert output_rows(lake, spec, "downstream") == oracle(lake, spec, "downstream"), (
            f"after batch {number}"
        )
