"""Random change histories for the property tests: Delta commits drawn by hypothesis."""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from tests.lakehouse import Lakehouse

# Every example costs minutes of Spark; shrinking a failure would take hours, so it is opt-in.
PHASES = (Phase.explicit, Phase.generate) + (
    (Phase.shrink,) if os.environ.get("LAKEJOIN_HYPOTHESIS_SHRINK") else ()
)


def examples(default: int) -> settings:
    """Hypothesis settings for Spark-backed properties (LAKEJOIN_HYPOTHESIS_EXAMPLES overrides)."""
    return settings(
        max_examples=int(os.environ.get("LAKEJOIN_HYPOTHESIS_EXAMPLES", str(default))),
        deadline=None,
        database=None,
        phases=PHASES,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


@dataclass(frozen=True)
class Step:
    """One Delta commit on one source: upsert `rows`, delete the rows with keys `rows`, write the
    rows with keys `rows` back as they are (`rewrite WRITER`), or every row (`reload WRITER`);
    or the table dropped and written again at its path without its first row (`replace`, a
    new table whose versions start again), or a view's output dropped (`drop`: `table` is its
    path under the lake, and the view's next batch builds it again)."""

    table: str
    kind: str
    rows: tuple

    def __repr__(self) -> str:
        return f"{self.kind} {self.table} {list(self.rows)}"


def rows_of(values: dict) -> tuple:
    return tuple((key, *value) for key, value in sorted(values.items()))


def upserts(table: str, keys: tuple[str, ...], values: st.SearchStrategy) -> st.SearchStrategy[Step]:
    # One MERGE needs unique keys; changes to one key inside a batch come from several steps.
    return st.dictionaries(st.sampled_from(keys), values, min_size=1, max_size=3).map(
        lambda rows: Step(table, "upsert", rows_of(rows))
    )


def deletes(table: str, keys: tuple[str, ...]) -> st.SearchStrategy[Step]:
    return st.sets(st.sampled_from(keys), min_size=1, max_size=2).map(
        lambda doomed: Step(table, "delete", tuple(sorted(doomed)))
    )


WRITERS = ("spark", "delta-rs")


def rewrites(
    table: str, keys: tuple[str, ...], writers: tuple[str, ...] = WRITERS
) -> st.SearchStrategy[Step]:
    """Rows written back exactly as they are, which change nothing (issue 36): a MERGE
    `whenMatchedUpdateAll` of one to three keys' rows (those that exist; none: no commit), or a
    reload of every row, by Spark or delta-rs, or by Spark's overwrite (a delete and an equal
    insert per row in one commit). delta-rs is left out (`writers`) for tables with arrays."""
    some = st.tuples(st.sampled_from(writers), st.sets(st.sampled_from(keys), min_size=1, max_size=3))
    every = st.sampled_from((*writers, "overwrite"))
    return st.one_of(
        some.map(lambda drawn: Step(table, f"rewrite {drawn[0]}", tuple(sorted(drawn[1])))),
        every.map(lambda writer: Step(table, f"reload {writer}", ())),
    )


def replaces(table: str) -> st.SearchStrategy[Step]:
    """The table dropped and written again at its path, its first row left out (issue 51)."""
    return st.just(Step(table, "replace", ()))


def drops(output: str) -> st.SearchStrategy[Step]:
    """A view's output (its path under the lake) dropped: its next batch builds it again."""
    return st.just(Step(output, "drop", ()))


CHECKS_EVERY = 3  # Great Expectations runs on batches 0 and 3; every batch is compared
BATCHES = 4  # after the first, full batch: five batches in all


def batches(steps: st.SearchStrategy[Step]) -> st.SearchStrategy[tuple]:
    """BATCHES batches of one to three commits each."""
    return st.lists(st.lists(steps, min_size=1, max_size=3).map(tuple), min_size=BATCHES, max_size=BATCHES)


@contextmanager
def lookup_path(spark, number: int) -> Iterator[None]:  # noqa: ANN001
    """Batch `number` takes one of four routes, in turn, so that one history checks each against
    the recompute at no extra cost:
    - 0: Spark's lookups and the write a batch of its size takes (for a few keys, one MERGE
      from the driver);
    - 1: the few keys' rows read on the driver (lookups.py), the same write;
    - 2: Spark's lookups, and the write of a batch of many keys into a large table forced: the
      one-commit upsert (sink/key_upsert.py), from the affected keys' rows at the previous pins
      the view kind derives;
    - 3: driver lookups, and the public MERGE forced, the write of every batch the upsert
      declines.
    The change ranges are read on the driver (delta/change_feed.read_on_driver) in routes 1 and
    2, by Spark in 0 and 3: each kind of lookup meets each read of the changes."""
    from lakejoin.delta import change_feed, lookups
    from lakejoin.sink import key_upsert
    from lakejoin.sink.spark_merge import ONE_MERGE_MAX_KEYS
    from lakejoin.sink.writers import driver_merge

    route = number % 4
    conf = {lookups.ENABLED: "true" if route % 2 else "false"}
    conf |= {change_feed.DRIVER_ROWS: "1000000" if route in (1, 2) else "0"}
    if route >= 2:
        conf |= {ONE_MERGE_MAX_KEYS: "0", driver_merge.MAX_KEYS: "0"}
    if route == 3:
        conf |= {key_upsert.ENABLED: "false"}
    for name, value in conf.items():
        spark.conf.set(name, value)
    try:
        yield
    finally:
        for name in conf:
            spark.conf.unset(name)


def apply(lake: Lakehouse, step: Step, keys: dict[str, str]) -> None:
    what, _, writer = step.kind.partition(" ")
    if what == "upsert":
        lake.upsert(step.table, keys[step.table], list(step.rows))
    elif what == "delete":
        lake.delete(step.table, keys[step.table], list(step.rows))
    elif what == "rewrite":
        lake.rewrite(step.table, keys[step.table], list(step.rows), writer=writer)
    elif what == "replace":
        lake.replace(step.table, keys[step.table])
    elif what == "drop":
        shutil.rmtree(lake.root / step.table, ignore_errors=True)
    else:
        assert what == "reload", step
        lake.rewrite(step.table, keys[step.table], writer=writer)


_example_number = itertools.count()


def example_lake(spark, tmp_path: Path) -> Lakehouse:  # noqa: ANN001
    """A lakehouse of its own for each example (tmp_path is shared by all examples of a test)."""
    root = tmp_path / f"example-{next(_example_number)}"
    root.mkdir()
    return Lakehouse(spark, root)
