"""A run of a pipeline: one batch of each selected view, in dependency order, on one Spark session.

A view that fails does not stop the others, as in `dbt run`: every view that does not read it
(directly or through other views) still runs, the views that do are skipped, and the run ends
with what committed, what had nothing new, what failed and what was skipped. `fail_fast`
stops at the first failure and raises it, as a single view's batch does.

>>> results = run_pipeline(spark, spec, spec.view_order())   # doctest: +SKIP
>>> [(r.view, r.state.value) for r in results]              # doctest: +SKIP
[('display_products', 'committed'), ('names', 'skipped')]
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakejoin.engine.batch import BatchOutcome, BatchSummary, StepCallback, run_view
from lakejoin.errors import LakejoinError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakejoin.engine.repair import RepairRange
    from lakejoin.spec.model import PipelineSpec

logger = logging.getLogger(__name__)


class ViewState(enum.Enum):
    COMMITTED = "committed"
    NOTHING_NEW = "nothing new"
    FAILED = "failed"
    SKIPPED = "skipped"  # a view it reads failed, or was skipped for that reason


@dataclass
class ViewResult:
    view: str
    state: ViewState
    summary: BatchSummary | None = None
    error: str | None = None  # what failed (the error's own message), or which upstream did
    error_type: str | None = None

    @property
    def ok(self) -> bool:
        return self.state in (ViewState.COMMITTED, ViewState.NOTHING_NEW)


def run_pipeline(
    spark: SparkSession,
    spec: PipelineSpec,
    views: Iterable[str],
    *,
    full_refresh: bool = False,
    repair: RepairRange | None = None,
    checks: bool = True,
    fail_fast: bool = False,
    on_view: Callable[[str], StepCallback | None] | None = None,
    on_result: Callable[[ViewResult], None] | None = None,
) -> list[ViewResult]:
    """One batch of each of `views` (run in the spec's dependency order, whatever order they
    are given in). `on_view(name)` is called as a view starts and may return its phase callback;
    `on_result` gets each view's result as it ends."""
    selected = set(views)
    results: dict[str, ViewResult] = {}
    for name in (v for v in spec.view_order() if v in selected):
        blocked = [u for u in _upstream(spec, name) if u in results and not results[u].ok]
        if blocked:
            first = blocked[0]
            why = "failed" if results[first].state is ViewState.FAILED else "was skipped"
            result = ViewResult(name, ViewState.SKIPPED, error=f"it reads '{first}', which {why}")
        else:
            result = _one(spark, spec, name, full_refresh, repair, checks, fail_fast, on_view)
        results[name] = result
        if on_result is not None:
            on_result(result)
    return list(results.values())


def _one(
    spark: SparkSession,
    spec: PipelineSpec,
    name: str,
    full_refresh: bool,
    repair: RepairRange | None,
    checks: bool,
    fail_fast: bool,
    on_view: Callable[[str], StepCallback | None] | None,
) -> ViewResult:
    step = on_view(name) if on_view is not None else None
    try:
        summary = run_view(
            spark, spec, name, full_refresh=full_refresh, repair=repair, checks=checks, on_step=step
        )
    except LakejoinError as exc:
        if fail_fast:
            raise
        return ViewResult(name, ViewState.FAILED, error=str(exc), error_type=type(exc).__name__)
    except Exception as exc:  # a Spark or Delta failure: this view's, not the run's
        if fail_fast:
            raise
        logger.warning("lakejoin: view %s failed", name, exc_info=True)
        first_line = (str(exc).strip().splitlines() or [""])[0]
        return ViewResult(name, ViewState.FAILED, error=first_line[:500], error_type=type(exc).__name__)
    state = ViewState.COMMITTED if summary.outcome is BatchOutcome.COMMITTED else ViewState.NOTHING_NEW
    return ViewResult(name, state, summary=summary)


def _upstream(spec: PipelineSpec, view: str) -> list[str]:
    """The views `view` reads, directly or through other views."""
    seen: list[str] = []
    todo = list(spec.upstream_views(view))
    while todo:
        upstream = todo.pop(0)
        if upstream not in seen:
            seen.append(upstream)
            todo.extend(spec.upstream_views(upstream))
    return seen


def tally(results: Iterable[ViewResult]) -> str:
    """How many views ended in each state, the states that occurred, in a fixed order.

    >>> tally([ViewResult("b", ViewState.FAILED), ViewResult("a", ViewState.COMMITTED)])
    '1 committed, 1 failed'
    """
    counts: dict[ViewState, int] = {}
    for result in results:
        counts[result.state] = counts.get(result.state, 0) + 1
    return ", ".join(f"{counts[s]} {s.value}" for s in ViewState if s in counts) or "no views"
