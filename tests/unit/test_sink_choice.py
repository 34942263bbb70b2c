"""The choice of a batch's keyed write (sink/strategy.py): the rows of the truth table of
issue 53's sink plan (§4) that `strategy.choose` reaches (sink/entry.py's MERGEs), over stand-in
facts that record which fact was asked, in what order (settings before the table's log, each only
when a branch needs it)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from lakejoin.sink.strategy import SinkFacts, Strategy, Target, choose, driver_sized, lists_keys

pytestmark = pytest.mark.unit

DRIVER, SPARK, NONE = Strategy.DRIVER_MERGE, Strategy.SPARK_MERGE, Strategy.NO_COMMIT


@dataclass
class Asked:
    """The session's settings and the table's log, each recorded in `asked` when read."""

    listed_max: int = 100
    driver_on: bool = True
    driver_max: int = 20_000
    driver_rows: int = 3_000_000
    ranges: bool = True
    writes: bool = True
    held_rows: int = 1_500_000
    asked: list[str] = field(default_factory=list)

    def _ask(self, fact: str, value: object) -> object:
        self.asked.append(fact)
        return value

    @property
    def listed_max_keys(self) -> int:
        return self._ask("listed_max_keys", self.listed_max)  # type: ignore[return-value]

    @property
    def driver(self) -> bool:
        return self._ask("driver", self.driver_on)  # type: ignore[return-value]

    @property
    def driver_max_keys(self) -> int:
        return self._ask("driver_max_keys", self.driver_max)  # type: ignore[return-value]

    @property
    def driver_max_rows(self) -> int:
        return self._ask("driver_max_rows", self.driver_rows)  # type: ignore[return-value]

    @property
    def key_ranges(self) -> bool:
        return self._ask("key_ranges", self.ranges)  # type: ignore[return-value]

    @property
    def driver_writes(self) -> bool:
        return self._ask("driver_writes", self.writes)  # type: ignore[return-value]

    @property
    def rows(self) -> int:
        return self._ask("rows", self.held_rows)  # type: ignore[return-value]


ON_THE_DRIVER = ["driver_max_keys", "driver", "driver_max_rows", "driver_writes", "rows"]
LISTED = ["listed_max_keys", "key_ranges"]


def _facts(keys: int, *, full: bool = False, state: bool = False, failed: bool = False, **given) -> SinkFacts:
    asked = Asked(**given)
    target = Target.STATE if state else Target.OUTPUT
    return SinkFacts(target, full=full, keys=keys, settings=asked, table=asked, driver_failed=failed)


@pytest.mark.parametrize(
    ("facts", "chosen", "listed", "asked"),
    [
        (_facts(50), DRIVER, False, ON_THE_DRIVER),
        (_facts(50, driver_on=False), SPARK, True, [*ON_THE_DRIVER[:2], *LISTED]),
        (_facts(50, writes=False), SPARK, True, [*ON_THE_DRIVER[:4], *LISTED]),
        (_facts(20_000), DRIVER, False, ON_THE_DRIVER),
        (_facts(5_000, writes=False), SPARK, False, [*ON_THE_DRIVER[:4], "listed_max_keys"]),
        (_facts(20_001), SPARK, False, ["driver_max_keys", "listed_max_keys"]),
        (_facts(50, listed_max=0, driver_on=False), SPARK, False, [*ON_THE_DRIVER[:2], "listed_max_keys"]),
        (_facts(50, ranges=False, driver_on=False), SPARK, False, [*ON_THE_DRIVER[:2], *LISTED]),
        (_facts(50, held_rows=15_000_000), SPARK, True, [*ON_THE_DRIVER, *LISTED]),
        (_facts(30_000), SPARK, False, ["driver_max_keys", "listed_max_keys"]),
        (_facts(0), DRIVER, False, ON_THE_DRIVER),
        (_facts(0, writes=False), SPARK, False, ON_THE_DRIVER[:4]),
        (_facts(50, failed=True), SPARK, True, ["driver_max_keys", *LISTED]),
        (_facts(50, full=True, held_rows=0), DRIVER, False, ON_THE_DRIVER),
        (_facts(50, full=True, held_rows=10_000), DRIVER, False, ON_THE_DRIVER),
        (_facts(50, full=True, writes=False), SPARK, False, ON_THE_DRIVER[:4]),
        (_facts(25_000, full=True, held_rows=10_000), SPARK, False, ["driver_max_keys"]),
        (_facts(50, full=True, held_rows=15_000_000), SPARK, False, ON_THE_DRIVER),
        (_facts(0, full=True), DRIVER, False, ON_THE_DRIVER),
        (_facts(0, state=True), NONE, False, []),
        (_facts(0, full=True, state=True), NONE, False, []),
        (_facts(50, full=True, state=True), DRIVER, False, ON_THE_DRIVER),
        (_facts(50, state=True), DRIVER, False, ON_THE_DRIVER),
        (_facts(50, state=True, driver_on=False), SPARK, True, [*ON_THE_DRIVER[:2], *LISTED]),
        (_facts(50, state=True, held_rows=15_000_000), SPARK, True, [*ON_THE_DRIVER, *LISTED]),
        (_facts(30_000, state=True), SPARK, False, ["driver_max_keys", "listed_max_keys"]),
        (_facts(30_000, full=True, state=True), SPARK, False, ["driver_max_keys"]),
    ],
    ids=[
        "12_few_keys_on_the_driver",
        "16_driver_merge_off_listed",
        "not_writable_by_delta_rs_listed",
        "at_the_driver_maximum",
        "many_keys_not_writable_by_delta_rs",
        "above_the_driver_maximum",
        "few_keys_listing_off",
        "few_keys_key_ranges_off",
        "16_few_keys_into_a_large_table_listed",
        "18_above_the_driver_maximum",
        "13_no_key_in_an_output_its_commit_alone_on_the_driver",
        "14_no_key_in_an_output_not_writable_by_delta_rs",
        "21_driver_failed_spark_merge_listed",
        "5_full_into_a_table_with_no_file",
        "6_9_full_few_differences_on_the_driver",
        "full_few_differences_not_writable_by_delta_rs",
        "7_full_many_differences_of_a_small_table",
        "10_full_into_a_large_table_never_listed",
        "full_no_difference",
        "25_state_no_key",
        "24_state_full_no_difference",
        "26_state_full_few_differences_on_the_driver",
        "26_state_on_the_driver",
        "state_few_keys_driver_off_listed",
        "27_state_few_keys_into_a_large_table_listed",
        "28_state_above_the_driver_maximum",
        "28_state_full_above_the_driver_maximum",
    ],
)
def test_a_batch_is_written_the_way_its_keys_and_table_choose(facts, chosen, listed, asked):
    """Each fact is asked only when the rule reaches it: delta-rs is asked about the table only
    for a batch the driver's MERGE would take, and the listing's settings only for a Spark
    MERGE; a full write's few differences go to the driver too (a small view's fan-out
    fallback, issue 52). A driver's MERGE that failed is not chosen again."""
    found = choose(facts)
    assert found is chosen
    assert (found is SPARK and lists_keys(facts)) is listed
    assert facts.settings.asked == asked  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("given", "sized", "asked"),
    [
        ({"held_rows": 10_000}, True, ["driver", "driver_max_keys", "driver_writes", "rows"]),
        ({"held_rows": 20_001}, False, ["driver", "driver_max_keys", "driver_writes", "rows"]),
        ({"held_rows": 10_000, "writes": False}, False, ["driver", "driver_max_keys", "driver_writes"]),
        ({"held_rows": 10_000, "driver_on": False}, False, ["driver"]),
    ],
    ids=["6_small_table", "8_large_table_upsert", "not_writable_by_delta_rs", "11_driver_merge_off_upsert"],
)
def test_a_full_write_leaves_its_differences_to_the_driver_only_in_a_small_table(given, sized, asked):
    """A table of at most the driver's maximum keys in rows has about as many differences at
    most: `choose` writes them (rows 5-7 of the plan); a larger one's go to the one-commit upsert
    (rows 8, 11)."""
    facts = Asked(**given)

    assert driver_sized(facts, facts) is sized
    assert facts.asked == asked


def test_the_tables_files_and_rows_come_from_its_log_read_once(tmp_path, monkeypatch):
    """A table created and never written holds no file (a full write then lays it out by key,
    as DESCRIBE DETAIL's numFiles said); its rows are its files' records; the log is loaded
    once for every fact."""
    import deltalake
    import pyarrow as pa

    from lakejoin.sink import facts

    path = str(tmp_path / "t")
    deltalake.DeltaTable.create(path, pa.schema([("k", pa.int64())]))
    loads: list[str] = []
    real = deltalake.DeltaTable

    def loaded(where: str) -> deltalake.DeltaTable:
        loads.append(where)
        return real(where)

    monkeypatch.setattr(deltalake, "DeltaTable", loaded)
    empty = facts.LoggedTable(path, source=None)  # type: ignore[arg-type]
    assert (empty.files, empty.rows) == (0, 0)
    deltalake.write_deltalake(path, pa.table({"k": [1, 2]}), mode="append")
    deltalake.write_deltalake(path, pa.table({"k": [3]}), mode="append")
    written = facts.LoggedTable(path, source=None)  # type: ignore[arg-type]
    assert (written.files, written.rows, written.files) == (2, 3, 2)
    assert loads == [path, path]
