"""`lakejoin explain`'s rules (spec/explained.py; the key parser in cli/explain_rules.py) as
truth tables: a key from the command line, a list's elements, what a commit did to a key, why a
key is not in a view, and which master a rekey kept. No table, no JVM."""

from __future__ import annotations

import datetime

import pytest

from lakejoin.cli.explain_rules import key_values
from lakejoin.errors import BatchStateError, CommandError
from lakejoin.spec.explained import (
    Absence,
    InputRow,
    Role,
    change_of,
    deleted_at,
    list_elements,
    rekey_choice,
    why_not_derived,
    why_not_joined,
)
from lakejoin.spec.model import JoinHow, Resolution

pytestmark = pytest.mark.unit

TYPES = {"order_id": "long", "line_no": "integer", "tenant": "string", "day": "date", "at": "timestamp"}


@pytest.mark.parametrize(
    ("key", "texts", "values"),
    [
        (("order_id",), ["7"], (7,)),
        (("order_id",), ["-7"], (-7,)),
        (("tenant",), ["o'neil"], ("o'neil",)),
        (("tenant", "line_no"), ["acme", "2"], ("acme", 2)),
        (("day",), ["2026-11-02"], (datetime.date(2026, 11, 2),)),
        (("tenant",), ["007"], ("007",)),  # a string stays as given
    ],
)
def test_each_key_value_takes_its_columns_type(key, texts, values):
    assert key_values("v", key, TYPES, texts) == values


def test_a_wrong_number_of_values_names_the_key_and_how_to_give_it():
    with pytest.raises(CommandError) as error:
        key_values("lines", ("tenant", "line_no"), TYPES, ["acme"])
    message = str(error.value)
    assert "view 'lines' is keyed by (tenant, line_no): 2 value(s) expected" in message
    assert "got 1: 'acme'" in message
    assert "lakejoin explain SPEC lines <tenant> <line_no>" in message


def test_a_key_column_the_output_lacks_says_the_definition_changed():
    with pytest.raises(BatchStateError) as error:
        key_values("lines", ("tenant", "line_no"), {"line_no": "integer"}, ["acme", "2"])
    message = str(error.value)
    assert "the output of view 'lines' has no column tenant of the key (tenant, line_no)" in message
    assert "fix: run the view" in message


@pytest.mark.parametrize(
    ("column", "text", "said"),
    [
        ("line_no", "two", "'two' is not of type integer"),
        ("order_id", "7.5", "'7.5' is not of type long"),
        ("day", "02/11/2026", "'02/11/2026' is not of type date"),
        (
            "at",
            "2026-11-02T10:00:00",
            "explain looks keys up by whole numbers, strings and dates; 'at' is a timestamp",
        ),
    ],
)
def test_a_value_that_does_not_convert_says_what_where_and_what_to_give(column, text, said):
    with pytest.raises(CommandError) as error:
        key_values("v", (column,), TYPES, [text])
    assert said in str(error.value)
    assert f"key column '{column}' ({TYPES[column]})" in str(error.value)
    assert "fix:" in str(error.value)


@pytest.mark.parametrize(
    ("listed", "key", "drop", "elements"),
    [
        (["a1", "a2", "a1"], ("address_id",), False, [("a1",), ("a2",), ("a1",)]),
        (["a1", "a2", "a1"], ("address_id",), True, [("a1",), ("a2",)]),
        (["a1", None, None], ("address_id",), True, [("a1",), None]),
        ([], ("address_id",), False, []),
        (None, ("address_id",), False, []),  # a null list gives an empty one
        (
            [{"tenant": "acme", "id": 1}, {"id": 2, "tenant": "o'neil"}, {"tenant": None, "id": 3}],
            ("tenant", "id"),
            False,
            [("acme", 1), ("o'neil", 2), (None, 3)],  # struct elements by name, in the key's order
        ),
    ],
)
def test_a_lists_elements_are_its_right_keys_in_order_under_the_duplicates_policy(
    listed, key, drop, elements
):
    assert list_elements(listed, key, drop=drop) == elements


@pytest.mark.parametrize(
    ("kinds", "change"),
    [
        (["insert"], "insert"),
        (["update_preimage", "update_postimage"], "update"),
        (["delete", "insert"], "update"),  # an overwrite that rewrote the key
        (["delete"], "delete"),
    ],
)
def test_what_one_commit_did_to_a_key(kinds, change):
    assert change_of(kinds) == change


