"""Property: incremental == recompute after every batch, with keys of two columns (issue 38).

One lake, every view kind keyed by two columns, one of them a string with a quote in it:
- `lines` (order lines) keyed by (order_id, line_no), each naming a product by the fk
  (tenant, product_id); a null in either part is a null fk, and (tenant, 4) is never a product;
- `products` keyed by (tenant, product_id);
- `bundles` keyed by (tenant, bundle_no), each holding a list of (tenant, product_id) structs;
- `tenants` keyed by one column.
Views: `lines_products` (fk_join, left or inner, drawn), `lines_enriched` (enrich, propagate, of
that view's output by the composite fk to products and a one-column fk to tenants),
`bundle_items` (list_join, keep or drop, drawn), `products_by_title` (rekey by (tenant, title),
`on_conflict: latest`, or by (title, price) with `unique: false`, drawn; titles collide).
Hypothesis draws the initial rows and five batches of upserts, deletes and rows written back
unchanged; each batch takes the next of the four routes (`histories.lookup_path`: Spark or
driver lookups; the driver's MERGE, the one-commit upsert or the public MERGE). After every
batch each view equals its plain-Python oracle at the batch's pins.

    LAKEJOIN_HYPOTHESIS_EXAMPLES=10 pytest tests/properties/test_properties_composite.py
"""

from __future__ import annotations

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from tests.histories import CHECKS_EVERY, Step, apply, example_lake, examples, lookup_path
from tests.lakehouse import (
    enrich_oracle,
    fk_join_oracle,
    list_join_oracle,
    output_rows,
    pinned,
    rekey_oracle,
    write_spec,
)

pytestmark = pytest.mark.property

LINES = "order_id STRING, line_no INT, tenant STRING, product_id INT, qty INT"
PRODUCTS = "tenant STRING, product_id INT, title STRING, price DOUBLE"
BUNDLES = "tenant STRING, bundle_no INT, items ARRAY<STRUCT<tenant: STRING, product_id: INT>>"
TENANTS = "tenant STRING, region STRING"

TENANT_KEYS = ("acme", "o'neil")  # a quote in a key's part
PRODUCT_KEYS = tuple((t, p) for t in TENANT_KEYS for p in (1, 2, 3))
LINE_KEYS = tuple((o, n) for o in ("o'1", "o2") for n in (1, 2, 3))
BUNDLE_KEYS = tuple((t, b) for t in TENANT_KEYS for b in (1, 2))
KEYS = {
    "lines": ("order_id", "line_no"),
    "products": ("tenant", "product_id"),
    "bundles": ("tenant", "bundle_no"),
    "tenants": ("tenant",),
}

product_values = st.tuples(st.sampled_from(["pen", "cup", None]), st.integers(1, 3).map(float))
line_values = st.tuples(
    st.sampled_from([*TENANT_KEYS, None]), st.sampled_from([1, 2, 3, 4, None]), st.integers(1, 3)
)
# An element with a null part, or of no product, joins nothing (null columns).
elements = st.sampled_from([*PRODUCT_KEYS, ("acme", 9), (None, 1)])
bundle_values = st.tuples(st.one_of(st.none(), st.lists(elements, max_size=4)))
tenant_values = st.tuples(st.sampled_from(["eu", "us"]))


def flat(values: dict) -> tuple:
    """Rows of a table whose key has several columns: the key's parts, then the values."""
    return tuple((*(k if isinstance(k, tuple) else (k,)), *v) for k, v in sorted(values.items(), key=repr))


def upserts(table: str, keys: tuple, values: st.SearchStrategy) -> st.SearchStrategy[Step]:
    return st.dictionaries(st.sampled_from(keys), values, min_size=1, max_size=3).map(
        lambda rows: Step(table, "upsert", flat(rows))
    )


def deletes(table: str, keys: tuple) -> st.SearchStrategy[Step]:
    return st.sets(st.sampled_from(keys), min_size=1, max_size=2).map(
        lambda doomed: Step(table, "delete", tuple(sorted(doomed, key=repr)))
    )


def rewrites(table: str, keys: tuple) -> st.SearchStrategy[Step]:
    """Rows written back as they are, by Spark's MERGE (a change of no content, issue 36)."""
    return st.sets(st.sampled_from(keys), min_size=1, max_size=3).map(
        lambda kept: Step(table, "rewrite spark", tuple(sorted(kept, key=repr)))
    )


