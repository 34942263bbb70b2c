"""A run of a pipeline: one batch of each selected view, in dependency order, on one Spark session.

A view that fails does not stop the others, as in `dbt run`: every view that does not read it
(directly or through other views) still runs, the views that do are skipped, and the run ends
with what committed, what had nothing new, what failed and what was skipped. `fail_fast`
stops at the first failure and raises it, as a single view's batch does.

Views that do not read each other run at the same time, up to `parallel` at once (a thread
each, `DEFAULT_PARALLEL` unless asked): a view starts once every view it reads has ended. Each
thread runs its batch on a clone of the session (Spark SQL's settings are a session's, and a
batch stamps its output commit through them) in a FAIR scheduler pool of its own, so one
view's large job does not hold the others' small ones back. A failure in one thread is that
view's alone. On Spark Connect the views run one at a time.

>>> results = run_pipeline(spark, spec, spec.view_order())   # doctest: +SKIP
>>> [(r.view, r.state.value) for r in results]              # doctest: +SKIP
[('display_products', 'committed'), ('names', 'skipped')]
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakejoin.engine.batch import BatchOutcome, BatchSummary, StepCallback, run_view
from lakejoin.errors import LakejoinError
from lakejoin.quality.checks import pages_once_per_run

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakejoin.engine.repair import RepairRange
    from lakejoin.spec.model import PipelineSpec

logger = logging.getLogger(__name__)

# Views run at once by default. Measured on the 2-core machine with bench/tiny_views.py (60 tiny
# views, one run): see docs/benchmarks.md, "60 tiny views".
DEFAULT_PARALLEL = 2
POOL = "spark.scheduler.pool"


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
    parallel: int | None = None,
    on_view: Callable[[str], StepCallback | None] | None = None,
    on_result: Callable[[ViewResult], None] | None = None,
) -> list[ViewResult]:
    """One batch of each of `views` (run in the spec's dependency order, whatever order they
    are given in; up to `parallel` at once, see the module). `on_view(name)` is called as a
    view starts and may return its phase callback; `on_result` gets each view's result as it
    ends, on the calling thread. The results come in the spec's order. The batches' Data Docs
    and report pages are built once, after the last view (quality/checks.pages_once_per_run)."""
    with pages_once_per_run(spec):
        return _run_views(
            spark, spec, views, full_refresh, repair, checks, fail_fast, parallel, on_view, on_result
        )


def _run_views(
    spark: SparkSession,
    spec: PipelineSpec,
    views: Iterable[str],
    full_refresh: bool,
    repair: RepairRange | None,
    checks: bool,
    fail_fast: bool,
    parallel: int | None,
    on_view: Callable[[str], StepCallback | None] | None,
    on_result: Callable[[ViewResult], None] | None,
) -> list[ViewResult]:
    selected = set(views)
    order = [v for v in spec.view_order() if v in selected]
    width = DEFAULT_PARALLEL if parallel is None else parallel
    if width < 1:
        raise ValueError(f"parallel must be at least 1, not {width}")
    if _remote(spark):
        width = 1
    upstream = {name: [u for u in _upstream(spec, name) if u in selected] for name in order}
    results: dict[str, ViewResult] = {}

    def ended(result: ViewResult) -> None:
        results[result.view] = result
        if on_result is not None:
            on_result(result)

    def run(name: str, session: SparkSession) -> ViewResult:
        return _one(session, spec, name, full_refresh, repair, checks, fail_fast, on_view)

    waiting = list(order)
    if width == 1:
        for name in waiting:
            ended(_blocked(name, upstream[name], results) or run(name, spark))
        return [results[name] for name in order]
    running: dict[Future[ViewResult], str] = {}
    failure: BaseException | None = None
    with ThreadPoolExecutor(max_workers=width, thread_name_prefix="lakejoin-view") as pool:
        while waiting or running:
            for name in list(waiting):
                if failure is not None or len(running) >= width:
                    break
                blocked = _blocked(name, upstream[name], results)
                if blocked is not None:
                    waiting.remove(name)
                    ended(blocked)
                elif all(u in results for u in upstream[name]):
                    waiting.remove(name)
                    running[pool.submit(_in_a_thread, spark, name, run)] = name
            if failure is not None:
                waiting.clear()
            if not running:
                continue
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                name = running.pop(future)
                try:
                    ended(future.result())
                except BaseException as exc:  # fail_fast: the first failure ends the run
                    failure = failure or exc
    if failure is not None:
        raise failure
    return [results[name] for name in order]


def _blocked(name: str, upstream: list[str], results: dict[str, ViewResult]) -> ViewResult | None:
    """The view skipped, when a view it reads failed or was skipped."""
    blocked = [u for u in upstream if u in results and not results[u].ok]
    if not blocked:
        return None
    first = blocked[0]
    why = "failed" if results[first].state is ViewState.FAILED else "was skipped"
    return ViewResult(name, ViewState.SKIPPED, error=f"it reads '{first}', which {why}")


def _in_a_thread(
    spark: SparkSession, name: str, run: Callable[[str, SparkSession], ViewResult]
) -> ViewResult:
    """`run(name, session)` with the session `thread_session` gives this thread."""
    with thread_session(spark, name) as session:
        return run(name, session)


@contextmanager
def thread_session(spark: SparkSession, pool: str) -> Iterator[SparkSession]:
    """A clone of `spark` (its settings as they are now), active on this thread, whose jobs go
    to the FAIR pool `pool`: the JVM's Delta code asks for the thread's active session."""
    from pyspark.sql import SparkSession

    clone = SparkSession(spark.sparkContext, spark._jsparkSession.cloneSession())
    session_class = SparkSession._get_j_spark_session_class(spark._jvm)
    session_class.setActiveSession(clone._jsparkSession)
    spark.sparkContext.setLocalProperty(POOL, pool)
    try:
        yield clone
    finally:
        spark.sparkContext.setLocalProperty(POOL, None)  # type: ignore[arg-type]
        session_class.clearActiveSession()


def _remote(spark: SparkSession) -> bool:
    """Whether `spark` is a Spark Connect session (no clone of it to give a thread)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


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
