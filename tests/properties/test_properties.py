"""Property: after every batch of a random change history, incremental == recompute (DESIGN §1).

Hypothesis draws an initial state of merchants (right) and products (left) over tiny key
alphabets, so keys collide, fks move and dangle, and then at least five batches of Delta commits:
upserts (inserts, updates, fk moves, fk -> None), deletes (also of keys that do not exist), several
changes to one key inside one batch, delete then re-insert, rows written back unchanged by Spark
or delta-rs (issue 36). The first two batches are built to hold the events that matter most (an
fk move, a right delete with dependents, the re-insert of that right row, a change to the
merchant an fk moved away from, a left delete + re-insert), so even the two examples CI runs are
meaningful. Each history also draws the join type (left or
inner). After every batch, the view must equal the plain-Python oracle at the batch's pinned
versions, and its join health totals (issue 40) a plain-Python recount.

    LAKEJOIN_HYPOTHESIS_EXAMPLES=25 pytest tests/properties/test_properties.py     # a longer search
    LAKEJOIN_HYPOTHESIS_SHRINK=1 ...                                     # shrink a failure (slow)
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from tests.histories import (
    Step,
    apply,
    deletes,
    example_lake,
    examples,
    lookup_path,
    replaces,
    rewrites,
    rows_of,
    upserts,
)
from tests.lakehouse import MERCHANTS, PRODUCTS, health_recount

pytestmark = pytest.mark.property

MERCHANT_KEYS = tuple(f"m{i}" for i in range(5))
FKS = (None, *MERCHANT_KEYS, "m5")  # m5 is never a merchant: an fk that stays unmatched
PRODUCT_KEYS = tuple(f"p{i}" for i in range(8))
KEYS = {"products": "product_id", "merchants": "merchant_id"}

CHECKS_EVERY = 3  # Great Expectations on the first run and every third batch: they cost seconds


@dataclass(frozen=True)
class History:
    how: str
    merchants: tuple
    products: tuple
    batches: tuple[tuple[Step, ...], ...]


merchant_values = st.tuples(
    st.sampled_from(["Acme", "Bolt", "Cask"]), st.sampled_from([None, "a.png", "b.png"])
)
product_values = st.tuples(
    st.sampled_from(["pen", "cup", "lid"]), st.integers(1, 3).map(float), st.sampled_from(FKS)
)


random_steps = st.one_of(
    upserts("products", PRODUCT_KEYS, product_values),
    upserts("merchants", MERCHANT_KEYS, merchant_values),
    deletes("products", PRODUCT_KEYS),
    deletes("merchants", MERCHANT_KEYS),
    rewrites("products", PRODUCT_KEYS),
    rewrites("merchants", MERCHANT_KEYS),
    replaces("merchants"),
)
random_batches = st.lists(random_steps, min_size=1, max_size=3).map(tuple)


@st.composite
def histories(draw: st.DrawFn) -> History:
    # One join type per history: a view per type on every history would double the minutes.
    how = draw(st.sampled_from(["left", "inner"]))
    merchants = draw(st.dictionaries(st.sampled_from(MERCHANT_KEYS), merchant_values, min_size=2, max_size=5))
    products = draw(st.dictionaries(st.sampled_from(PRODUCT_KEYS), product_values, min_size=2, max_size=8))
    anchor, mover = draw(st.lists(st.sampled_from(sorted(products)), min_size=2, max_size=2, unique=True))
    doomed = draw(st.sampled_from(sorted(merchants)))
    name, price, _ = products[anchor]
    products[anchor] = (name, price, doomed)  # the right delete of batch 1 has a dependent
    name, price, old_fk = products[mover]
    new_fk = draw(st.sampled_from([fk for fk in FKS if fk != old_fk]))

    # Batch 1: an fk move (maybe to None or to a dangling key) and a right delete with dependents.
    first = (
        Step("products", "upsert", ((mover, name, price, new_fk),)),
        Step("merchants", "delete", (doomed,)),
        *draw(st.lists(random_steps, max_size=1)),
    )
    # Batch 2: the deleted right row comes back (joins again), the merchant the fk moved away from
    # changes (must not touch the mover), and a left row is deleted then re-inserted.
    returning = {doomed: draw(merchant_values)}
    if old_fk in MERCHANT_KEYS:
        returning[old_fk] = draw(merchant_values)
    second = (
        Step("merchants", "upsert", rows_of(returning)),
        Step("products", "delete", (anchor,)),
        Step("products", "upsert", ((anchor, *draw(product_values)),)),
    )
    rest = draw(st.lists(random_batches, min_size=3, max_size=3))
    return History(how, rows_of(merchants), rows_of(products), (first, second, *rest))


@examples(1)
@given(history=histories())
def test_incremental_equals_recompute_after_every_batch(spark, tmp_path, history: History):
    lake = example_lake(spark, tmp_path)
    lake.create("merchants", MERCHANTS, list(history.merchants))
    lake.create("products", PRODUCTS, list(history.products))
    spec = lake.spec(history.how)

    for number, batch in enumerate(((), *history.batches)):
        note(f"batch {number}: {list(batch)}")
        for step in batch:
            apply(lake, step, KEYS)
        with lookup_path(lake.spark, number):
            summary = lake.run(spec, checks=number % CHECKS_EVERY == 0)
        note(f"  -> {summary.outcome.value}, pinned {summary.pinned_versions}")
        assert lake.output(spec) == lake.expected(spec), f"{history.how} join after batch {number}"
        health = health_recount(lake, spec, "display_products")  # totals carried batch to batch
        assert health["logged"] == health["counted"], f"{history.how} join health after batch {number}"
