"""engine/plan.py's decision, as a truth table: given where a view's batches stand (its output's
log, stood in for) and the versions its inputs are at now, the next batch refreshes in full, runs
incrementally, or skips, and says why. No Delta table is read."""

from __future__ import annotations

import pytest

from lakejoin.delta.markers import FINAL, BatchMarker
from lakejoin.delta.plans import BatchPlan, Skip, ViewBatches
from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus
from lakejoin.engine import plan
from lakejoin.views.enrich import EnrichView
from lakejoin.views.fk_join import FkJoinView
from lakejoin.views.rekey import RekeyView
from tests.unit.shop import shop

pytestmark = pytest.mark.unit

KINDS = {"display_products": FkJoinView, "merchants_by_name": RekeyView, "looked_up": EnrichView}
INC, FULL = BatchMode.INCREMENTAL, BatchMode.FULL_REFRESH


def committed(batch_id: int, pins: dict[str, int]) -> BatchRecord:
    return BatchRecord("v", batch_id, BatchStatus.COMMITTED, INC, {}, pins)


def decide(
    monkeypatch, view: str, batches: ViewBatches, now: dict[str, int], data: set[str],
    *, spec=None, columns: dict | None = None, **kw,
):  # noqa: ANN001  # fmt: skip
    """`plan_batch` of `view` where the output's log tells `batches`, the inputs are at versions
    `now`, and only the sources in `data` hold data commits since the last batch. The inputs'
    columns are each one's key, or `columns[input]`."""
    spec = spec or shop()
    columns = columns or {}
    asked: list[str] = []

    def latest_pin(spec, view, source, log, table=None):  # noqa: ANN001, ANN202, ARG001
        asked.append(source.name)
        return now[source.name]

    def may_hold_changes(path: str, after: int, upto: int, table=None) -> bool:  # noqa: ANN001, ARG001
        assert after < upto
        return path.rsplit("/", 1)[1] in data

    def input_columns(spec, view, kind, pinned):  # noqa: ANN001, ANN202, ARG001 - the schemas, fixed
        return {s.name: dict(columns.get(s.name, {c: "string" for c in s.key})) for s in kind.sources}

    def find_commit(path, wanted):  # noqa: ANN001, ANN202, ARG001 - the output's batch commits
        found = [m for m in COMMITS.values() if wanted(m)]
        return (1, found[-1], {}) if found else None

    monkeypatch.setattr(plan, "find_commit", find_commit)
    monkeypatch.setattr(plan, "view_batches", lambda *a, **k: batches)
    monkeypatch.setattr(plan, "input_columns", input_columns)
    monkeypatch.setattr(plan, "latest_pin", latest_pin)
    monkeypatch.setattr(plan, "may_hold_changes", may_hold_changes)
    kind = KINDS[view](spec, spec.views[view])
    return plan.plan_batch(spec, spec.views[view], kind, None, **kw), asked


PINS = {"products": 5, "merchants": 2}


@pytest.mark.parametrize(
    ("batches", "now", "data", "full_refresh", "expected"),
    [
        pytest.param(
            ViewBatches(None, 1),
            PINS,
            set(),
            False,
            BatchPlan("display_products", 1, FULL, {}, PINS),
            id="first_batch",
        ),
        pytest.param(
            ViewBatches(committed(3, PINS), 4),
            PINS,
            set(),
            False,
            Skip("no new versions since batch 3: products@5, merchants@2", PINS, PINS),
            id="nothing_moved",
        ),
        pytest.param(
            ViewBatches(committed(3, PINS), 4),
            {"products": 6, "merchants": 2},
            set(),
            False,
            Skip(
                "nothing new since batch 3: only maintenance commits (VACUUM, OPTIMIZE) in products 5->6",
                PINS,
                {"products": 6, "merchants": 2},
            ),
            id="maintenance_commits_only",
        ),
        pytest.param(
            ViewBatches(committed(3, PINS), 4),
            {"products": 6, "merchants": 3},
            {"merchants"},
            False,
            BatchPlan("display_products", 4, INC, PINS, {"products": 6, "merchants": 3}),
            id="one_source_with_data",
        ),
        pytest.param(
            ViewBatches(committed(3, {"products": 5}), 4),
            PINS,
            set(),
            False,
            BatchPlan("display_products", 4, INC, {"products": 5}, PINS),
            id="a_source_the_last_batch_did_not_read",
        ),
    ],
)
def test_the_next_batch_of_an_fk_join(monkeypatch, batches, now, data, full_refresh, expected):
    decided, asked = decide(monkeypatch, "display_products", batches, now, data, full_refresh=full_refresh)

    assert decided == expected
    assert asked == ["products", "merchants"]


