"""Bad input gives a clear typed error: what was wrong, where (spec file and line, or source,
path and version), and what to do next. Never silent data loss (DESIGN §1, last rule)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakejoin.errors import (
    ChangeFeedMissingError,
    ChangesUnreadableError,
    DuplicateKeyError,
    NullKeyError,
    SpecError,
)
from lakejoin.spec.model import SparkRun
from lakejoin.spec.parse import load_spec, parse_spec
from tests.lakehouse import MERCHANTS, PRODUCTS, Lakehouse

ROOT = Path(__file__).resolve().parents[2]
VIEW = "display_products"
ACME = ("m1", "Acme", "a.png")
PEN, CUP = ("p1", "pen", 1.0, "m1"), ("p2", "cup", 2.0, "m1")


def message_of(exc: pytest.ExceptionInfo) -> str:
    return " ".join(str(exc.value).split())


def assert_says(text: str, *phrases: str) -> None:
    missing = [p for p in phrases if p not in text]
    assert not missing, f"{missing} not in: {text}"


# --- malformed specs: no Spark needed ------------------------------------------------------------

GOOD = """\
pipeline: shop
storage: ./store
sources:
  products: {path: ./products, key: product_id}
  merchants: {path: ./merchants, key: merchant_id}
views:
  display_products:
    fk_join:
      left: products
      right: merchants
      fk: merchant_id
      how: left
"""
FK_JOIN = "views.display_products.fk_join"

MALFORMED = {
    # name: (replace this, with that), line, key, phrases of the message (what, fix)
    "unknown source in a view": (
        ("right: merchants", "right: sellers"),
        10,
        f"{FK_JOIN}.right",
        ["unknown source 'sellers'", "declare it under 'sources:'", "use one of: merchants, products"],
    ),
    "unknown how": (
        ("how: left", "how: outer"),
        12,
        f"{FK_JOIN}.how",
        ["unknown join type 'outer'", "use one of: inner, left"],
    ),
    "duplicate view name": (
        ("how: left\n", "how: left\n  display_products:\n    fk_join: {left: products, right: merchants}\n"),
        13,
        "views.display_products",
        ["'display_products' appears twice", "keep one entry per name"],
    ),
    "missing key of a source": (
        ("{path: ./products, key: product_id}", "{path: ./products}"),
        4,
        "sources.products.key",
        ["'key' is required", "add 'key: ...' under 'sources.products'"],
    ),
    "invalid YAML (a tab)": (
        ("  merchants:", "\tmerchants:"),
        5,
        "<document>",
        ["not valid YAML", "cannot start any token", "fix the YAML syntax at that line"],
    ),
    "SQL in an identifier": (
        ("fk: merchant_id", 'fk: "x; DROP TABLE y"'),
        11,
        f"{FK_JOIN}.fk",
        ["'x; DROP TABLE y' is not a valid name", "use letters, digits and '_' only"],
    ),
    "a fan-out threshold above 1": (
        ("how: left\n", "how: left\n      fanout_threshold: 1.5\n"),
        13,
        f"{FK_JOIN}.fanout_threshold",
        ["'fanout_threshold' must be a number from 0 to 1, found 1.5", "the default is 0.2"],
    ),
    "unknown view kind": (
        ("    fk_join:", "    fk_joins:"),
        8,
        "views.display_products.fk_joins",
        ["unknown view kind 'fk_joins'", "use one of: fk_join"],
    ),
    "unknown way to run Spark": (
        ("storage: ./store\n", "storage: ./store\nspark: {run: cluster}\n"),
        3,
        "spark.run",
        ["unknown way to run Spark 'cluster'", "use 'local'", "or 'submit'"],
    ),
    "a Spark connection without run: submit": (
        ("storage: ./store\n", "storage: ./store\nspark:\n  conn_id: spark_default\n"),
        4,
        "spark.conn_id",
        ["'conn_id' applies only to 'run: submit'", "add 'run: submit'"],
    ),
    "a master with run: submit": (
        ("storage: ./store\n", "storage: ./store\nspark:\n  run: submit\n  master: spark://m:7077\n"),
        5,
        "spark.master",
        ["'master' does not apply to 'run: submit'", "connection 'spark_default'", "remove 'master'"],
    ),
    "unknown top-level setting": (
        ("storage: ./store\n", "storage: ./store\nschedul: daily\n"),
        3,
        "schedul",
        ["unknown setting 'schedul'", "use one of: pipeline, schedule, sources, spark, storage, views"],
    ),
}


@pytest.mark.unit
def test_the_good_spec_parses():
    spec = parse_spec(GOOD, "pipelines/shop.yaml")
    assert spec.views[VIEW].fk_join.how.value == "left"
    assert spec.views[VIEW].fk_join.fanout_threshold == 0.2


@pytest.mark.unit
def test_the_spark_block_says_how_tasks_run_spark():
    local = parse_spec(GOOD, "pipelines/shop.yaml").spark
    assert (local.run, local.master) == (SparkRun.LOCAL, None)
    submit = parse_spec(GOOD + "spark: {run: submit, conn_id: cluster}\n", "pipelines/shop.yaml").spark
    assert (submit.run, submit.conn_id) == (SparkRun.SUBMIT, "cluster")
    assert parse_spec(GOOD + "spark: {run: submit}\n", "x.yaml").spark.conn_id == "spark_default"


@pytest.mark.unit
@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_spec_names_the_line_and_the_key(case):
    """A malformed spec raises SpecError pointing at file, line and key, with a fix."""
    (old, new), line, key, phrases = MALFORMED[case]
    assert old in GOOD
    with pytest.raises(SpecError) as exc:
        parse_spec(GOOD.replace(old, new, 1), "pipelines/shop.yaml")
    assert (exc.value.line, exc.value.key) == (line, key)
    assert_says(message_of(exc), f"pipelines/shop.yaml:{line} (at '{key}')", *phrases, "fix:")


@pytest.mark.unit
def test_load_spec_names_the_file(tmp_path):
    file = tmp_path / "shop.yaml"
    file.write_text(GOOD.replace("how: left", "how: full"))
    with pytest.raises(SpecError) as exc:
        load_spec(file)
    assert (exc.value.file, exc.value.line, exc.value.key) == (str(file), 12, f"{FK_JOIN}.how")
    assert_says(message_of(exc), f"{file}:12", "unknown join type 'full'", "use one of: inner, left")

    with pytest.raises(SpecError) as exc:
        load_spec(tmp_path / "missing.yaml")
    assert_says(message_of(exc), "missing.yaml", "cannot read the spec", "check the path")


@pytest.mark.e2e
def test_the_cli_prints_a_spec_error_without_a_traceback(tmp_path):
    """`lakejoin run` on a malformed spec exits 2 with the error, its place and its fix, and no
    Python traceback; no Spark starts for a spec error."""
    file = tmp_path / "shop.yaml"
    file.write_text(GOOD.replace("right: merchants", "right: sellers"))
    result = subprocess.run(
        [sys.executable, "-m", "lakejoin.cli", "run", str(file)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "300", "GX_ANALYTICS_ENABLED": "False"},
    )
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2, output
    assert_says(
        output,
        "SpecError",
        f"{file}:10",
        f"{FK_JOIN}.right",
        "unknown source 'sellers'",
        "declare it under 'sources:'",
    )
    assert "Traceback" not in output
    assert "starting Spark" not in output


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


@pytest.mark.delta
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


@pytest.mark.delta
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


@pytest.mark.delta
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


@pytest.mark.delta
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


@pytest.mark.delta
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


@pytest.mark.delta
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


@pytest.mark.delta
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


@pytest.mark.delta
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


@pytest.mark.delta
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


@pytest.mark.delta
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


# --- regressions: both were lakejoin bugs found by these tests ------------------------------------


@pytest.mark.unit
def test_a_missing_colon_is_reported_on_its_own_line():
    """A missing ':' is reported on the line of the key that lacks it, not the next one.

    PyYAML's problem_mark is where the scanner gave up (the next line); its context_mark
    ("while scanning a simple key") is the line the user must fix.
    """
    with pytest.raises(SpecError) as exc:
        parse_spec(GOOD.replace("storage: ./store", "storage ./store"), "pipelines/shop.yaml")
    assert "could not find expected ':'" in str(exc.value)
    assert exc.value.line == 2


@pytest.mark.delta
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


@pytest.mark.delta
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

LIST_AND_REKEY = """\
pipeline: lake
storage: {store}
sources:
  persons: {{path: {persons}, key: person_id}}
  addresses: {{path: {addresses}, key: address_id}}
  merchants: {{path: {merchants}, key: merchant_id}}
