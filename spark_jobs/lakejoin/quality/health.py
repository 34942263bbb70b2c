"""A view's join health (issue 40), the arithmetic and the limits: no Spark.

Each kind counts, per measure (its registry entry's `measures`, spec/registry.py), the rows of
the affected keys that have the condition, before the batch (`old`) and after it (`new`); the
view's total is the last batch's total plus the difference, so no batch counts the whole view. A
full refresh counts every key: its `old` is the whole previous total. `waiting` is the oldest
row still waiting (for its right row, a list element's or a dimension row; a rekey's conflict
for its masters to part), in batches and in hours, and `late` the rows that waited and were
resolved in this batch.

The totals go to the batch log as metrics (`health.<measure>`, `health.rows`,
`health.waiting_batches`, `health.waiting_s`, `health.late`), where the next batch reads them
back, and the limits of the spec's `health:` are checked against them.

>>> after = totals({"missing_right": 10}, old={"missing_right": 3}, new={"missing_right": 1})
>>> after
{'missing_right': 8}
>>> [b.text() for b in breaches((Limit("missing_right", max_rows=5),), Health(after, rows=400))]
['missing_right: 8 rows (2 % of 400), over max_rows 5']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lakejoin.spec.model import Limit, OnBreach

PREFIX = "health."
ROWS, WAITING_BATCHES, WAITING_S, LATE = (
    "health.rows",
    "health.waiting_batches",
    "health.waiting_s",
    "health.late",
)
_NOT_MEASURES = {ROWS, WAITING_BATCHES, WAITING_S, LATE}


@dataclass(frozen=True)
class Health:
    """A view's join health after a batch."""

    totals: Mapping[str, int]  # rows per measure, in the whole view
    rows: int  # the rows a share is of: the kind's first input's (left rows, facts, masters)
    waiting_batches: int | None = None  # the oldest waiting row's age (None: none waits)
    waiting_seconds: float | None = None
    late: int = 0  # rows that waited and were resolved in this batch
    examples: Mapping[str, Sequence[str]] = field(default_factory=dict)  # a few keys per measure

    def metrics(self) -> dict[str, int]:
        out = {f"{PREFIX}{m}": n for m, n in self.totals.items()}
        out.update({ROWS: self.rows, LATE: self.late})
        if self.waiting_batches is not None:
            out[WAITING_BATCHES] = self.waiting_batches
            out[WAITING_S] = int(self.waiting_seconds or 0)
        return out

    def text(self) -> str:
        """One line for `lakejoin status`: the counts, then the oldest waiting row."""
        counts = ", ".join(f"{m} {n:,}" for m, n in self.totals.items())
        said = f"{counts} of {self.rows:,} rows"
        if self.waiting_batches is not None:
            hours = (self.waiting_seconds or 0) / 3600
            said += f"; oldest waiting {self.waiting_batches} batches ({hours:.1f} h)"
        return said + (f"; {self.late} arrived late" if self.late else "")

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, int]) -> Health | None:
        """What a batch logged (None: it logged no health, a batch from before issue 40)."""
        if ROWS not in metrics:
            return None
        measures = {k.removeprefix(PREFIX): v for k, v in metrics.items() if k.startswith(PREFIX)}
        totals = {m: n for m, n in measures.items() if f"{PREFIX}{m}" not in _NOT_MEASURES}
        waiting = metrics.get(WAITING_BATCHES)
        return cls(
            totals,
            metrics[ROWS],
            waiting,
            float(metrics.get(WAITING_S, 0)) if waiting is not None else None,
            metrics.get(LATE, 0),
        )


def totals(previous: Mapping[str, int], *, old: Mapping[str, int], new: Mapping[str, int]) -> dict[str, int]:
    """The whole view's counts after a batch: the last totals, less the affected keys' counts
    before it, plus theirs after it. A negative total means the last totals were not this
    view's (a log row lost): it is an error of lakejoin's, not the user's."""
    measures = dict.fromkeys([*previous, *old, *new])
    after = {m: previous.get(m, 0) - old.get(m, 0) + new.get(m, 0) for m in measures}
    wrong = {m: n for m, n in after.items() if n < 0}
    if wrong:
        raise ValueError(f"join health totals below zero {wrong}: previous {dict(previous)}, old {dict(old)}")
    return after


@dataclass(frozen=True)
class Breach:
    limit: Limit
    measured: float  # rows, or batches / hours for `waiting`
    bound: str  # which bound it broke: max_share, max_rows, max_batches, max_hours
    health: Health

    @property
    def fails(self) -> bool:
        return self.limit.on_breach is OnBreach.FAIL

    def text(self) -> str:
        measure, value = self.limit.measure, getattr(self.limit, self.bound)
        if measure == "waiting":
            unit = "batches" if self.bound == "max_batches" else "hours"
            said = f"waiting: the oldest row has waited {self.measured:g} {unit}"
        else:
            rows = int(self.measured)
            share = rows / self.health.rows if self.health.rows else 0.0
            said = f"{measure}: {rows:,} rows ({share * 100:.3g} % of {self.health.rows:,})"
        examples = self.health.examples.get(measure)
        keys = f" (e.g. {', '.join(examples)})" if examples else ""
        return f"{said}, over {self.bound} {value:g}{keys}"


def breaches(limits: Sequence[Limit], health: Health) -> list[Breach]:
    """The limits `health` breaks, in the spec's order (a limit with two bounds, once)."""
    found = []
    for limit in limits:
        if limit.measure == "waiting":
            measured = {
                "max_batches": health.waiting_batches,
                "max_hours": None if health.waiting_seconds is None else health.waiting_seconds / 3600,
            }
        else:
            rows = health.totals.get(limit.measure, 0)
            share = rows / health.rows if health.rows else 0.0
            measured = {"max_rows": rows, "max_share": share}
        for bound, value in measured.items():
            most = getattr(limit, bound)
            if most is not None and value is not None and value > most:
                shown = value if bound != "max_share" else health.totals.get(limit.measure, 0)
                found.append(Breach(limit, float(shown), bound, health))
                break
    return found
