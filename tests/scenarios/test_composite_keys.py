"""Composite keys (issue 38) as truth tables: tables keyed by two columns, one a string with a quote
in it, through each view kind. After every batch the view equals its oracle, and the output's
change feed holds exactly the keys the change reaches: a right key is matched on every column,
never on one part. A null in any part of a key is a null key; a key held twice, a null key and a
conflict name every column and value."""

from __future__ import annotations

import pytest

from lakejoin.errors import DuplicateKeyError, KeyConflictError, NullKeyError
from tests.histories import lookup_path
from tests.lakehouse import (
    enrich_oracle,
    fk_join_oracle,
    list_join_oracle,
    output_rows,
    pinned,
    rekey_oracle,
    run_and_watch,
    write_spec,
)

pytestmark = pytest.mark.scenario

LINES = "order_id STRING, line_no INT, tenant STRING, product_id INT, qty INT"
PRODUCTS = "tenant STRING, product_id INT, title STRING, price DOUBLE"
BUNDLES = "tenant STRING, bundle_no INT, items ARRAY<STRUCT<tenant: STRING, product_id: INT>>"
LINE_KEY, PRODUCT_KEY = ("order_id", "line_no"), ("tenant", "product_id")
SOURCES = {
    "lines": "[order_id, line_no]",
    "products": "[tenant, product_id]",
    "bundles": "[tenant, bundle_no]",
}
ON = "o'neil"  # a tenant with a quote in it

PRODUCT_ROWS = [("acme", 1, "pen", 1.0), ("acme", 2, "cup", 2.0), (ON, 1, "pen", 3.0)]
LINE_ROWS = [
    ("o'1", 1, "acme", 1, 1),  # (acme, 1)
    ("o'1", 2, ON, 1, 2),  # (o'neil, 1): the same product_id in another tenant
    ("o2", 1, "acme", 2, 1),  # (acme, 2): the same tenant, another product_id
    ("o2", 2, None, 1, 1),  # a null part: an fk that matches nothing
]


FK_VIEWS = """\
  lines_products:
    fk_join: {left: lines, right: products, fk: [tenant, product_id], how: left,
              right_columns: [title, price], right_prefix: product_}
  lines_inner:
    fk_join: {left: lines, right: products, fk: [tenant, product_id], how: inner,
              right_columns: [title, price], right_prefix: product_}
"""
FK_HOW = ("lines_products", "lines_inner")  # left, inner


def fk_expected(lake, spec, view: str = "lines_products") -> list[dict]:  # noqa: ANN001
    versions = pinned(lake, spec, view)
    rows = fk_join_oracle(
        lake.rows_at("lines", versions["lines"]),
        lake.rows_at("products", versions["products"]),
        join=spec.views[view].fk_join,
        left_key=LINE_KEY,
        right_key=PRODUCT_KEY,
    )
    return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))


def written_keys(changes: list[dict], key: tuple[str, ...]) -> list[tuple]:
    """The keys a batch wrote to the output's change feed (inserts, post-images and deletes)."""
    return sorted({tuple(r[c] for c in key) for r in changes})


def test_an_fk_join_matches_every_column_of_the_right_key(lake):
    """The same history through a left and an inner join: each batch writes the same lines to
    both (a left join updates what an inner one deletes or inserts)."""
    lake.create("lines", LINES, LINE_ROWS)
    lake.create("products", PRODUCTS, PRODUCT_ROWS)
    spec = write_spec(lake, {k: SOURCES[k] for k in ("lines", "products")}, FK_VIEWS)

    def batch(written: list[tuple]) -> None:
        for view in FK_HOW:
            _, changes = run_and_watch(lake, spec, view)
            assert written_keys(changes, LINE_KEY) == written, view
            assert output_rows(lake, spec, view) == fk_expected(lake, spec, view), view

    for view in FK_HOW:
        lake.run(spec, view)
        assert output_rows(lake, spec, view) == fk_expected(lake, spec, view)

    # A right row changes: only the line of that (tenant, product_id) is rewritten, not the
    # line of the same product_id in another tenant, nor of another product_id in that tenant.
    lake.upsert("products", PRODUCT_KEY, [("acme", 1, "pencil", 1.5)])
    batch([("o'1", 1)])

    # A line's fk moves on one part only (the tenant): a left change, rewritten; its old
    # product's other lines are not touched.
    lake.upsert("lines", LINE_KEY, [("o2", 1, ON, 2, 1)])  # (o'neil, 2): no such product
    batch([("o2", 1)])

    # The right row arrives, and another is deleted: both reach their lines (the null-part
    # line is reached by neither).
    lake.upsert("products", PRODUCT_KEY, [(ON, 2, "lid", 4.0)])
    lake.delete("products", PRODUCT_KEY, [(ON, 1)])
    batch([("o'1", 2), ("o2", 1)])
    # The line with a null part: null columns in the left join, no row in the inner one.
    for view, held in (("lines_products", 1), ("lines_inner", 0)):
        lines = [tuple(r[c] for c in LINE_KEY) for r in output_rows(lake, spec, view)]
        assert lines.count(("o2", 2)) == held, view