views:
  person_addresses:
    list_join:
      left: persons
      list: {list}
      right: addresses
      into: addresses
  merchants_by_name:
    rekey:
      source: merchants
      key: {rekey}
"""


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


@pytest.mark.delta
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


@pytest.mark.delta
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


@pytest.mark.unit
@pytest.mark.parametrize(
    "old, new, line, key, phrases",
    [
        (
            "      into: addresses\n",
            "      into: addresses\n      duplicates: first\n",
            14,
            "views.person_addresses.list_join.duplicates",
            ["unknown duplicates 'first'", "use one of: keep, drop"],
        ),
        (
            "      into: addresses\n",
            "      into: addresses\n      fanout_threshold: -0.1\n",
            14,
            "views.person_addresses.list_join.fanout_threshold",
            ["'fanout_threshold' must be a number from 0 to 1, found -0.1", "the default is 0.2"],
        ),
        (
            "      key: {rekey}\n",
            "      key: {rekey}\n      unique: false\n      on_conflict: latest\n",
            19,
            "views.merchants_by_name.rekey.on_conflict",
            ["on_conflict applies only to a unique rekey", "remove on_conflict, or set 'unique: true'"],
        ),
        (
            "      key: {rekey}\n",
            "      key: {rekey}\n      on_conflict: newest\n",
            18,
            "views.merchants_by_name.rekey.on_conflict",
            ["unknown on_conflict 'newest'", "use one of: fail, latest"],
        ),
    ],
)
def test_a_malformed_list_join_or_rekey_names_the_line(old, new, line, key, phrases):
    text = LIST_AND_REKEY.replace(old, new).format(
        store="./s", persons="./p", addresses="./a", merchants="./m", list="address_ids", rekey="display_name"
    )
    with pytest.raises(SpecError) as exc:
        parse_spec(text, "pipelines/lake.yaml")
    assert (exc.value.line, exc.value.key) == (line, key)
    assert_says(message_of(exc), f"pipelines/lake.yaml:{line}", *phrases, "fix:")


@pytest.mark.unit
def test_a_list_join_falls_back_above_a_fifth_of_the_left_rows_by_default():
    text = LIST_AND_REKEY.format(
        store="./s", persons="./p", addresses="./a", merchants="./m", list="address_ids", rekey="display_name"
    )
    assert parse_spec(text, "pipelines/lake.yaml").views["person_addresses"].list_join.fanout_threshold == 0.2
