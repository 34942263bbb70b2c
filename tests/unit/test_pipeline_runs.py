"""engine/pipeline.py's run of a pipeline, as a truth table: views run in dependency order, a
failed view skips the views that read it (directly or through others) and no other, and the run
ends with a tally; one view at a time or several at once, in threads. Each view's batch (and the
session a thread gets) is stood in for; no Spark."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import pytest

from lakejoin.engine import pipeline
from lakejoin.engine.batch import BatchOutcome, BatchSummary
from lakejoin.engine.pipeline import ViewResult, ViewState, run_pipeline, tally
from lakejoin.errors import KeyConflictError
from lakejoin.spec.parse import parse_spec

pytestmark = pytest.mark.unit

# b reads a, c reads b, d reads nothing of them.
CHAIN = """\
pipeline: chain
storage: ./store
sources:
  products:  {path: ./products,  key: product_id}
  merchants: {path: ./merchants, key: merchant_id}
views:
  c:
    rekey: {source: b, key: title}
  a:
    fk_join: {left: products, right: merchants, fk: merchant_id}
  b:
    fk_join: {left: a, right: merchants, fk: merchant_id}
  d:
    rekey: {source: merchants, key: display_name}
"""
CONFLICT = KeyConflictError(
    "2 derived key(s) are claimed by more than one master row", where="view", fix="fix"
)


def run(
    monkeypatch, outcomes: dict, views=("a", "b", "c", "d"), *, during=None, **kw
) -> tuple[list[ViewResult], list[str]]:  # noqa: ANN001
    """Run the views of CHAIN whose batch ends as `outcomes` says (a BatchOutcome, or an error
    it raises), calling `during(name)` inside each batch; returns the results and the views
    whose batch ran, in the order they started."""
    ran: list[str] = []

    def run_view(spark, spec, name, **kw) -> BatchSummary:  # noqa: ANN001, ARG001
        ran.append(name)
        if during is not None:
            during(name)
        outcome = outcomes.get(name, BatchOutcome.COMMITTED)
        if isinstance(outcome, Exception):
            raise outcome
        return BatchSummary(name, outcome)

    @contextmanager
    def thread_session(spark, pool):  # noqa: ANN001, ANN202, ARG001 - no Spark to clone
        yield spark

    monkeypatch.setattr(pipeline, "run_view", run_view)
    monkeypatch.setattr(pipeline, "thread_session", thread_session)
    return run_pipeline(None, parse_spec(CHAIN, "chain.yaml"), views, **kw), ran


def states(results: list[ViewResult]) -> list[tuple[str, str, str | None]]:
    return [(r.view, r.state.value, r.error) for r in results]


@pytest.mark.parametrize(
    ("outcomes", "expected", "ran"),
    [
        pytest.param(
            {},
            [
                ("a", "committed", None),
                ("b", "committed", None),
                ("c", "committed", None),
                ("d", "committed", None),
            ],
            "abcd",
            id="all_commit",
        ),
        pytest.param(
            {"a": CONFLICT},
            [
                ("a", "failed", str(CONFLICT)),
                ("b", "skipped", "it reads 'a', which failed"),
                ("c", "skipped", "it reads 'b', which was skipped"),
                ("d", "committed", None),
            ],
            "ad",
            id="a_failure_skips_what_reads_it",
        ),
        pytest.param(
            {"b": RuntimeError("executor lost\nat org.apache.spark...")},
            [
                ("a", "committed", None),
                ("b", "failed", "executor lost"),  # a Spark error's first line
                ("c", "skipped", "it reads 'b', which failed"),
                ("d", "committed", None),
            ],
            "abd",
            id="any_error_fails_its_view_only",
        ),
        pytest.param(
            {"a": BatchOutcome.SKIPPED},
            [
                ("a", "nothing new", None),
                ("b", "committed", None),
                ("c", "committed", None),
                ("d", "committed", None),
            ],
            "abcd",
            id="nothing_new_blocks_nothing",
        ),
    ],
)
@pytest.mark.parametrize("parallel", [1, 2, 4])
def test_a_failed_view_skips_the_views_that_read_it(monkeypatch, outcomes, expected, ran, parallel):
    results, started = run(monkeypatch, outcomes, parallel=parallel)

    assert states(results) == expected  # in the spec's order, however they ran
    if parallel == 1:
        assert "".join(started) == ran
    else:  # a and d start together: either may be first
        assert sorted(started) == sorted(ran)


def test_views_that_do_not_read_each_other_run_at_once_and_a_reader_after_its_upstream(monkeypatch):
    """a and d meet at a barrier only two views running at once can pass; b starts only once
    a has ended, c once b has."""
    meet = threading.Barrier(2, timeout=10)
    ended: list[str] = []

    def during(name: str) -> None:
        if name in ("a", "d"):
            meet.wait()
        if name == "b":
            assert "a" in ended
        if name == "c":
            assert "b" in ended

    results, _ = run(monkeypatch, {}, during=during, parallel=2, on_result=lambda r: ended.append(r.view))

    assert [(r.view, r.state) for r in results] == [(v, ViewState.COMMITTED) for v in "abcd"]


def test_one_at_a_time_no_two_views_meet(monkeypatch):
    meet = threading.Barrier(2, timeout=0.5)
    results, _ = run(monkeypatch, {}, during=lambda n: meet.wait() if n in "ad" else None, parallel=1)

    assert results[0].state is ViewState.FAILED and results[0].error_type == "BrokenBarrierError"


@pytest.mark.parametrize("parallel", [0, -1])
def test_a_width_below_one_is_refused(monkeypatch, parallel):
    with pytest.raises(ValueError, match="at least 1"):
        run(monkeypatch, {}, parallel=parallel)


def test_the_views_run_in_dependency_order_whatever_order_they_are_given_in(monkeypatch):
    results, started = run(monkeypatch, {}, views=["d", "c", "a"], parallel=1)

    assert started == ["a", "c", "d"]  # b was not selected: c reads its committed output
    assert [r.view for r in results] == started


@pytest.mark.parametrize("parallel", [1, 2])
def test_fail_fast_raises_the_first_failure_and_runs_nothing_after_it(monkeypatch, parallel):
    started: list[str] = []
    with pytest.raises(KeyConflictError):
        run(monkeypatch, {"a": CONFLICT}, fail_fast=True, parallel=parallel, during=started.append)
    assert "b" not in started and "c" not in started  # d may have started beside a


def test_the_error_type_of_a_failed_view_is_kept(monkeypatch):
    results, _ = run(monkeypatch, {"a": CONFLICT, "d": ValueError("x" * 600)})
    by_view = {r.view: r for r in results}

    assert (by_view["a"].error_type, by_view["d"].error_type) == ("KeyConflictError", "ValueError")
    assert by_view["d"].error == "x" * 500  # a long message is cut
    assert not by_view["a"].ok and not by_view["b"].ok


@pytest.mark.parametrize(
    ("states_", "told"),
    [
        ([], "no views"),
        ([ViewState.SKIPPED, ViewState.COMMITTED, ViewState.COMMITTED], "2 committed, 1 skipped"),
        ([ViewState.FAILED, ViewState.NOTHING_NEW, ViewState.SKIPPED], "1 nothing new, 1 failed, 1 skipped"),
    ],
)
def test_a_tally_counts_the_states_in_a_fixed_order(states_, told):
    assert tally(ViewResult(str(i), s) for i, s in enumerate(states_)) == told


@pytest.mark.parametrize("given", ["0", "two"])
def test_the_cli_refuses_a_width_that_is_no_whole_number_above_zero(capsys, given):
    from lakejoin.cli.main import main

    with pytest.raises(SystemExit) as stopped:
        main(["run", "pipeline.yaml", "--parallel", given])

    assert stopped.value.code == 2
    assert f"expected a whole number of views of at least 1, got {given!r}" in capsys.readouterr().err