def test_a_list_join_matches_struct_elements_on_every_column(lake):
    lake.create("products", PRODUCTS, PRODUCT_ROWS)
    lake.create(
        "bundles",
        BUNDLES,
        [
            ("acme", 1, [("acme", 1), (ON, 1), ("acme", 1)]),
            (ON, 1, [(ON, 1)]),
            ("acme", 2, [("acme", 2), (None, 1)]),  # a null part: null columns
        ],
    )
    views = """\
  bundle_items:
    list_join: {left: bundles, list: items, right: products, into: products}
"""
    spec = write_spec(lake, {k: SOURCES[k] for k in ("bundles", "products")}, views)
    lake.run(spec, "bundle_items")
    assert output_rows(lake, spec, "bundle_items") == list_join_oracle(lake, spec, "bundle_items")
    first = output_rows(lake, spec, "bundle_items")[0]["products"][0]
    assert list(first) == ["tenant", "product_id", "title", "price"]  # the key's columns, then the right's

    # (o'neil, 1) changes: the two bundles holding it are re-joined, not the one holding
    # (acme, 2) nor its element with a null part.
    lake.upsert("products", PRODUCT_KEY, [(ON, 1, "pen", 3.5)])
    _, changes = run_and_watch(lake, spec, "bundle_items")
    assert written_keys(changes, ("tenant", "bundle_no")) == [("acme", 1), (ON, 1)]
    assert output_rows(lake, spec, "bundle_items") == list_join_oracle(lake, spec, "bundle_items")

    # A bundle's list changes one element's tenant only.
    lake.upsert("bundles", ("tenant", "bundle_no"), [(ON, 1, [("acme", 1)])])
    _, changes = run_and_watch(lake, spec, "bundle_items")
    assert written_keys(changes, ("tenant", "bundle_no")) == [(ON, 1)]
    assert output_rows(lake, spec, "bundle_items") == list_join_oracle(lake, spec, "bundle_items")


def test_a_rekey_by_two_columns_keeps_the_latest_and_names_a_conflict(lake):
    lake.create("products", PRODUCTS, PRODUCT_ROWS)
    views = """\
  products_by_title:
    rekey: {source: products, key: [tenant, title], columns: [price], on_conflict: latest}
  strict_by_title:
    rekey: {source: products, key: [tenant, title], columns: [price]}
"""
    spec = write_spec(lake, {"products": SOURCES["products"]}, views)
    for view in ("products_by_title", "strict_by_title"):
        lake.run(spec, view)
        assert output_rows(lake, spec, view) == rekey_oracle(lake, spec, view)
    assert [list(r) for r in output_rows(lake, spec, "products_by_title")][0] == [
        "tenant",
        "title",
        "product_id",
        "price",
    ]

    # (acme, 2) takes the title of (acme, 1): a conflict in tenant acme, not with o'neil's pen.
    lake.upsert("products", PRODUCT_KEY, [("acme", 2, "pen", 2.5)])
    lake.run(spec, "products_by_title")
    assert output_rows(lake, spec, "products_by_title") == rekey_oracle(lake, spec, "products_by_title")
    with pytest.raises(KeyConflictError) as conflict:
        lake.run(spec, "strict_by_title")
    assert "(tenant, title)=('acme', 'pen') <- (tenant, product_id) [('acme', 1), ('acme', 2)]" in str(
        conflict.value
    )


