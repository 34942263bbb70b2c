"""The choice of an output batch's write (strategy.choose_output: the output rows of the truth
table of issue 53's sink plan, §4) and the sink's entry loop (sink/entry.written): choose,
apply, and choose again when a write declines, with fake writers that record what they were
asked. No JVM: the facts are stand-ins that record which was asked, in what order."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from lakejoin.sink.entry import DeclinedError, written
from lakejoin.sink.merge_terms import MergeCounts
from lakejoin.sink.strategy import OutputFacts, Strategy, choose_output, may_upsert
from tests.unit.test_sink_choice import Asked as ChoiceAsked

pytestmark = pytest.mark.unit

REWRITE, UPSERT, DRIVER, SPARK = (
    Strategy.REWRITE,
    Strategy.UPSERT,
    Strategy.DRIVER_MERGE,
    Strategy.SPARK_MERGE,
)


@dataclass
class Asked(ChoiceAsked):
    """test_sink_choice's stand-in facts, and the output's: the upsert's switch and the files."""

    upsert_on: bool = True
    held_files: int = 4

    @property
    def upsert(self) -> bool:
        return self._ask("upsert", self.upsert_on)  # type: ignore[return-value]

    @property
    def files(self) -> int:
        return self._ask("files", self.held_files)  # type: ignore[return-value]


def _facts(
    *,
    full: bool = False,
    drift: str | None = None,
    rewrite: str | None = None,
    counted: int | None = None,
    declined: str | None = None,
    failed: bool = False,
    **given,
) -> OutputFacts:
    asked = Asked(**given)
    return OutputFacts(
        full, drift, rewrite, counted, asked, asked, upsert_declined=declined, driver_failed=failed
    )


def _keys(facts: OutputFacts, n: int | None):
    """keys(), recorded as asked (None: the test says no branch may ask it)."""

    def keys() -> int:
        facts.settings.asked.append("keys")  # type: ignore[attr-defined]
        assert n is not None, "the key count was asked"
        return n

    return keys


@pytest.mark.parametrize(
    ("facts", "keys", "chosen"),
    [
        (_facts(full=True, drift="a column added"), None, REWRITE),
        (_facts(full=True, rewrite="the output's key changed"), None, REWRITE),
        (_facts(full=True, held_files=0), None, REWRITE),
        (_facts(full=True, held_files=0, ranges=False, held_rows=0), 50, DRIVER),
        (_facts(full=True, held_rows=10_000), 50, DRIVER),
        (_facts(full=True, held_rows=10_000), 25_000, SPARK),
        (_facts(full=True), None, UPSERT),
        (_facts(full=True, declined="row tracking"), 50, DRIVER),
        (_facts(full=True, upsert_on=False, held_rows=15_000_000), 50, SPARK),
        (_facts(full=True, held_rows=10_000, driver_on=False), None, UPSERT),
        (_facts(counted=50), 50, DRIVER),
        (_facts(counted=0), 0, DRIVER),
        (_facts(counted=0, writes=False), None, UPSERT),
        (_facts(counted=50, held_rows=15_000_000), None, UPSERT),
        (_facts(counted=50, held_rows=15_000_000, upsert_on=False), 50, SPARK),
        (_facts(counted=50, held_rows=15_000_000, declined="rows disagree"), 50, SPARK),
        (_facts(counted=30_000), None, UPSERT),
        (_facts(counted=30_000, upsert_on=False), 30_000, SPARK),
        (_facts(), None, UPSERT),
        (_facts(upsert_on=False), 50, DRIVER),
        (_facts(counted=50, failed=True), 50, SPARK),
        (_facts(full=True, declined="row tracking", failed=True), 50, SPARK),
    ],
    ids=[
        "2_full_schema_change_overwritten",
        "3_full_key_changed_overwritten",
        "4_full_into_a_table_with_no_file_filled",
        "5_full_no_file_key_ranges_off_driver",
        "6_full_small_table_few_differences_driver",
        "7_full_small_table_many_differences_spark",
        "8_full_large_table_upsert_no_count",
        "9_full_upsert_declined_driver",
        "10_full_upsert_off_large_table_spark",
        "11_full_driver_off_upsert",
        "12_few_keys_driver",
        "13_no_key_driver_commit_alone",
        "14_no_key_not_writable_upsert",
        "15_few_keys_large_table_upsert",
        "16_upsert_off_large_table_spark",
        "16_upsert_declined_large_table_spark",
        "17_many_keys_upsert",
        "18_many_keys_upsert_off_spark",
        "19_not_counted_upsert_no_count",
        "20_not_counted_upsert_off_counted_driver",
        "21_driver_failed_spark_as_before",
        "full_upsert_declined_driver_failed_spark",
    ],
)
def test_an_output_batch_is_written_the_way_its_facts_choose(facts, keys, chosen):
    """Each fact asked only when a branch needs it: no key is counted for a rewrite or an
    upsert, and a driver's MERGE that failed leaves the batch to Spark's, never to the upsert."""
    assert choose_output(facts, _keys(facts, keys)) is chosen