steps = st.one_of(
    upserts("lines", LINE_KEYS, line_values),
    upserts("products", PRODUCT_KEYS, product_values),
    upserts("bundles", BUNDLE_KEYS, bundle_values),
    upserts("tenants", TENANT_KEYS, tenant_values),
    deletes("lines", LINE_KEYS),
    deletes("products", PRODUCT_KEYS),
    deletes("bundles", BUNDLE_KEYS),
    deletes("tenants", TENANT_KEYS),
    rewrites("products", PRODUCT_KEYS),
    rewrites("lines", LINE_KEYS),
)
histories = st.lists(st.lists(steps, min_size=1, max_size=3).map(tuple), min_size=4, max_size=4)

VIEWS = """\
  lines_products:
    fk_join: {{left: lines, right: products, fk: [tenant, product_id], how: {how},
              right_columns: [title, price], right_prefix: product_, fanout_threshold: 1.0}}
  lines_enriched:
    enrich:
      fact: lines_products
      mode: propagate
      fanout_threshold: 1.0
      dimensions:
        - {{table: tenants, fk: tenant, prefix: tenant_}}
        - {{table: products, fk: [tenant, product_id], prefix: p_, columns: [title], how: {how}}}
  bundle_items:
    list_join: {{left: bundles, list: items, right: products, into: products, duplicates: {duplicates},
                fanout_threshold: 1.0}}
  products_by_title:
    rekey: {{source: products, key: {derived}, columns: [price], {policy}}}
"""


def expected(lake, spec, view: str) -> list[dict]:  # noqa: ANN001
    if view == "lines_products":
        join, versions = spec.views[view].fk_join, pinned(lake, spec, view)
        rows = fk_join_oracle(
            lake.rows_at("lines", versions["lines"]),
            lake.rows_at("products", versions["products"]),
            join=join,
            left_key=KEYS["lines"],
            right_key=KEYS["products"],
        )
        return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))
    oracle = {
        "lines_enriched": enrich_oracle,
        "bundle_items": list_join_oracle,
        "products_by_title": rekey_oracle,
    }
    return oracle[view](lake, spec, view)


@examples(1)
@given(
    how=st.sampled_from(["left", "inner"]),
    duplicates=st.sampled_from(["keep", "drop"]),
    policy=st.sampled_from(["on_conflict: latest", "unique: false"]),
    lines=st.dictionaries(st.sampled_from(LINE_KEYS), line_values, min_size=2, max_size=6),
    products=st.dictionaries(st.sampled_from(PRODUCT_KEYS), product_values, min_size=2, max_size=6),
    bundles=st.dictionaries(st.sampled_from(BUNDLE_KEYS), bundle_values, min_size=1, max_size=4),
    tenants=st.dictionaries(st.sampled_from(TENANT_KEYS), tenant_values, min_size=1, max_size=2),
    history=histories,
)
def test_views_keyed_by_two_columns_equal_their_recompute_after_every_batch(
    spark, tmp_path, how, duplicates, policy, lines, products, bundles, tenants, history
):
    lake = example_lake(spark, tmp_path)
    for table, schema, rows in (
        ("lines", LINES, lines),
        ("products", PRODUCTS, products),
        ("bundles", BUNDLES, bundles),
        ("tenants", TENANTS, tenants),
    ):
        lake.create(table, schema, list(flat(rows)))
    keys = {t: f"[{', '.join(k)}]" if len(k) > 1 else k[0] for t, k in KEYS.items()}
    # A unique rekey may share a column with the master key; one with `unique: false` may not.
    derived = "[tenant, title]" if policy.startswith("on_conflict") else "[title, price]"
    spec = write_spec(
        lake, keys, VIEWS.format(how=how, duplicates=duplicates, policy=policy, derived=derived)
    )

    for number, batch in enumerate(((), *history)):
        note(f"batch {number}: {list(batch)}")
        for step in batch:
            apply(lake, step, KEYS)
        for view in spec.view_order():
            with lookup_path(lake.spark, number):
                summary = lake.run(spec, view, checks=number % CHECKS_EVERY == 0)
            note(f"  {view} -> {summary.outcome.value}, pinned {summary.pinned_versions}")
            assert output_rows(lake, spec, view) == expected(lake, spec, view), f"{view} after batch {number}"
