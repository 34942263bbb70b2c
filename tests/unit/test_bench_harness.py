"""bench/harness.py's `run` (issue 53): the common options with each benchmark's defaults, the
work folder cleared before measuring, the exit status the benchmark's, and no Spark (no pyspark
import) unless the measurement asks for it."""

from __future__ import annotations

import argparse
import json
import sys

import pytest
from bench.harness import Run, Session, run

pytestmark = pytest.mark.unit


def _run(argv, measure, **given):
    settings = {"program": "python -m bench.x", "doc": "x", "session": Session("x", driver_memory="8g")}
    return run(argv, work="unused", measure=measure, **settings | given)


def test_the_common_options_take_each_benchmarks_defaults(tmp_path):
    seen: list[Run] = []

    status = _run(["--work", str(tmp_path / "lake")], lambda r: seen.append(r) or 3, orders=1_500_000)

    args = seen[0].args
    assert status == 3
    assert (args.orders, args.out, args.seed, args.driver_memory) == (1_500_000, "docs", 42, "8g")
    assert "pyspark" not in sys.modules


def test_a_benchmark_without_those_options_does_not_take_them(tmp_path):
    seen: list[Run] = []
    options = {"session": Session("x"), "options": lambda p: p.add_argument("--widths", default="1,2,3")}

    _run(["--work", str(tmp_path), "--widths", "2"], lambda r: seen.append(r) or 0, **options)

    assert seen[0].args.widths == "2"
    assert not hasattr(seen[0].args, "orders") and not hasattr(seen[0].args, "driver_memory")
    with pytest.raises(SystemExit):
        _run(["--orders", "5"], lambda r: 0, session=Session("x"))


def test_the_work_folder_is_cleared_before_measuring(tmp_path):
    lake = tmp_path / "lake"
    (lake / "old").mkdir(parents=True)

    _run(["--work", str(lake)], lambda r: int(r.work.exists()))

    assert not lake.exists()


def test_the_command_is_the_options_as_given_and_targets_go_by_owner(tmp_path):
    out = tmp_path / "docs"
    (out / "bench").mkdir(parents=True)
    (out / "bench" / "targets.json").write_text(json.dumps([{"batch": "x_dv"}, {"batch": "x"}]))

    def measure(r: Run) -> int:
        assert r.command == f"--out {out} --work {tmp_path / 'lake'}"
        r.replace_targets("x", [{"batch": "x new"}])
        return 0

    assert _run(["--out", str(out), "--work", str(tmp_path / "lake")], measure) == 0
    assert json.loads((out / "bench" / "targets.json").read_text()) == [{"batch": "x_dv"}, {"batch": "x new"}]


def _matrix_args(**given: object) -> argparse.Namespace:
    matrix = dict.fromkeys(("orders", "rates", "variants", "scenarios"))
    return argparse.Namespace(**{"smoke": False, "out": "docs", **matrix, **given})


def test_the_matrix_smoke_option_stands_for_cis_gate_and_keeps_a_given_out():
    from bench.__main__ import SMOKE_ORDERS, smoke

    args = smoke(_matrix_args(smoke=True))
    assert (args.orders, args.rates, args.variants) == (str(SMOKE_ORDERS), "0.01", "full,inc")
    assert (args.scenarios, args.out) == ("mixed,hot_dim,skewed", "build/bench-smoke")
    assert smoke(_matrix_args(smoke=True, out="/tmp/x")).out == "/tmp/x"


def test_the_smoke_option_refuses_the_options_it_would_override_and_without_it_they_default():
    from bench.__main__ import MATRIX, smoke

    refused = "--smoke sets --rates, --variants itself: drop --rates and --variants"
    with pytest.raises(ValueError, match=refused):
        smoke(_matrix_args(smoke=True, rates="0.1", variants="inc"))
    args = smoke(_matrix_args(variants="inc"))
    assert (args.variants, args.orders, args.rates) == ("inc", MATRIX["orders"], MATRIX["rates"])
    assert args.out == "docs"


def test_the_matrix_refuses_smoke_with_a_variant_before_spark_starts(capsys):
    from bench.__main__ import main

    assert main(["--smoke", "--variants", "inc", "--work", "unused-bench-lake"]) == 2
    assert "--smoke sets --variants itself" in capsys.readouterr().err
    assert "pyspark" not in sys.modules


def test_the_matrix_refuses_an_unknown_variant_before_spark_starts(capsys):
    from bench.__main__ import main

    assert main(["--variants", "inc,bogus", "--work", "unused-bench-lake"]) == 2
    assert "unknown variants ['bogus']" in capsys.readouterr().err
    assert "pyspark" not in sys.modules


def test_python_m_bench_name_is_that_modules_command(capsys):
    from bench.__main__ import main

    with pytest.raises(SystemExit) as done:
        main(["fixed_cost", "--help"])

    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("usage: python -m bench.fixed_cost")
    assert "pyspark" not in sys.modules


def test_python_m_bench_help_lists_every_command_with_its_modules_summary(capsys):
    from bench.__main__ import COMMANDS, main, summary

    with pytest.raises(SystemExit) as done:
        main(["--help"])

    shown = capsys.readouterr().out
    assert done.value.code == 0
    assert all(f"  {name} " in shown and summary(name) in shown for name in COMMANDS)
    assert summary("fixed_cost") == "what a batch costs when (almost) nothing changed (issue 23)."
    assert all(f"--{o} " in shown and "(default: " in shown for o in ("out", "work", "seed", "driver-memory"))
    assert "pyspark" not in sys.modules
