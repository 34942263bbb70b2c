"""Property: after every batch of a random change history, incremental == recompute (DESIGN §1).

Hypothesis draws an initial state of merchants (right) and products (left) over tiny key
alphabets, so keys collide, fks move and dangle, and then at least five batches of Delta commits:
upserts (inserts, updates, fk moves, fk -> None), deletes (also of keys that do not exist), several
changes to one key inside one batch, delete then re-insert. The first two batches are built to
hold the events that matter most (an fk move, a right delete with dependents, the re-insert of
that right row, a change to the merchant an fk moved away from, a left delete + re-insert), so
even the three examples CI runs are meaningful. Each history also draws the join type (left or
inner). After every batch, the view must equal the plain-Python oracle at the batch's pinned
versions.

    LAKEJOIN_HYPOTHESIS_EXAMPLES=25 pytest tests/test_properties.py     # a longer search
    LAKEJOIN_HYPOTHESIS_SHRINK=1 ...                                     # shrink a failure (slow)
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from tests.lakehouse import MERCHANTS, PRODUCTS, Lakehouse

pytestmark = pytest.mark.property

MERCHANT_KEYS = tuple(f"m{i}" for i in range(5))
FKS = (None, *MERCHANT_KEYS, "m5")  # m5 is never a merchant: an fk that stays unmatched
PRODUCT_KEYS = tuple(f"p{i}" for i in range(8))
KEYS = {"products": "product_id", "merchants": "merchant_id"}

EXAMPLES = int(os.environ.get("LAKEJOIN_HYPOTHESIS_EXAMPLES", "3"))
# Every example costs minutes of Spark; shrinking a failure would take hours, so it is opt-in.
PHASES = (Phase.explicit, Phase.generate) + (
    (Phase.shrink,) if os.environ.get("LAKEJOIN_HYPOTHESIS_SHRINK") else ()
)
CHECKS_EVERY = 3  # Great Expectations on the first run and every third batch: they cost seconds


@dataclass(frozen=True)
class Step:
    """One Delta commit on one source: upsert `rows`, or delete the rows with keys `rows`."""

    table: str
    kind: str
    rows: tuple

    def __repr__(self) -> str:
        return f"{self.kind} {self.table} {list(self.rows)}"


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


def _rows(values: dict) -> tuple:
    return tuple((key, *value) for key, value in sorted(values.items()))


def _upserts(table: str, keys: tuple[str, ...], values: st.SearchStrategy) -> st.SearchStrategy[Step]:
    # One MERGE needs unique keys; changes to one key inside a batch come from several steps.
    return st.dictionaries(st.sampled_from(keys), values, min_size=1, max_size=3).map(
        lambda rows: Step(table, "upsert", _rows(rows))
    )


def _deletes(table: str, keys: tuple[str, ...]) -> st.SearchStrategy[Step]:
    return st.sets(st.sampled_from(keys), min_size=1, max_size=2).map(
        lambda doomed: Step(table, "delete", tuple(sorted(doomed)))
    )


random_steps = st.one_of(
    _upserts("products", PRODUCT_KEYS, product_values),
    _upserts("merchants", MERCHANT_KEYS, merchant_values),
    _deletes("products", PRODUCT_KEYS),
    _deletes("merchants", MERCHANT_KEYS),
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
        Step("merchants", "upsert", _rows(returning)),
        Step("products", "delete", (anchor,)),
        Step("products", "upsert", ((anchor, *draw(product_values)),)),
    )
    rest = draw(st.lists(random_batches, min_size=3, max_size=3))
    return History(how, _rows(merchants), _rows(products), (first, second, *rest))


def apply(lake: Lakehouse, step: Step) -> None:
    if step.kind == "upsert":
        lake.upsert(step.table, KEYS[step.table], list(step.rows))
    else:
        lake.delete(step.table, KEYS[step.table], list(step.rows))


_example_number = itertools.count()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    phases=PHASES,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=histories())
def test_incremental_equals_recompute_after_every_batch(spark, tmp_path, history: History):
    # tmp_path is shared by all examples of this test: every example gets a lakehouse of its own.
    root = tmp_path / f"example-{next(_example_number)}"
    root.mkdir()
    lake = Lakehouse(spark, root)
    lake.create("merchants", MERCHANTS, list(history.merchants))
    lake.create("products", PRODUCTS, list(history.products))
    spec = lake.spec(history.how)

    for number, batch in enumerate(((), *history.batches)):
        note(f"batch {number}: {list(batch)}")
        for step in batch:
            apply(lake, step)
        summary = lake.run(spec, checks=number % CHECKS_EVERY == 0)
        note(f"  -> {summary.outcome.value}, pinned {summary.pinned_versions}")
        assert lake.output(spec) == lake.expected(spec), f"{history.how} join after batch {number}"
