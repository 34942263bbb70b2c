"""views/rekey.py's resolution of claims on in-memory frames: which master's row a derived key
keeps (`on_conflict: latest`: the latest change, then the greatest master key), which derived
keys are in conflict (what `on_conflict: fail` lists), and `unique: false` keeping every claim.

Dropping a null derived key and raising under `on_conflict: fail` happen inside
`RekeyView.rebuild`, which reads the index (a Delta table): the rule tests cover them."""

from __future__ import annotations

import pytest

from lakejoin.views.rekey import SINCE, conflicts, resolve
from tests.steps.frames import ordered, rows

pytestmark = pytest.mark.steps

CLAIMS = f"display_name string, merchant_id string, {SINCE} bigint, country string"


def claims(spark, claimed: list[tuple]):
    return spark.createDataFrame(claimed, CLAIMS)


@pytest.mark.parametrize(
    ("claimed", "kept"),
    [
        pytest.param([], [], id="no_claims"),
        pytest.param(
            [("Acme", "m1", 3, "FR"), ("Bolt", "m2", 1, "DE")],
            [("Acme", "m1", 3, "FR"), ("Bolt", "m2", 1, "DE")],
            id="one_master_each",
        ),
        pytest.param(
            [("Acme", "m2", 3, "FR"), ("Acme", "m1", 5, "DE")],
            [("Acme", "m1", 5, "DE")],
            id="latest_change_wins",
        ),
        pytest.param(
            [("Acme", "m1", 5, "FR"), ("Acme", "m2", 5, "DE")],
            [("Acme", "m2", 5, "DE")],
            id="tie_in_one_commit_greatest_master_key",
        ),
        pytest.param(
            [
                ("Acme", "m3", 7, "FR"),
                ("Acme", "m1", 2, "DE"),
                ("Acme", "m2", 7, "IT"),
                ("Bolt", "m4", 1, "ES"),
            ],
            [("Acme", "m3", 7, "FR"), ("Bolt", "m4", 1, "ES")],
            id="three_claims_and_another_key",
        ),
    ],
)
def test_a_unique_derived_key_keeps_the_latest_claim(spark, claimed, kept):
    resolved = resolve(claims(spark, claimed), ("display_name",), ("merchant_id",), unique=True)

    assert resolved.columns == ["display_name", "merchant_id", SINCE, "country"]
    assert rows(resolved) == ordered(kept)


def test_without_unique_every_claim_is_a_row(spark):
    claimed = [("Acme", "m1", 3, "FR"), ("Acme", "m2", 5, "DE"), ("Bolt", "m3", 1, "ES")]

    assert rows(
        resolve(claims(spark, claimed), ("display_name",), ("merchant_id",), unique=False)
    ) == ordered(claimed)


@pytest.mark.parametrize(
    ("claimed", "found"),
    [
        pytest.param([("Acme", "m1", 3, "FR"), ("Bolt", "m2", 1, "DE")], [], id="none"),
        pytest.param(
            [("Acme", "m2", 3, "FR"), ("Acme", "m1", 5, "DE"), ("Bolt", "m3", 1, "ES")],
            [("Acme", 2, ["m1", "m2"])],
            id="two_masters_listed_in_order",
        ),
        pytest.param(
            [
                ("Acme", "m1", 1, None),
                ("Acme", "m2", 1, None),
                ("Acme", "m3", 1, None),
                ("Bolt", "m4", 1, None),
            ]
            + [("Bolt", "m5", 2, None)],
            [("Acme", 3, ["m1", "m2", "m3"]), ("Bolt", 2, ["m4", "m5"])],
            id="every_key_claimed_twice",
        ),
    ],
)
def test_a_conflict_is_a_derived_key_several_masters_claim(spark, claimed, found):
    clashes = conflicts(claims(spark, claimed), ("display_name",), ("merchant_id",))

    assert rows(clashes, "display_name", "n", "masters") == ordered(found)