def test_a_schema_change_asks_nothing_else():
    facts = _facts(full=True, drift="a column added")
    choose_output(facts, _keys(facts, None))
    assert facts.settings.asked == []  # type: ignore[attr-defined]


def test_a_small_batch_asks_the_settings_then_the_log_and_counts_nothing_new():
    facts = _facts(counted=50)
    choose_output(facts, _keys(facts, 50))
    assert facts.settings.asked == [  # type: ignore[attr-defined]
        "upsert",
        *["driver_max_keys", "driver", "driver_max_rows", "driver_writes", "rows"],
        "keys",
        *["driver_max_keys", "driver", "driver_max_rows", "driver_writes", "rows"],
    ]


@pytest.mark.parametrize(
    ("incremental", "on", "may"), [(True, True, True), (True, False, False), (False, True, False)]
)
def test_the_old_rows_are_derived_only_for_an_incremental_batch_the_upsert_may_write(incremental, on, may):
    asked = Asked(upsert_on=on)
    assert may_upsert(asked, incremental=incremental) is may
    assert asked.asked == (["upsert"] if incremental else [])


@dataclass
class Writers:
    """Stand-in writers: each strategy in `declines` gives the batch up with its text; the
    rest write `MergeCounts(inserted=1)`. `applied` records the order they were tried in."""

    n: int = 50
    declines: dict[Strategy, str] = field(default_factory=dict)
    applied: list[Strategy] = field(default_factory=list)

    def keys(self) -> int:
        return self.n

    def apply(self, strategy: Strategy, facts: OutputFacts) -> MergeCounts:
        self.applied.append(strategy)
        if strategy in self.declines:
            why = self.declines[strategy]
            raise DeclinedError(why, why if strategy is UPSERT else None)
        return MergeCounts(inserted=1)


DECLINED = "the one-commit upsert does not write /out: row ids; the public MERGE writes it"


@pytest.mark.parametrize(
    ("facts", "declines", "applied", "note"),
    [
        (_facts(full=True), {}, [UPSERT], None),
        (_facts(full=True), {UPSERT: DECLINED}, [UPSERT, DRIVER], DECLINED),
        (_facts(counted=50), {DRIVER: "panicked"}, [DRIVER, SPARK], None),
        (_facts(full=True), {UPSERT: DECLINED, DRIVER: "panicked"}, [UPSERT, DRIVER, SPARK], DECLINED),
        (_facts(counted=50, held_rows=15_000_000), {UPSERT: DECLINED}, [UPSERT, SPARK], DECLINED),
        (
            _facts(full=True, drift="x: int -> bigint"),
            {},
            [REWRITE],
            "rewritten for a schema change: x: int -> bigint",
        ),
        (
            _facts(full=True, rewrite="the output's key changed"),
            {},
            [REWRITE],
            "rewritten: the output's key changed",
        ),
        (_facts(full=True, held_files=0), {}, [REWRITE], None),
    ],
    ids=[
        "upsert",
        "upsert_declined_then_driver",
        "driver_failed_then_spark",
        "upsert_declined_driver_failed_then_spark",
        "upsert_declined_then_spark_listed",
        "schema_change_note",
        "key_change_note",
        "first_build_no_note",
    ],
)
def test_a_write_that_declines_is_followed_by_the_next_choice(facts, declines, applied, note):
    """At most one try per strategy; the summary's note is the upsert's decline text, or why
    the table was rewritten; `tried` says what gave the batch up first, and why."""
    writers = Writers(declines=declines)

    done = written(facts, writers)

    assert writers.applied == applied
    assert done.strategy is applied[-1] and done.counts == MergeCounts(inserted=1)
    assert done.note == note
    assert done.tried == tuple((s, declines[s]) for s in applied[:-1])


def test_any_other_error_is_raised_as_it_is():
    class ConflictError(Exception):
        pass

    class Failing(Writers):
        def apply(self, strategy: Strategy, facts: OutputFacts) -> MergeCounts:
            raise ConflictError("another commit landed")

    with pytest.raises(ConflictError):
        written(_facts(full=True), Failing())


@pytest.mark.parametrize(
    ("mode", "rewrite", "on", "previous", "asked"),
    [
        ("INCREMENTAL", None, True, True, ["upsert"]),
        ("INCREMENTAL", None, False, False, ["upsert"]),
        ("INCREMENTAL", "the output's key changed", True, False, []),
        ("REPAIR", None, True, False, []),
        ("FULL_REFRESH", None, True, False, []),
    ],
)
def test_a_batch_derives_the_old_rows_by_the_settings_its_write_takes(mode, rewrite, on, previous, asked):
    """engine/batch.derivation asks the batch's one settings object (which the write takes
    after it) whether the upsert may write the batch: the switch is read once a batch."""
    from types import SimpleNamespace

    from lakejoin.delta.records import BatchMode
    from lakejoin.engine.batch import derivation

    settings = Asked(upsert_on=on)
    plan = SimpleNamespace(mode=BatchMode[mode], rewrite=rewrite)
    kind = SimpleNamespace(health_measures=())

    found = derivation(None, kind, plan, settings)  # type: ignore[arg-type]

    assert found.previous is previous and not found.health
    assert settings.asked == asked