@pytest.mark.parametrize(
    ("last", "state_pin"),
    [({"merchants": 2, "_routing": 9}, 9), ({"merchants": 2}, -1)],
    ids=["the_state_pin_of_the_last_batch", "no_state_yet"],
)
def test_a_rekey_batch_pins_its_index_where_the_last_batch_left_it(monkeypatch, last, state_pin):
    decided, _ = decide(
        monkeypatch,
        "merchants_by_name",
        ViewBatches(committed(3, last), 4),
        {"merchants": 3},
        {"merchants"},
    )

    assert decided == BatchPlan("merchants_by_name", 4, INC, last, {"merchants": 3, "_routing": state_pin})


@pytest.mark.parametrize(
    ("now", "data", "expected_mode"),
    [
        ({"purchases": 5, "customers": 8, "display_products": 4}, {"customers"}, None),  # a dimension alone
        ({"purchases": 6, "customers": 2, "display_products": 3}, {"purchases"}, INC),
    ],
    ids=["a_dimension_change_is_not_its_work", "a_fact_change_is"],
)
def test_a_lookup_enrich_runs_for_its_facts_changes_alone(monkeypatch, now, data, expected_mode):
    last = {"purchases": 5, "customers": 2, "display_products": 3}

    decided, _ = decide(monkeypatch, "looked_up", ViewBatches(committed(3, last), 4), now, data)

    if expected_mode is None:
        assert decided == Skip("no new versions since batch 3: purchases@5", last, now)
    else:
        assert decided == BatchPlan("looked_up", 4, expected_mode, last, now)


UNCHANGED_PINS = {"products": 7, "merchants": 2}
UNCHANGED = BatchRecord("v", 4, BatchStatus.UNCHANGED, INC, PINS, UNCHANGED_PINS)


@pytest.mark.parametrize(
    ("now", "data", "expected"),
    [
        pytest.param(
            UNCHANGED_PINS,
            set(),
            Skip(
                "no new versions since batch 4 (no change of content since batch 3): products@7, merchants@2",
                UNCHANGED_PINS,
                UNCHANGED_PINS,
            ),
            id="nothing_after_it",
        ),
        pytest.param(
            {"products": 8, "merchants": 2},
            {"products"},
            BatchPlan("display_products", 5, INC, UNCHANGED_PINS, {"products": 8, "merchants": 2}),
            id="new_data_is_read_from_its_pins",
        ),
    ],
)
def test_after_a_batch_that_found_no_change_of_content_the_next_reads_on_from_its_pins(
    monkeypatch, now, data, expected
):
    """Issue 36: a batch whose changes held no change of content committed nothing; the plan
    reads on from its versions rather than reading the same rewrites again on every run."""
    batches = ViewBatches(committed(3, PINS), 5, unchanged=UNCHANGED)

    decided, _ = decide(monkeypatch, "display_products", batches, now, data)

    assert decided == expected


def test_a_full_refresh_does_not_read_on(monkeypatch):
    batches = ViewBatches(committed(3, PINS), 5, unchanged=UNCHANGED)

    decided, _ = decide(monkeypatch, "display_products", batches, UNCHANGED_PINS, set(), full_refresh=True)

    assert decided == BatchPlan("display_products", 5, FULL, PINS, UNCHANGED_PINS)


@pytest.mark.parametrize(("after", "upto", "may"), [(5, 5, False), (5, 4, True)])
def test_a_range_that_is_empty_or_goes_back_is_answered_without_reading_the_log(after, upto, may):
    assert plan.may_hold_changes("/no/such/table", after, upto) is may


# --- a changed definition (spec/definition.py) ---------------------------------------------------


def edited_shop(old: str, new: str):
    from lakejoin.spec.parse import parse_spec
    from tests.unit.shop import SHOP

    assert old in SHOP
    return parse_spec(SHOP.replace(old, new), "shop.yaml")


def under(spec, view: str, columns: dict | None = None) -> dict:  # noqa: ANN001
    """The definition a batch of `view` recorded, with each input's key as its only column."""
    from lakejoin.spec.definition import view_definition

    v = spec.views[view]
    kind = KINDS[view](spec, v)
    schemas = {s.name: dict((columns or {}).get(s.name, {c: "string" for c in s.key})) for s in kind.sources}
    return view_definition(spec, v, schemas)


