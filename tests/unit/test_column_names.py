"""Column names that need quoting (issue 51, item 5): how a name reaches Spark and delta-rs
whole (`delta.sql_text`), and the one kind of name the plan refuses (a backtick, which Delta's
MERGE into a table with a Change Data Feed cannot write). Their Spark side runs in
tests/scenarios/test_odd_names.py."""

from __future__ import annotations

import pytest

from lakejoin.delta.sql_text import quoted, spark_quoted
from lakejoin.errors import SpecError
from lakejoin.spec.schema_checks import check_taken_names
from tests.unit.shop import shop

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("name", "spark", "datafusion"),
    [
        ("id", "`id`", '"id"'),
        ("geo.lat", "`geo.lat`", '"geo.lat"'),  # one column, not the field lat of a struct geo
        ("we`ird", "`we``ird`", '"we`ird"'),
        ("``", "``````", '"``"'),
        ('say"hi', '`say"hi`', '"say""hi"'),
        ("a b", "`a b`", '"a b"'),
        ("_lj_keep", "`_lj_keep`", '"_lj_keep"'),
    ],
)
def test_a_name_is_quoted_whole_for_spark_and_for_datafusion(name, spark, datafusion):
    assert spark_quoted(name) == spark
    assert quoted(name) == datafusion


# The shop's tables, without a column that needs quoting.
SCHEMAS = {
    "products": {"product_id": "string", "name": "string", "merchant_id": "string"},
    "merchants": {"merchant_id": "string", "display_name": "string", "country": "string", "logo": "string"},
    "persons": {"person_id": "string", "name": "string", "address_ids": "array<string>"},
    "addresses": {"address_id": "string", "street": "string"},
    "purchases": {"purchase_id": "string", "customer_id": "string", "product_id": "string"},
    "customers": {"customer_id": "string", "name": "string"},
    "display_products": {"product_id": "string", "title": "string"},
}


@pytest.mark.parametrize(
    ("view", "table", "refused_at", "fix"),
    [
        ("display_products", "merchants", "fk_join.right", "right_columns: [...]"),
        ("display_products", "products", "fk_join.left", "takes every column of products"),
        ("logos", "merchants", None, None),  # right_columns: [logo] leaves it out
        ("person_addresses", "addresses", "list_join.right", "right_columns: [...]"),
        ("person_addresses", "persons", "list_join.left", "takes every column of persons"),
        ("propagated", "customers", "enrich.dimensions[0]", "dimensions[0].columns: [...]"),
        ("propagated", "purchases", "enrich.fact", "takes every column of purchases"),
        ("looked_up", "display_products", None, None),  # columns: [title]
        ("merchants_named", "merchants", "rekey.source", "columns: [...]"),
        ("merchants_by_name", "merchants", None, None),  # columns: [country, ...]
    ],
)
def test_a_taken_column_holding_a_backtick_is_refused_at_the_plan(view, table, refused_at, fix):
    spec = shop()
    dotted = {t: {**columns, "geo.lat": "double", 'say"hi': "string"} for t, columns in SCHEMAS.items()}
    check_taken_names(spec, spec.views[view], dotted)  # every name but a backtick is taken whole
    odd = {**dotted, table: {**dotted[table], "we`ird": "string"}}
    if refused_at is None:
        check_taken_names(spec, spec.views[view], odd)
        return
    with pytest.raises(SpecError) as raised:
        check_taken_names(spec, spec.views[view], odd)
    assert raised.value.key == f"views.{view}.{refused_at}"
    text = str(raised.value)
    assert f"column 'we`ird' of {spec.sources[table].path} holds a backtick" in text
    assert f"output of view '{view}'" in text
    assert fix in text and "rename it in that table" in text