def change(version: int, kind: str) -> dict:
    return {"_commit_version": version, "_change_type": kind}


@pytest.mark.parametrize(
    ("changes", "version"),
    [
        ([], None),
        ([change(1, "insert")], None),
        ([change(1, "insert"), change(4, "delete")], 4),
        ([change(1, "insert"), change(4, "delete"), change(6, "insert")], None),  # back again
        ([change(1, "insert"), change(5, "delete"), change(5, "insert")], None),  # an overwrite kept it
    ],
)
def test_a_missing_row_was_deleted_at_its_last_change_when_that_was_a_delete(changes, version):
    assert deleted_at(changes) == version


def left(row: dict | None, deleted: int | None = None) -> InputRow:
    return InputRow(Role.LEFT, "products", 6, {"product_id": "p1"}, row, deleted_at=deleted)


def right(row: dict | None, how: JoinHow, *, fk: str | None = "m1", deleted: int | None = None) -> InputRow:
    key = None if fk is None else {"merchant_id": fk}
    return InputRow(Role.RIGHT, "merchants", 3, key, row, how=how, deleted_at=deleted)


P1, M1 = {"product_id": "p1", "merchant_id": "m1"}, {"merchant_id": "m1", "display_name": "Acme"}


@pytest.mark.parametrize(
    ("inputs", "code", "said"),
    [
        (
            [left(None)],
            Absence.NO_LEFT_ROW,
            "no left row: products has no row with product_id='p1' at version 6",
        ),
        ([left(None, deleted=5)], Absence.NO_LEFT_ROW, "at version 6, deleted at version 5"),
        (
            [left(P1), right(None, JoinHow.INNER, fk=None)],
            Absence.NULL_FK,
            "merchants joins inner and the key",
        ),
        (
            [left(P1), right(None, JoinHow.INNER, deleted=2)],
            Absence.NO_RIGHT_ROW,
            "merchants joins inner and no row with merchant_id='m1' at version 3, deleted at version 2",
        ),
        # a left join keeps the row whatever the right side: its absence is the output's fault
        ([left(P1), right(None, JoinHow.LEFT)], Absence.DRIFT, "--full-refresh"),
        ([left(P1), right(M1, JoinHow.INNER)], Absence.DRIFT, "the output is not what its inputs derive"),
    ],
)
def test_why_an_fk_join_has_no_row(inputs, code, said):
    reason = why_not_joined(inputs)
    assert reason.code is code
    assert said in reason.text


def dimension(source: str, how: JoinHow, row: dict | None, fk: str | None = "k") -> InputRow:
    return InputRow(Role.DIMENSION, source, 2, None if fk is None else {"k": fk}, row, how=how)


FACT = InputRow(Role.FACT, "purchases", 9, {"purchase_id": "o1"}, {"purchase_id": "o1"})


def test_why_an_enrich_has_no_row_the_first_inner_dimension_that_misses_says():
    inputs = [
        FACT,
        dimension("customers", JoinHow.LEFT, None),  # left: kept with nulls
        dimension("products", JoinHow.INNER, {"k": "k"}),
        dimension("stores", JoinHow.INNER, None),
        dimension("regions", JoinHow.INNER, None, fk=None),
    ]
    reason = why_not_joined(inputs)
    assert (reason.code, reason.text.split(" ")[0]) == (Absence.NO_RIGHT_ROW, "stores")
    assert why_not_joined([FACT, inputs[-1]]).code is Absence.NULL_FK
    assert why_not_joined([InputRow(Role.FACT, "purchases", 9, {"purchase_id": "o1"}, None)]).code is (
        Absence.NO_FACT_ROW
    )


def test_a_lookup_enrich_whose_dimensions_match_now_was_left_out_by_the_batch_that_enriched_it():
    inputs = [FACT, dimension("products", JoinHow.INNER, {"k": "k"})]
    assert why_not_joined(inputs, lookup=True).code is Absence.NOT_REENRICHED
    assert why_not_joined(inputs, lookup=False).code is Absence.DRIFT


def test_a_list_join_row_is_missing_only_without_its_left_row():
    element = InputRow(Role.ELEMENT, "addresses", 3, {"address_id": "a9"}, None, how=JoinHow.LEFT, position=0)
    assert why_not_joined([left(None), element]).code is Absence.NO_LEFT_ROW
    assert why_not_joined([left(P1), element]).code is Absence.DRIFT  # an element is joined left


