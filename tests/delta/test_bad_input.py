"""Bad input gives a clear typed error: what was wrong, where (spec file and line, or source,
path and version), and what to do next. Never silent data loss (DESIGN §1, last rule).

Here, specs that do not fit their tables and sources that cannot be read the way the view needs,
on real Delta tables. A malformed spec alone: tests/unit/test_spec_errors.py; its message from
`lakejoin run`: tests/e2e/test_cli.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakejoin.errors import (
    ChangeFeedMissingError,
    ChangesUnreadableError,
    DuplicateKeyError,
    NullKeyError,
    SpecError,
)
from lakejoin.spec.parse import load_spec
from tests.lakehouse import MERCHANTS, PRODUCTS, Lakehouse
from tests.spec_texts import FK_JOIN, LIST_AND_REKEY, VIEW, assert_says, message_of

pytestmark = pytest.mark.delta

ACME = ("m1", "Acme", "a.png")
PEN, CUP = ("p1", "pen", 1.0, "m1"), ("p2", "cup", 2.0, "m1")


# --- specs that do not fit their tables: checked when a batch plans ---------------------------------


@pytest.fixture(scope="module")
def shop_tables(spark, tmp_path_factory):
    """products and merchants tables, shared: these tests fail before any batch writes."""
    lake = Lakehouse(spark, tmp_path_factory.mktemp("shop"))
    lake.create("merchants", MERCHANTS, [ACME])
    lake.create("products", PRODUCTS, [PEN])
    return lake


def shop_spec(
    tables: Lakehouse,
    folder: Path,
    *,
    key: str = "product_id",
    fk: str = "merchant_id",
    extra: str = "",
    merchants: str = "merchants",
):
    file = folder / "shop.yaml"
    file.write_text(f"""\
pipeline: shop
storage: {folder / "store"}
sources:
  products: {{path: {tables.path("products")}, key: {key}}}
  merchants: {{path: {tables.path(merchants)}, key: merchant_id}}
