"""Property: incremental == recompute after every batch, for list_join and rekey (issue 3).

Hypothesis draws an initial state over tiny key alphabets (so lists share elements, elements
dangle, derived keys collide) and then four more batches (five in all) of Delta commits:
upserts, deletes (also of keys that do not exist), several changes to one key inside one batch,
and (rekey) masters written back unchanged by Spark's or delta-rs's MERGE or an overwrite, which
must not renew a claim (issue 36: the oracle's versions are those of changes of content).
list_join histories draw the duplicates policy (keep or drop); rekey histories draw `on_conflict: latest` or
`unique: false`. After every batch the view must equal its plain-Python oracle at the batch's
pinned versions, and its join health totals (issue 40) a plain-Python recount.

    LAKEJOIN_HYPOTHESIS_EXAMPLES=25 pytest tests/properties/test_properties_list_rekey.py
"""

from __future__ import annotations

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from tests.histories import (
    CHECKS_EVERY,
    apply,
    batches,
    deletes,
    example_lake,
    examples,
    lookup_path,
    replaces,
    rewrites,
    rows_of,
    upserts,
)
from tests.lakehouse import (
    ADDRESSES,
    MASTERS,
    PERSONS,
    Lakehouse,
    health_recount,
    list_join_oracle,
    output_rows,
    rekey_oracle,
    write_spec,
)

pytestmark = pytest.mark.property

PERSON_KEYS = tuple(f"P{i}" for i in range(6))
ADDRESS_KEYS = tuple(f"a{i}" for i in range(5))
ELEMENTS = (*ADDRESS_KEYS, "a9")  # a9 is never an address: an element that stays unmatched
MERCHANT_KEYS = tuple(f"m{i}" for i in range(6))
KEYS = {"persons": "person_id", "addresses": "address_id", "merchants": "merchant_id"}


def run_history(lake: Lakehouse, spec, view: str, history: tuple, oracle) -> None:  # noqa: ANN001
    for number, batch in enumerate(((), *history)):
        note(f"batch {number}: {list(batch)}")
        for step in batch:
            apply(lake, step, KEYS)
        with lookup_path(lake.spark, number):
            summary = lake.run(spec, view, checks=number % CHECKS_EVERY == 0)
        note(f"  -> {summary.outcome.value}, pinned {summary.pinned_versions}")
        assert output_rows(lake, spec, view) == oracle(lake, spec, view), f"after batch {number}"
        health = health_recount(lake, spec, view)  # join health's totals, carried batch to batch
        assert health["logged"] == health["counted"], f"join health after batch {number}"


# --- list_join --------------------------------------------------------------------------------

element_lists = st.one_of(st.none(), st.lists(st.sampled_from(ELEMENTS), max_size=5))
person_values = st.tuples(st.sampled_from(["Ada", "Bob"]), element_lists)
address_values = st.tuples(st.sampled_from(["1 Elm", "2 Oak", "3 Ash"]), st.sampled_from(["Oslo", None]))
list_steps = st.one_of(
    upserts("persons", PERSON_KEYS, person_values),
    upserts("addresses", ADDRESS_KEYS, address_values),
    deletes("persons", PERSON_KEYS),
    deletes("addresses", ADDRESS_KEYS),
)


@examples(1)
@given(
    duplicates=st.sampled_from(["keep", "drop"]),
    # 0 recomputes in full whenever an address change reaches a list, 1 never does.
    threshold=st.sampled_from([0.0, 0.2, 1.0]),
    persons=st.dictionaries(st.sampled_from(PERSON_KEYS), person_values, min_size=2, max_size=6),
    addresses=st.dictionaries(st.sampled_from(ADDRESS_KEYS), address_values, min_size=1, max_size=5),
    history=batches(list_steps),
)
def test_list_join_incremental_equals_recompute(
    spark, tmp_path, duplicates, threshold, persons, addresses, history
):
    lake = example_lake(spark, tmp_path)
    lake.create("persons", PERSONS, list(rows_of(persons)))
    lake.create("addresses", ADDRESSES, list(rows_of(addresses)))
    views = f"""\
  person_addresses:
    list_join: {{left: persons, list: address_ids, right: addresses, into: addresses,
                duplicates: {duplicates}, fanout_threshold: {threshold}, fanout_min_rows: 0}}
"""
    spec = write_spec(lake, {"persons": "person_id", "addresses": "address_id"}, views)
    run_history(lake, spec, "person_addresses", history, list_join_oracle)


# --- rekey ------------------------------------------------------------------------------------

master_values = st.tuples(
    st.sampled_from(["Acme", "Bolt", "Cord", None]), st.sampled_from(["NO", "SE"]), st.just("x.png")
)
rekey_steps = st.one_of(
    upserts("merchants", MERCHANT_KEYS, master_values),
    deletes("merchants", MERCHANT_KEYS),
    rewrites("merchants", MERCHANT_KEYS),
    replaces("merchants"),
)


@examples(1)
@given(
    policy=st.sampled_from(["on_conflict: latest", "unique: false"]),
    merchants=st.dictionaries(st.sampled_from(MERCHANT_KEYS), master_values, min_size=2, max_size=6),
    history=batches(rekey_steps),
)
def test_rekey_incremental_equals_recompute(spark, tmp_path, policy, merchants, history):
    lake = example_lake(spark, tmp_path)
    lake.create("merchants", MASTERS, list(rows_of(merchants)))
    views = f"""\
  merchants_by_name:
    rekey: {{source: merchants, key: display_name, columns: [country], {policy}}}
"""
    spec = write_spec(lake, {"merchants": "merchant_id"}, views)
    run_history(lake, spec, "merchants_by_name", history, rekey_oracle)
