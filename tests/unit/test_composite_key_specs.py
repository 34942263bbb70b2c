"""Composite keys in specs (issue 38): `key: [a, b]` for a source, `fk: [x, y]` for an fk_join or
an enrich dimension, a rekey by several columns, and list elements that are structs of a composite
right key. Parsing, the checks against the input columns and their errors, each naming the columns
and the line; a single-column key is parsed and recorded as before. No Spark needed."""

from __future__ import annotations

import pytest

from lakejoin.errors import SpecError
from lakejoin.spec.definition import fingerprint, view_definition
from lakejoin.spec.parse import parse_spec
from lakejoin.spec.schema_checks import check_view_schemas

pytestmark = pytest.mark.unit

SPEC = """\
pipeline: lines
storage: ./store
sources:
  order_lines: {path: ./order_lines, key: [order_id, line_no]}
  products:    {path: ./products, key: [tenant, product_id]}
  orders:      {path: ./orders, key: order_id}
  bundles:     {path: ./bundles, key: bundle_id}
views:
  lines_products:
    fk_join: {left: order_lines, right: products, fk: [tenant, product_id], how: left}
  lines_enriched:
    enrich:
      fact: lines_products
      mode: propagate
      dimensions:
        - {table: orders, fk: order_id, prefix: order_}
  bundle_products:
    list_join: {left: bundles, list: items, right: products, into: products}
  products_by_sku:
    rekey: {source: products, key: [tenant, sku]}
"""

SCHEMAS = {
    "order_lines": {"order_id": "bigint", "line_no": "int", "tenant": "string", "product_id": "bigint"},
    "products": {"tenant": "string", "product_id": "bigint", "sku": "string", "title": "string"},
    "orders": {"order_id": "bigint", "placed": "date"},
    "bundles": {"bundle_id": "string", "items": "array<struct<tenant:string,product_id:bigint>>"},
}


def spec_of(text: str = SPEC):
    return parse_spec(text, "lines.yaml")


def schemas_for(spec):
    """The input columns of every view, an output's as the view would write them."""
    out = dict(SCHEMAS)
    out["lines_products"] = {**SCHEMAS["order_lines"], "sku": "string", "title": "string"}
    return out


def test_keys_and_fks_of_several_columns_parse_in_order():
    spec = spec_of()
    assert spec.sources["order_lines"].key == ("order_id", "line_no")
    assert spec.sources["orders"].key == ("order_id",)
    assert spec.views["lines_products"].fk_join.fk == ("tenant", "product_id")
    assert spec.views["products_by_sku"].rekey.key == ("tenant", "sku")
    # A view read as a source is keyed by its left table's key, every column of it.
    assert spec.sources["lines_products"].key == ("order_id", "line_no")


def test_every_view_fits_its_inputs_columns():
    spec = spec_of()
    for view in spec.views.values():
        check_view_schemas(spec, view, schemas_for(spec))


def test_a_single_column_key_records_its_definition_as_before():
    """`key: a` and `key: [a]` are one key; its recorded definition holds the column's name, as
    before composite keys, so no existing view sees its definition change."""
    one = spec_of(SPEC.replace("key: order_id}", "key: [order_id]}"))
    spec = spec_of()
    view = spec.views["lines_enriched"]
    definition = view_definition(spec, view, {})
    assert definition["inputs"]["orders"]["key"] == "order_id"
    assert definition["inputs"]["lines_products"]["key"] == ["order_id", "line_no"]
    assert definition["settings"]["dimensions"][0]["fk"] == "order_id"
    assert definition["output_key"] == ["order_id", "line_no"]
    assert fingerprint(definition) == fingerprint(view_definition(one, one.views["lines_enriched"], {}))


@pytest.mark.parametrize(
    ("before", "after", "key", "message"),
    [
        ("key: [order_id, line_no]", "key: []", "sources.order_lines.key", "'key' is an empty list"),
        (
            "key: [order_id, line_no]",
            "key: [order_id, order_id]",
            "sources.order_lines.key[1]",
            "column 'order_id' is listed twice in 'key'",
        ),
        ("key: [order_id, line_no]", "key: [order_id, 3]", "sources.order_lines.key[1]", "found 3"),
        (
            "key: [order_id, line_no]",
            "key: [order_id, line-no]",
            "sources.order_lines.key[1]",
            "not a valid name",
        ),
        (
            "fk: [tenant, product_id], how",
            "fk: [tenant, {a: 1}], how",
            "views.lines_products.fk_join.fk[1]",
            "found a mapping",
        ),
    ],
    ids=["empty", "twice", "not_text", "bad_name", "fk_part_not_text"],
)
def test_a_bad_key_list_names_the_column_and_its_line(before, after, key, message):
    with pytest.raises(SpecError) as error:
        spec_of(SPEC.replace(before, after))
    assert error.value.key == key and message in str(error.value)
    # The line of the source or the view that holds it.
    assert error.value.line == (4 if key.startswith("sources.order_lines") else 10)


