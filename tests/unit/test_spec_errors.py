"""A malformed spec gives a clear typed error (SpecError): the file, the line and the key, what
was wrong, and what to do next. The spec alone, with no table behind it: a spec that does not fit
its tables is checked when a batch plans (tests/delta/test_bad_input.py)."""

from __future__ import annotations

import pytest

from lakejoin.errors import SpecError
from lakejoin.spec.model import SparkRun
from lakejoin.spec.parse import load_spec, parse_spec
from tests.spec_texts import FK_JOIN, GOOD, LIST_AND_REKEY, VIEW, assert_says, message_of

pytestmark = pytest.mark.unit

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


def test_the_good_spec_parses():
    spec = parse_spec(GOOD, "pipelines/shop.yaml")
    assert spec.views[VIEW].fk_join.how.value == "left"
    assert spec.views[VIEW].fk_join.fanout_threshold == 0.2


def test_the_spark_block_says_how_tasks_run_spark():
    local = parse_spec(GOOD, "pipelines/shop.yaml").spark
    assert (local.run, local.master) == (SparkRun.LOCAL, None)
    submit = parse_spec(GOOD + "spark: {run: submit, conn_id: cluster}\n", "pipelines/shop.yaml").spark
    assert (submit.run, submit.conn_id) == (SparkRun.SUBMIT, "cluster")
    assert parse_spec(GOOD + "spark: {run: submit}\n", "x.yaml").spark.conn_id == "spark_default"


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_spec_names_the_line_and_the_key(case):
    """A malformed spec raises SpecError pointing at file, line and key, with a fix."""
    (old, new), line, key, phrases = MALFORMED[case]
    assert old in GOOD
    with pytest.raises(SpecError) as exc:
        parse_spec(GOOD.replace(old, new, 1), "pipelines/shop.yaml")
    assert (exc.value.line, exc.value.key) == (line, key)
    assert_says(message_of(exc), f"pipelines/shop.yaml:{line} (at '{key}')", *phrases, "fix:")


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


# --- a regression: a lakejoin bug found by this test ----------------------------------------------


def test_a_missing_colon_is_reported_on_its_own_line():
    """A missing ':' is reported on the line of the key that lacks it, not the next one.

    PyYAML's problem_mark is where the scanner gave up (the next line); its context_mark
    ("while scanning a simple key") is the line the user must fix.
    """
    with pytest.raises(SpecError) as exc:
        parse_spec(GOOD.replace("storage: ./store", "storage ./store"), "pipelines/shop.yaml")
    assert "could not find expected ':'" in str(exc.value)
    assert exc.value.line == 2


# --- list_join and rekey -----------------------------------------------------------------------


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


def test_a_list_join_falls_back_above_a_fifth_of_the_left_rows_by_default():
    text = LIST_AND_REKEY.format(
        store="./s", persons="./p", addresses="./a", merchants="./m", list="address_ids", rekey="display_name"
    )
    assert parse_spec(text, "pipelines/lake.yaml").views["person_addresses"].list_join.fanout_threshold == 0.2
