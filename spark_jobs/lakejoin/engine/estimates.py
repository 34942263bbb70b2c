"""The fan-out, write and time a plan estimates (engine/next_batch.py), from the Delta logs, their
files' statistics and the view's batch log alone: no JVM, no data read.

- the fan-out: `views/fanout.recomputes_in_full` on the reach the changed one-side rows are
  estimated to have (`FanOut.how` says how);
- the write: `sink/strategy.choose_output` on the output's log, with lakejoin's default write
  settings (a session may set others: spark.lakejoin.*);
- the time: the median seconds of the view's batches of the same action nearest in size.

>>> time_estimate(alike, 3, "incremental", own=True).text()  # doctest: +SKIP
'about 2.0 s (estimate: the median of its batches 2, 3, 5 (incremental, 1-4 changed keys; ...'
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from lakejoin.delta.plans import BatchPlan
from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus, last_of
from lakejoin.delta.sources import logged_row_count, logged_rows
from lakejoin.engine.plan import named_changes
from lakejoin.sink import driver_merge, spark_merge
from lakejoin.sink.strategy import OutputFacts, OutputSettings, choose_output
from lakejoin.spec.model import Source, View
from lakejoin.views.fanout import FanOutRule, recomputes_in_full


@dataclass(frozen=True)
class FanOut:
    """The fan-out rule (views/fanout.py) applied to an estimate: the changed one-side rows
    reach about `reached` of the many side's `rows`; `full` is the rule's verdict on it (None:
    the logs cannot say, the batch counts it)."""

    reached: int
    rows: int
    threshold: float
    min_rows: int
    full: bool | None
    how: str

    @property
    def share(self) -> float:
        return self.reached / self.rows if self.rows else 0.0

    def text(self) -> str:
        floor = f", floor {self.min_rows:,} rows" if self.min_rows else ""
        if self.full is None:
            unknown = "unknown until the batch counts it"
            return f"{unknown}, threshold {self.threshold:.0%}{floor} ({self.how})"
        verdict = "above" if self.full else "within"
        return (
            f"estimated at {self.reached:,} of {self.rows:,} rows ({self.share:.1%}), {verdict} "
            f"the threshold of {self.threshold:.0%}{floor} ({self.how})"
        )


@dataclass(frozen=True)
class TimeEstimate:
    """The batch's seconds, estimated from the view's own batches of a similar size: the median
    of their phases' seconds (Spark's start not included)."""

    seconds: float
    batches: tuple[int, ...]
    how: str

    def text(self) -> str:
        return f"about {self.seconds:.1f} s (estimate: {self.how})"


# --- the fan-out rule, on an estimate -------------------------------------------------------


def fanout_estimate(
    rule: FanOutRule,
    changed: Sequence[int | None],
    waiting: Sequence[str],
    pinned: Mapping[str, int],
    history: list[BatchRecord],
) -> FanOut | None:
    """`rule` (None: no one-side row changed) on the reach estimated from the changed rows of
    each one side (`changed`, in the order of `rule.ones`; None: the commits' metrics cannot
    count them), side by side: as the view's own batches in `history` in which only that side
    changed found it (many-side rows reached per changed key), or, before any did, as an even
    spread (the side's changed share reaches that share of the many side's rows at its pin in
    `pinned`); the sides reach rows independently of each other. `waiting`: the upstream views
    of the one sides whose batches commit first."""
    if all(c == 0 for c in changed) and not waiting:
        return None
    many_rows = _rows(rule.many, pinned)
    if None in changed:
        how = "a commit's metrics do not count its rows (an overwrite, a RESTORE)"
        return FanOut(0, many_rows, rule.threshold, rule.min_rows, None, how)
    missed, hows = 1.0, []
    for one, keys in zip(rule.ones, changed, strict=True):
        if keys:
            share, how = _share(rule, one, keys, many_rows, pinned, history)
            missed *= 1.0 - share
            hows.append(how)
    reached = round((1.0 - missed) * many_rows)
    full: bool | None = recomputes_in_full(reached, many_rows, rule.threshold, rule.min_rows)
    if waiting and not full:  # more changes reach no fewer rows: only "above" is known now
        full = None
        hows.append(
            ", ".join(f"view {w}" for w in waiting) + "'s batch commits first: its changes count then"
        )
    return FanOut(reached, many_rows, rule.threshold, rule.min_rows, full, "; ".join(hows))


def _share(
    rule: FanOutRule,
    one: Source,
    keys: int,
    many_rows: int,
    pinned: Mapping[str, int],
    history: list[BatchRecord],
) -> tuple[float, str]:
    """The share of the many side's `many_rows` that `keys` changed rows of `one` reach, and
    how it was estimated."""
    observed = _observed_reach(rule, one, history)
    if observed is not None:
        per_key, batches = observed
        share = min(1.0, keys * per_key / many_rows) if many_rows else 0.0
        found = ", ".join(map(str, batches))
        return share, f"{one.name}: {keys:,} changed x {per_key:,.1f} {rule.of} each (batches {found})"
    one_rows = _rows(one, pinned)
    share = min(1.0, keys / one_rows) if one_rows else 1.0
    return share, f"{one.name}: {keys:,} of {one_rows:,} rows changed, spread evenly"


def _rows(source: Source, pinned: Mapping[str, int]) -> int:
    """The rows of `source` at its pin, from its log's file statistics: exact, or, where
    deletion vectors removed rows (a view's output), at most that many more."""
    exact = logged_row_count(source.path, pinned[source.name])
    if exact is not None:
        return exact
    return logged_rows(source.path, pinned[source.name])


def _observed_reach(
    rule: FanOutRule, one: Source, history: list[BatchRecord]
) -> tuple[float, tuple[int, ...]] | None:
    """Many-side rows reached per changed key of `one`, the median of the view's last five
    incremental batches in which `one` alone of the one sides changed (None: none did)."""
    found = []
    others = [o.name for o in rule.ones if o.name != one.name]
    for r in reversed(history):
        keys = r.metrics.get(f"changed_keys.{one.name}", 0)
        alone = not any(r.metrics.get(f"changed_keys.{o}", 0) for o in others)
        if r.mode is BatchMode.INCREMENTAL and keys and alone and "fanout_facts" in r.metrics:
            found.append((r.metrics["fanout_facts"] / keys, r.batch_id))
        if len(found) == 5:
            break
    if not found:
        return None
    return statistics.median(f for f, _ in found), tuple(sorted(b for _, b in found))


# --- the write --------------------------------------------------------------------------------


def write_estimate(
    view: View,
    p: BatchPlan,
    history: list[BatchRecord],
    settings: OutputSettings,
    *,
    full: bool,
    counted: int | None,
) -> str:
    """The output's write strategy (`choose_output`) for a batch that recomputes every key
    (`full`) or `counted` keys (estimated by the caller; None when `full`)."""
    output = OutputLog(view.path)
    told = OutputFacts(full, _drift(view, p, history), p.rewrite, counted, settings, output)
    return choose_output(told, keys=lambda: counted if counted is not None else output.rows).value


def _drift(view: View, p: BatchPlan, history: list[BatchRecord]) -> str | None:
    """Whether the batch changes the output's columns (the write then rewrites it): under a
    changed definition, when the columns the view takes from its inputs, or a setting that
    names output columns, changed. The batch compares the rows' schema with the table's; the
    plan, before any row, compares the two definitions (an estimate of the same answer)."""
    if "definition" not in p.notes or p.definition is None:
        return None
    committed = last_of(history, BatchStatus.COMMITTED)
    before = named_changes(view, committed, p.definition)[0] if committed is not None else None
    if before is None:
        return "the definition changed and the one before is not recorded"
    if before.get("columns") != p.definition.get("columns") or _naming(before) != _naming(p.definition):
        return "the view's columns change"
    return None


# The settings that name an output's columns (a kind's carried columns, prefixes, its list's name).
NAMING = ("columns", "right_columns", "prefix", "right_prefix", "into")


def _naming(value: Any, path: str = "") -> list[tuple[str, Any]]:  # noqa: ANN401 - a definition's JSON
    """The settings of a definition (as JSON) that name output columns, with where they are."""
    if isinstance(value, dict):
        return [
            found
            for key, inner in sorted(value.items())
            if key != "columns" or path  # the top level's "columns" are the inputs' (compared apart)
            for found in ([(f"{path}.{key}", inner)] if key in NAMING else _naming(inner, f"{path}.{key}"))
        ]
    if isinstance(value, list):
        return [found for i, inner in enumerate(value) for found in _naming(inner, f"{path}[{i}]")]
    return []


class DefaultSettings:
    """sink/strategy.OutputSettings at lakejoin's defaults (the plan has no Spark session to read
    a session's spark.lakejoin.* settings from): the upsert, the driver's MERGE and key ranges
    on (each module's conf reads "true" when unset), its sizes at the modules' defaults."""

    upsert = True
    listed_max_keys = spark_merge.ONE_MERGE_DEFAULT
    driver = True
    driver_max_keys = driver_merge.MAX_KEYS_DEFAULT
    driver_max_rows = driver_merge.MAX_ROWS_DEFAULT
    key_ranges = True


class OutputLog:
    """sink/strategy.OutputLog of a view's output from its Delta log (delta-rs): what the batch's
    write asks of it. A view without an output yet holds no file and no row."""

    def __init__(self, path: str) -> None:
        self._path = path

    @cached_property
    def _table(self) -> Any:  # noqa: ANN401 - a deltalake.DeltaTable, or None
        from deltalake import DeltaTable

        return DeltaTable(self._path) if DeltaTable.is_deltatable(self._path) else None

    @cached_property
    def _files(self) -> Any:  # noqa: ANN401 - a pyarrow.Table
        import pyarrow as pa

        return pa.table(self._table.get_add_actions(flatten=True)) if self._table is not None else None

    @cached_property
    def driver_writes(self) -> bool:
        if self._table is None:
            return False
        atomic = driver_merge.atomic_arrow(self._table.schema().to_arrow())
        return atomic and driver_merge.writes_table(self._table)

    @cached_property
    def rows(self) -> int:
        return driver_merge.logged_rows(self._files) if self._files is not None else 0

    @cached_property
    def files(self) -> int:
        return int(self._files.num_rows) if self._files is not None else 0


# --- the time ---------------------------------------------------------------------------------


def time_estimate(alike: Sequence[BatchRecord], size: int, action: str, *, own: bool) -> TimeEstimate | None:
    """The median seconds of (up to) three of `alike` (the view's batches of the same `action`)
    nearest in size to `size` change rows (changed keys, on a log scale); None before the view
    has one with its seconds. `own`: the view's own kind of batch (incremental, repair), which the
    text calls "its batches"."""
    timed = [r for r in alike if _seconds(r) is not None]
    if not timed:
        return None

    def distance(r: BatchRecord) -> tuple[float, int]:
        return abs(math.log1p(_changed_keys(r)) - math.log1p(size)), -r.batch_id

    nearest = sorted(timed, key=distance)[:3]
    seconds = statistics.median(_seconds(r) or 0.0 for r in nearest)
    ids = tuple(sorted(r.batch_id for r in nearest))
    sizes = sorted(_changed_keys(r) for r in nearest)
    span = f"{sizes[0]:,}" if sizes[0] == sizes[-1] else f"{sizes[0]:,}-{sizes[-1]:,}"
    how = (
        f"the median {'of its' if own else 'of'} batches {', '.join(map(str, ids))} ({action}, {span} "
        f"changed keys; this one ~{size:,} change rows), Spark's start not included"
    )
    return TimeEstimate(seconds, ids, how)


def _changed_keys(record: BatchRecord) -> int:
    return sum(n for k, n in record.metrics.items() if k.startswith("changed_keys."))


def _seconds(record: BatchRecord) -> float | None:
    phases = [n for k, n in record.metrics.items() if k.startswith("ms.")]
    if record.status is BatchStatus.ABANDONED or not phases:
        return None
    return sum(phases) / 1000