@pytest.mark.parametrize(
    ("fk", "columns", "key", "message", "fix"),
    [
        (
            "[product_id]",
            {},
            "views.lines_products.fk_join.fk",
            "fk product_id has 1 column but the right key 'products.(tenant, product_id)' has 2",
            "fk: [tenant, product_id]",
        ),
        (
            "[tenant, product_id, line_no]",
            {},
            "views.lines_products.fk_join.fk",
            "fk (tenant, product_id, line_no) has 3 columns but the right key "
            "'products.(tenant, product_id)' has 2",
            "in its order",
        ),
        (
            "[tenant, sku_id]",
            {},
            "views.lines_products.fk_join.fk[1]",
            "fk column 'sku_id' is not in the left table 'order_lines'",
            "use one of its columns",
        ),
        (
            "[tenant, product_id]",
            {"product_id": "string"},
            "views.lines_products.fk_join.fk[1]",
            "fk 'product_id' is string but the right key 'products.product_id' is bigint",
            "same type",
        ),
        (
            "[product_id, tenant]",
            {},
            "views.lines_products.fk_join.fk[0]",
            "fk 'product_id' is bigint but the right key 'products.tenant' is string",
            "same type",
        ),
    ],
    ids=["too_few", "too_many", "missing", "another_type", "out_of_order"],
)
def test_an_fk_that_does_not_fit_the_right_key_names_its_columns(fk, columns, key, message, fix):
    spec = spec_of(SPEC.replace("fk: [tenant, product_id], how", f"fk: {fk}, how"))
    schemas = schemas_for(spec)
    schemas["order_lines"] = {**schemas["order_lines"], **columns}
    with pytest.raises(SpecError) as error:
        check_view_schemas(spec, spec.views["lines_products"], schemas)
    assert error.value.key == key
    assert message in str(error.value) and fix in str(error.value)


def test_a_composite_keys_missing_column_is_named():
    spec = spec_of()
    schemas = schemas_for(spec)
    schemas["order_lines"] = {c: t for c, t in schemas["order_lines"].items() if c != "line_no"}
    with pytest.raises(SpecError) as error:
        check_view_schemas(spec, spec.views["lines_products"], schemas)
    assert error.value.key == "sources.order_lines.key[1]"
    assert "key column 'line_no' is not in table" in str(error.value)


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ("array<bigint>", "is array<bigint> but the right key 'products.(tenant, product_id)' is "),
        ("array<struct<product_id:bigint,tenant:string>>", "struct<tenant:string,product_id:bigint>"),
        (
            "array<struct<tenant:string,product_id:int>>",
            "make the list an array<struct<tenant:string,product_id:bigint>>",
        ),
    ],
    ids=["scalars", "fields_out_of_order", "field_of_another_type"],
)
def test_list_elements_of_a_composite_right_key_are_structs_of_its_columns(items, message):
    spec = spec_of()
    schemas = schemas_for(spec)
    schemas["bundles"] = {**schemas["bundles"], "items": items}
    with pytest.raises(SpecError) as error:
        check_view_schemas(spec, spec.views["bundle_products"], schemas)
    assert error.value.key == "views.bundle_products.list_join.list"
    assert message in str(error.value) and "by name and in order" in str(error.value)


def test_a_rekey_by_several_columns_names_a_missing_one_and_refuses_the_master_key():
    spec = spec_of(SPEC.replace("key: [tenant, sku]}", "key: [tenant, skew]}"))
    with pytest.raises(SpecError) as error:
        check_view_schemas(spec, spec.views["products_by_sku"], schemas_for(spec))
    assert error.value.key == "views.products_by_sku.rekey.key[1]"
    assert "rekey column 'skew' is not in the master table 'products'" in str(error.value)

    same = spec_of(SPEC.replace("key: [tenant, sku]}", "key: [product_id, tenant]}"))
    with pytest.raises(SpecError) as error:
        check_view_schemas(same, same.views["products_by_sku"], schemas_for(same))
    assert "(product_id, tenant) is already the key of 'products'" in str(error.value)

    shared = spec_of(SPEC.replace("key: [tenant, sku]}", "key: [tenant, sku], unique: false}"))
    with pytest.raises(SpecError) as error:
        check_view_schemas(shared, shared.views["products_by_sku"], schemas_for(shared))
    assert "shares tenant with the key of 'products'" in str(error.value)
