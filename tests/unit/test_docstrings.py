"""The docstring examples that can run without Spark do run (issue 25): each module's examples
are checked by `doctest`, from the repository's root (they read pipelines/marketplace.yaml).
An example that needs a Spark session or a lakehouse stays marked `+SKIP`; this test also
checks that every module listed here has at least one example that runs."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
RUNNABLE = [
    "lakejoin.spec.model",
    "lakejoin.spec.parse",
    "lakejoin.spec.registry",
    "lakejoin.spec.settings",
    "lakejoin.spec.sections",
    "lakejoin.spec.json_schema",
    "lakejoin.spec.explained",
    "lakejoin.engine.kinds",
    "lakejoin.engine.repair",
    "lakejoin.airflow.submit_operator",
    "lakejoin.engine.pipeline",
    "lakejoin.delta.sql_text",
    "lakejoin.sink.key_upsert_rules",
    "lakejoin.cli.explain_model",
    "lakejoin.cli.explain_rules",
    "lakejoin.cli.explain_html",
]


@pytest.mark.parametrize("name", RUNNABLE)
def test_the_examples_run(name, monkeypatch):
    monkeypatch.chdir(ROOT)
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=True)
    assert result.failed == 0, f"{result.failed} example(s) of {name} failed (their output is above)"
    assert result.attempted > 0, f"{name} has no example that runs: mark fewer of them +SKIP"