views:
  display_products:
    fk_join:
      left: products
      right: merchants
      fk: {fk}
      how: left
{extra}""")
    return load_spec(file)


def run_fails_with_spec_error(tables: Lakehouse, spec) -> SpecError:
    with pytest.raises(SpecError) as exc:
        tables.run(spec)
    assert not Path(spec.views[VIEW].path).exists(), "nothing is written for a spec error"
    return exc


def test_a_key_column_missing_from_its_table(shop_tables, tmp_path):
    spec = shop_spec(shop_tables, tmp_path, key="sku")
    exc = run_fails_with_spec_error(shop_tables, spec)
    assert (exc.value.line, exc.value.key) == (4, "sources.products.key")
    assert_says(
        message_of(exc),
        f"{spec.file}:4",
        f"key column 'sku' is not in table {shop_tables.path('products')}",
        "use one of its columns: product_id, name, price, merchant_id",
    )


def test_an_fk_column_missing_from_the_left_table(shop_tables, tmp_path):
    spec = shop_spec(shop_tables, tmp_path, fk="seller_id")
    exc = run_fails_with_spec_error(shop_tables, spec)
    assert (exc.value.line, exc.value.key) == (11, f"{FK_JOIN}.fk")
    assert_says(
        message_of(exc),
        f"{spec.file}:11",
        "fk column 'seller_id' is not in the left table 'products'",
        "use one of its columns: product_id, name, price, merchant_id",
    )


def test_a_right_column_that_does_not_exist(shop_tables, tmp_path):
    columns = "      right_columns:\n        - display_name\n        - logo\n"
    spec = shop_spec(shop_tables, tmp_path, extra=columns)
    exc = run_fails_with_spec_error(shop_tables, spec)
    assert (exc.value.line, exc.value.key) == (15, f"{FK_JOIN}.right_columns[1]")
    assert_says(
        message_of(exc),
        f"{spec.file}:15",
        "column 'logo' is not in the right table 'merchants'",
        "use one of its columns: merchant_id, display_name, photo_url",
    )


def test_an_fk_of_another_type_than_the_right_key(shop_tables, tmp_path):
    shop_tables.create("merchants_by_number", "merchant_id BIGINT, display_name STRING", [(1, "Acme")])
    spec = shop_spec(shop_tables, tmp_path, merchants="merchants_by_number")
    exc = run_fails_with_spec_error(shop_tables, spec)
    assert (exc.value.line, exc.value.key) == (11, f"{FK_JOIN}.fk")
    assert_says(
        message_of(exc),
        "fk 'merchant_id' is string but the right key 'merchants.merchant_id' is bigint",
        "make both columns the same type",
    )


def test_a_column_name_clash_asks_for_a_right_prefix(lake, tmp_path):
    """Left and right columns of the same name are an error that asks for `right_prefix`; with
    the prefix the view runs."""
    lake.create("merchants", "merchant_id STRING, name STRING", [("m1", "Acme")])
    lake.create("products", PRODUCTS, [PEN])
    spec = shop_spec(lake, tmp_path)
    exc = run_fails_with_spec_error(lake, spec)
    assert (exc.value.line, exc.value.key) == (8, FK_JOIN)
    assert_says(
        message_of(exc),
        f"{spec.file}:8",
        "right columns ['name'] clash with left columns of the same name",
        "set 'right_prefix: <prefix>_' or choose other right_columns",
    )

    spec = shop_spec(lake, tmp_path, extra="      right_prefix: merchant_\n")
    assert lake.run(spec, checks=False).outcome.value == "committed"
    assert (
        lake.output(spec)
        == lake.expected(spec)
        == [
            {"product_id": "p1", "name": "pen", "price": 1.0, "merchant_id": "m1", "merchant_name": "Acme"},
        ]
    )


# --- sources that cannot be read the way the view needs -------------------------------------------


def test_a_source_without_change_data_feed(lake):
    """A source without CDF: ChangeFeedMissingError naming the table, with the ALTER TABLE that
    fixes it; following the fix works."""
    lake.create("merchants", MERCHANTS, [ACME])
    lake.create("products", PRODUCTS, [PEN], cdf=False)
    spec = lake.spec("left")
    with pytest.raises(ChangeFeedMissingError) as exc:
        lake.run(spec)
    path = lake.path("products")
    assert_says(
        message_of(exc),
        f"view '{VIEW}', source 'products' ({path})",
        f"table {path} has no Change Data Feed",
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)",
        "--full-refresh",
    )

    lake.spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    assert lake.run(spec, full_refresh=True, checks=False).outcome.value == "committed"
    assert lake.output(spec) == lake.expected(spec)


def test_a_vacuumed_change_range_asks_for_a_full_refresh(lake):
    """Changes that VACUUM removed: ChangesUnreadableError naming the source, path and versions,
    asking for --full-refresh; the full refresh then recovers.

    Appends are read back from their data files, which stay while the rows are live, so VACUUM
    does not break them. Updates and deletes keep their change rows in `_change_data` (and whole-
    file deletes in removed data files); VACUUM with retention 0 deletes those files at once.
    """
    from delta.tables import DeltaTable

    lake.create("merchants", MERCHANTS, [ACME])
    lake.create("products", PRODUCTS, [PEN, CUP])
    spec = lake.spec("left")
    first = lake.run(spec, checks=False)
    lake.upsert("products", "product_id", [("p1", "pen 2", 1.5, "m1")])
    lake.delete("products", "product_id", ["p2"])
    DeltaTable.forPath(lake.spark, lake.path("products")).vacuum(0)

    with pytest.raises(ChangesUnreadableError) as exc:
        lake.run(spec)
    start = first.pinned_versions["products"] + 1
    last = DeltaTable.forPath(lake.spark, lake.path("products")).history(1).first()["version"]
    assert_says(
        message_of(exc),
        f"view '{VIEW}', source 'products' ({lake.path('products')})",
        f"the changes of {lake.path('products')} between versions {start} and {last} can no longer be read",
        "vacuumed files",
        "--full-refresh",
    )

    assert lake.run(spec, full_refresh=True).outcome.value == "committed"
    assert (
        lake.output(spec)
        == lake.expected(spec)
        == [
            {
                "product_id": "p1",
                "name": "pen 2",
                "price": 1.5,
                "merchant_id": "m1",
                "display_name": "Acme",
                "photo_url": "a.png",
            },
        ]
    )
    assert lake.run(spec).outcome.value == "skipped"


def test_a_renamed_column_the_view_does_not_read_asks_for_a_full_refresh(lake):
    """A merchants column the view does not read, renamed (column mapping) after a change: the
    view's definition is the same, so the next batch reads the change feed, which Delta does not
    read across the rename (a rename at the range's first version it does). ChangesUnreadableError
    names the source, the versions and the full refresh, which then recovers (issue 51)."""
    lake.create("merchants", MERCHANTS, [ACME])
    lake.create("products", PRODUCTS, [PEN, CUP])
    path = lake.path("merchants")
    lake.spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
        "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')"
    )
    spec = lake.spec("left", right_columns="[display_name]")
    first = lake.run(spec, checks=False)
    lake.upsert("merchants", "merchant_id", [("m1", "Acme Ltd", "a2.png")])
    lake.spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN photo_url TO picture_url")

    with pytest.raises(ChangesUnreadableError) as exc:
        lake.run(spec, checks=False)
    start = first.pinned_versions["merchants"] + 1
    assert_says(
        message_of(exc),
        f"view '{VIEW}', source 'merchants' ({path})",
        f"a column of {path} was renamed, dropped or changed its type between versions {start} and",
        f"{start + 1}, and Delta reads no Change Data Feed across such a change",
        "--full-refresh",
    )

    assert lake.run(spec, full_refresh=True, checks=False).outcome.value == "committed"
    assert lake.output(spec) == lake.expected(spec)
    assert lake.output(spec)[0]["display_name"] == "Acme Ltd"


DUPLICATES = {
    "products": ("product_id", ("p1", "pen copy", 9.0, "m1"), "'p1'"),
    "merchants": ("merchant_id", ("m1", "Acme copy", "c.png"), "'m1'"),
}


@pytest.mark.parametrize("on_driver", ["true", "false"], ids=["driver_lookup", "spark_lookup"])
@pytest.mark.parametrize("table", list(DUPLICATES))
def test_a_duplicate_key_in_a_source(lake, table, on_driver):
    """A second row with an existing key: DuplicateKeyError naming the key value, the source and
    the version, whether the batch looks its few keys up on the driver or with Spark."""
    from lakejoin.delta import lookups

    key, duplicate, shown = DUPLICATES[table]
    lake.create("merchants", MERCHANTS, [ACME])
    lake.create("products", PRODUCTS, [PEN])
    spec = lake.spec("left")
    lake.run(spec, checks=False)
    lake.append(table, [duplicate])
    lake.spark.conf.set(lookups.ENABLED, on_driver)
    try:
        with pytest.raises(DuplicateKeyError) as exc:
            lake.run(spec)
    finally:
        lake.spark.conf.unset(lookups.ENABLED)
    assert_says(
        message_of(exc),
        f"the key '{key}' is not unique: {key}={shown} (2 rows)",
        f"view '{VIEW}', source '{table}' ({lake.path(table)}) at version 2",
        "deduplicate the source table",
    )


NULL_KEYS = {
    "products": ("product_id", (None, "ghost", 0.0, "m1")),
    "merchants": ("merchant_id", (None, "Ghost", "g.png")),
}


@pytest.mark.parametrize("table", list(NULL_KEYS))
def test_a_null_key_in_the_changes(lake, table):
    """A null key in the changes of a source: NullKeyError naming the source and the versions."""
    key, ghost = NULL_KEYS[table]
    lake.create("merchants", MERCHANTS, [ACME])
    lake.create("products", PRODUCTS, [PEN])
    spec = lake.spec("left")
    lake.run(spec, checks=False)
    lake.append(table, [ghost])
    with pytest.raises(NullKeyError) as exc:
        lake.run(spec)
    assert_says(
        message_of(exc),
        f"changes between versions 2 and 2 hold a row whose key '{key}' is null",
        f"view '{VIEW}', source '{table}' ({lake.path(table)})",
        f"give every row a '{key}'",
    )


# --- a regression: a lakejoin bug found by this test ----------------------------------------------


@pytest.mark.parametrize("table", list(NULL_KEYS))
def test_a_null_key_in_the_first_snapshot(lake, table):
    """A null key in a source snapshot fails the first batch (a full refresh) as it fails an
    incremental one, on either side of the join.
    """
    key, ghost = NULL_KEYS[table]
    lake.create("merchants", MERCHANTS, [ACME] + ([ghost] if table == "merchants" else []))
    lake.create("products", PRODUCTS, [PEN] + ([ghost] if table == "products" else []))
    spec = lake.spec("left")
    with pytest.raises(NullKeyError) as exc:
        lake.run(spec, checks=False)
    assert_says(message_of(exc), f"'{key}'", f"source '{table}'", f"give every row a '{key}'")


def test_a_new_left_column_refreshes_the_view_with_it(lake, spark):
    """A new left column changes the view's definition (issue 35): the next batch refreshes in
    full on its own, says why, and rewrites the output with the new column, equal to the oracle
    (`on_definition_change: fail` stops instead: tests/scenarios/test_definition_changes.py)."""
    lake.create("merchants", MERCHANTS, [ACME])
    lake.create("products", PRODUCTS, [PEN])
    spec = lake.spec("left")
    lake.run(spec, checks=False)
    spark.sql(f"ALTER TABLE delta.`{lake.path('products')}` ADD COLUMNS (colour STRING)")
    lake.upsert("products", "product_id", [("p1", "pen", 1.5, "m1", "red")])
    summary = lake.run(spec, checks=False)
    assert summary.mode is not None and summary.mode.value == "full_refresh"
    assert (
        summary.notes["definition"]
        == "definition changed since batch 1: products gained column 'colour' (string)"
    )
    assert "schema change" in summary.notes["output"]
    assert lake.output(spec) == lake.expected(spec)
    assert lake.output(spec)[0]["colour"] == "red"


# --- list_join and rekey: the spec against the tables ------------------------------------------


@pytest.fixture(scope="module")
def kind_tables(spark, tmp_path_factory):
    lake = Lakehouse(spark, tmp_path_factory.mktemp("kinds"))
    lake.create(
        "persons",
        "person_id STRING, name STRING, address_ids ARRAY<STRING>, home STRING, numbers ARRAY<INT>",
        [("P1", "Ada", ["a1"], "a1", [1])],
    )
    lake.create("addresses", "address_id STRING, street STRING", [("a1", "1 Elm")])
    lake.create("merchants", "merchant_id STRING, display_name STRING", [("m1", "Acme")])
    return lake


def kinds_spec(
    tables: Lakehouse, folder: Path, *, list_column: str = "address_ids", rekey: str = "display_name"
):
    file = folder / "lake.yaml"
    file.write_text(
        LIST_AND_REKEY.format(
            store=folder / "store",
            persons=tables.path("persons"),
            addresses=tables.path("addresses"),
            merchants=tables.path("merchants"),
            list=list_column,
            rekey=rekey,
        )
    )
    return load_spec(file)


@pytest.mark.parametrize(
    "column, phrases",
    [
        (
            "home",
            [
                "list column 'home' of the left table 'persons' is string, not an array",
                "store the element keys as an array<string>",
            ],
        ),
        (
            "numbers",
            [
                "list column 'numbers' is array<int> but the right key 'addresses.address_id' is string",
                "make the list an array<string> in the source table",
            ],
        ),
        (
            "phones",
            [
                "list column 'phones' is not in the left table 'persons'",
                "use one of its columns: person_id, name, address_ids, home, numbers",
            ],
        ),
    ],
)
def test_a_list_column_that_is_not_a_list_of_right_keys(kind_tables, tmp_path, column, phrases):
    spec = kinds_spec(kind_tables, tmp_path, list_column=column)
    with pytest.raises(SpecError) as exc:
        kind_tables.run(spec, "person_addresses")
    assert (exc.value.line, exc.value.key) == (11, "views.person_addresses.list_join.list")
    assert_says(message_of(exc), f"{spec.file}:11", *phrases)
    assert not Path(spec.views["person_addresses"].path).exists()


def test_a_rekey_column_that_does_not_exist(kind_tables, tmp_path):
    spec = kinds_spec(kind_tables, tmp_path, rekey="trading_name")
    with pytest.raises(SpecError) as exc:
        kind_tables.run(spec, "merchants_by_name")
    assert (exc.value.line, exc.value.key) == (17, "views.merchants_by_name.rekey.key")
    assert_says(
        message_of(exc),
        f"{spec.file}:17",
        "rekey column 'trading_name' is not in the master table 'merchants'",
        "use one of its columns: merchant_id, display_name",
    )
    assert not Path(spec.views["merchants_by_name"].path).exists()