def master(key: str, row: dict | None, deleted: int | None = None) -> InputRow:
    return InputRow(Role.MASTER, "merchants", 7, {"merchant_id": key}, row, deleted_at=deleted)


@pytest.mark.parametrize(
    ("claimants", "claimed", "code", "said"),
    [
        ([], False, Absence.NO_MASTER_ROW, "no master row holds it"),
        (
            [master("m1", {"merchant_id": "m1", "display_name": None})],
            False,
            Absence.NULL_DERIVED_KEY,
            "master merchant_id='m1' held it; at version 7 its display_name is null",
        ),
        (
            [master("m1", {"merchant_id": "m1", "display_name": "Bolt"}), master("m2", None, deleted=5)],
            False,
            Absence.NO_MASTER_ROW,
            "merchant_id='m1' now holds display_name='Bolt'; merchant_id='m2' has no row at version 7 "
            "(deleted at version 5)",
        ),
        (
            [master("m1", {"merchant_id": "m1", "display_name": "Acme"})],
            True,
            Absence.DRIFT,
            "--full-refresh",
        ),
    ],
)
def test_why_a_rekey_has_no_row_for_a_derived_key(claimants, claimed, code, said):
    reason = why_not_derived(("display_name",), claimants, claimed=claimed)
    assert reason.code is code
    assert said in reason.text


def m(key: str) -> dict:
    return {"merchant_id": key}


@pytest.mark.parametrize(
    ("resolution", "claims", "chosen", "said"),
    [
        (Resolution.EVERY_CLAIM, [(m("m1"), None), (m("m2"), None)], [m("m1"), m("m2")], "unique: false"),
        (
            Resolution.FAIL,
            [(m("m1"), None)],
            [m("m1")],
            "the only master holding the derived key (on_conflict: fail)",
        ),
        (Resolution.LATEST, [(m("m1"), None)], [m("m1")], "the only master"),
        (
            Resolution.LATEST,
            [(m("m1"), 9), (m("m2"), 4), (m("m3"), 6)],
            [m("m1")],
            "merchant_id='m1' changed last (version 9",
        ),
        (Resolution.LATEST, [(m("m1"), 6), (m("m2"), 6)], [m("m2")], "on a tie the greatest master key"),
        (Resolution.LATEST, [(m("m1"), 6), (m("m2"), None)], [], "could not be read"),
    ],
)
def test_which_master_a_rekey_keeps_and_why(resolution, claims, chosen, said):
    kept, text = rekey_choice(resolution, claims)
    assert kept == chosen
    assert said in text


@pytest.mark.parametrize("resolution", [Resolution.LATEST, Resolution.FAIL])
def test_a_row_no_master_holds_is_drift_not_a_crash(resolution):
    kept, text = rekey_choice(resolution, [])
    assert kept == [] and "no master holds the derived key" in text


def test_an_input_version_gone_is_a_clear_error(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    from lakejoin.errors import SourceError
    from lakejoin.views.explained import read_rows

    write_deltalake(str(tmp_path), pa.table({"id": ["a"], "name": ["x"]}))
    with pytest.raises(SourceError) as raised:
        read_rows(str(tmp_path), 7, ("id",), [("a",)], "left 'products'")
    assert "version 7" in str(raised.value) and "--at" in raised.value.fix
    assert read_rows(str(tmp_path), 0, ("id",), [("a",)], "left 'products'") == [{"id": "a", "name": "x"}]


def test_a_keys_history_is_read_backwards_in_growing_windows(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    from lakejoin.views.explained import HISTORY_WINDOW, key_history

    path = str(tmp_path)
    write_deltalake(
        path, pa.table({"id": ["old"], "n": [0]}), configuration={"delta.enableChangeDataFeed": "true"}
    )
    for n in range(1, 3 * HISTORY_WINDOW):  # more commits than two windows
        write_deltalake(path, pa.table({"id": [f"k{n}"], "n": [n]}), mode="append")
    last = 3 * HISTORY_WINDOW - 1
    found = key_history(path, last, ("id",), ("old",))
    assert [(r["id"], r["_commit_version"]) for r in found] == [("old", 0)]
    assert [r["_commit_version"] for r in key_history(path, last, ("id",), (f"k{last}",))] == [last]
    assert [r["_commit_version"] for r in key_history(path, last, ("id",), ("k2",))] == [2]
    assert key_history(path, last, ("id",), ("never",)) == []