def test_a_null_part_or_a_key_held_twice_is_refused_naming_the_columns(lake):
    lake.create("lines", LINES, LINE_ROWS)
    lake.create("products", PRODUCTS, [*PRODUCT_ROWS, ("acme", 1, "pen again", 9.0)])
    spec = write_spec(lake, {k: SOURCES[k] for k in ("lines", "products")}, FK_VIEWS)
    with pytest.raises(DuplicateKeyError) as twice:
        lake.run(spec, "lines_products")
    assert "(tenant, product_id)=('acme', 1) (2 rows)" in str(twice.value)

    lake.delete("products", PRODUCT_KEY, [("acme", 1)])
    lake.run(spec, "lines_products")
    lake.append("lines", [("o3", None, "acme", 2, 1)])
    with pytest.raises(NullKeyError) as null:
        lake.run(spec, "lines_products")
    assert "whose key (order_id, line_no) has a null in one of its columns" in str(null.value)
    assert "'order_id'" in str(null.value) and "'line_no'" in str(null.value)


def test_an_enrich_by_a_composite_fk_reaches_the_facts_of_that_key_only(lake):
    lake.create("lines", LINES, LINE_ROWS)
    lake.create("products", PRODUCTS, PRODUCT_ROWS)
    views = """\
  propagated:
    enrich:
      fact: lines
      mode: propagate
      fanout_threshold: 1.0
      dimensions:
        - {table: products, fk: [tenant, product_id], prefix: p_, columns: [title]}
        - {table: tenants, fk: tenant, prefix: t_}
  looked_up:
    enrich:
      fact: lines
      mode: lookup
      dimensions: [{table: products, fk: [tenant, product_id], prefix: p_, columns: [title], how: inner}]
"""
    lake.create("tenants", "tenant STRING, region STRING", [("acme", "eu"), (ON, "us")])
    spec = write_spec(lake, {**{k: SOURCES[k] for k in ("lines", "products")}, "tenants": "tenant"}, views)

    def titles(view: str) -> dict[tuple, str | None]:
        return {(r["order_id"], r["line_no"]): r["p_title"] for r in output_rows(lake, spec, view)}

    for view in ("propagated", "looked_up"):
        lake.run(spec, view)
    assert output_rows(lake, spec, "propagated") == enrich_oracle(lake, spec, "propagated")
    assert titles("looked_up") == {("o'1", 1): "pen", ("o'1", 2): "pen", ("o2", 1): "cup"}

    # (o'neil, 1) is renamed: propagate rewrites the one line of that tenant's product 1, not
    # acme's; lookup keeps what its facts were enriched with. A new line of (o'neil, 1) is
    # enriched with the new title by both.
    # Spark's lookups (not the driver's): the facts' routes hold a null part ("o2", 2), which a
    # semi-join with the changed products and tenants must pass over, not fail on.
    lake.upsert("products", PRODUCT_KEY, [(ON, 1, "quill", 3.0)])
    lake.upsert("tenants", "tenant", [(ON, "eu")])
    lake.upsert("lines", LINE_KEY, [("o3", 1, ON, 1, 5)])
    with lookup_path(lake.spark, 0):
        _, changes = run_and_watch(lake, spec, "propagated")
    assert written_keys(changes, LINE_KEY) == [("o'1", 2), ("o3", 1)]  # o'neil's lines
    assert output_rows(lake, spec, "propagated") == enrich_oracle(lake, spec, "propagated")
    _, changes = run_and_watch(lake, spec, "looked_up")
    assert written_keys(changes, LINE_KEY) == [("o3", 1)]
    assert titles("looked_up") == {("o'1", 1): "pen", ("o'1", 2): "pen", ("o2", 1): "cup", ("o3", 1): "quill"}

    # A line whose fk moves on one part and a deleted dimension row: propagate nulls the
    # lines of the deleted (acme, 2) only; lookup re-enriches the moved line (inner: the
    # line of no product leaves the output) and keeps the rest.
    lake.upsert("lines", LINE_KEY, [("o'1", 1, ON, 2, 1)])
    lake.delete("products", PRODUCT_KEY, [("acme", 2)])
    with lookup_path(lake.spark, 2):  # Spark's lookups, the one-commit upsert
        _, changes = run_and_watch(lake, spec, "propagated")
    assert written_keys(changes, LINE_KEY) == [("o'1", 1), ("o2", 1)]
    assert output_rows(lake, spec, "propagated") == enrich_oracle(lake, spec, "propagated")
    _, changes = run_and_watch(lake, spec, "looked_up")
    assert written_keys(changes, LINE_KEY) == [("o'1", 1)]
    assert titles("looked_up") == {("o'1", 2): "pen", ("o2", 1): "cup", ("o3", 1): "quill"}