def recorded(batch_id: int, pins: dict[str, int], definition: dict | None) -> BatchRecord:
    """A committed batch whose log row keeps the fingerprint of `definition`; the whole of it is
    in its batch commit (the output's log, stood in for by `COMMITS`)."""
    from lakejoin.spec.definition import fingerprint

    COMMITS[batch_id] = BatchMarker(batch_id, FINAL, INC, {}, pins, definition=definition)
    kept = fingerprint(definition) if definition and "format" in definition else None
    if definition is not None and definition.get("format") == 0:
        kept = "0:old.old"
    return BatchRecord("v", batch_id, BatchStatus.COMMITTED, INC, {}, pins, definition=kept)


COMMITS: dict[int, BatchMarker] = {}


INNER = ("right_prefix: merchant_}", "right_prefix: merchant_, how: left}")


@pytest.mark.parametrize(
    ("now", "data"),
    [(PINS, set()), ({"products": 6, "merchants": 2}, {"products"})],
    ids=["with_nothing_new", "with_new_data"],
)
def test_a_changed_definition_refreshes_in_full_and_says_why(monkeypatch, now, data):
    before = shop()
    batches = ViewBatches(recorded(3, PINS, under(before, "display_products")), 4)

    decided, _ = decide(monkeypatch, "display_products", batches, now, data, spec=edited_shop(*INNER))

    assert isinstance(decided, BatchPlan) and decided.mode is FULL and decided.batch_id == 4
    assert decided.notes == {"definition": "definition changed since batch 3: how: inner -> left"}
    assert decided.definition == under(edited_shop(*INNER), "display_products")


def test_with_on_definition_change_fail_the_plan_stops_naming_the_change_and_the_command(monkeypatch):
    from lakejoin.errors import DefinitionChangedError

    batches = ViewBatches(recorded(3, PINS, under(shop(), "display_products")), 4)
    spec = edited_shop(
        "    fk_join: {left: products, right: merchants, fk: merchant_id, right_prefix: merchant_}",
        "    on_definition_change: fail\n"
        "    fk_join: {left: products, right: merchants, fk: merchant_id, right_prefix: m_}",
    )

    with pytest.raises(DefinitionChangedError) as raised:
        decide(monkeypatch, "display_products", batches, PINS, set(), spec=spec)

    text = str(raised.value)
    assert "changed since batch 3: right_prefix: merchant_ -> m_" in text
    assert "shop.yaml:" in text and "lakejoin run shop.yaml --view display_products --full-refresh" in text


def test_a_full_refresh_asked_for_runs_under_fail_too_and_says_what_changed(monkeypatch):
    batches = ViewBatches(recorded(3, PINS, under(shop(), "display_products")), 4)
    spec = edited_shop(
        "    fk_join: {left: products, right: merchants, fk: merchant_id, right_prefix: merchant_}",
        "    on_definition_change: fail\n"
        "    fk_join: {left: products, right: merchants, fk: merchant_id, right_prefix: m_}",
    )

    decided, _ = decide(monkeypatch, "display_products", batches, PINS, set(), spec=spec, full_refresh=True)

    assert isinstance(decided, BatchPlan) and decided.mode is FULL
    assert decided.notes == {"definition": "definition changed since batch 3: right_prefix: merchant_ -> m_"}


@pytest.mark.parametrize(
    "last",
    ["written_before_definitions_were_recorded", "the_same_definition", "another_format"],
)
def test_with_nothing_new_an_unchanged_or_unknown_definition_is_skipped(monkeypatch, last):
    definition = {"the_same_definition": under(shop(), "display_products")}.get(last)
    if last == "another_format":
        definition = {**under(shop(), "display_products"), "format": 0, "settings": {}}
    batches = ViewBatches(recorded(3, PINS, definition), 4)

    decided, _ = decide(monkeypatch, "display_products", batches, PINS, set())

    assert isinstance(decided, Skip)


def test_an_output_written_before_definitions_records_one_and_runs_as_before(monkeypatch):
    batches = ViewBatches(recorded(3, PINS, None), 4)
    now = {"products": 6, "merchants": 2}

    decided, _ = decide(monkeypatch, "display_products", batches, now, {"products"})

    assert decided == BatchPlan("display_products", 4, INC, PINS, now)
    assert decided.definition == under(shop(), "display_products") and decided.notes == {}


def test_an_input_that_gained_a_column_the_view_takes_refreshes_it(monkeypatch):
    batches = ViewBatches(recorded(3, PINS, under(shop(), "display_products")), 4)
    wider = {"merchants": {"merchant_id": "string", "zip": "string"}}

    decided, _ = decide(
        monkeypatch,
        "display_products",
        batches,
        {"products": 5, "merchants": 3},
        {"merchants"},
        columns=wider,
    )

    assert decided.mode is FULL
    assert (
        decided.notes["definition"]
        == "definition changed since batch 3: merchants gained column 'zip' (string)"
    )
