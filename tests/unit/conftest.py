"""tests/unit runs without a JVM: no test here may import pyspark, directly or through lakejoin.

Checked after each test of a session that holds only tests/unit (with other folders, their
modules import pyspark at collection, and one process serves them all): a test that brought
pyspark in fails its teardown, named."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def _only_unit(session: pytest.Session) -> bool:
    return all(HERE in Path(item.path).parents for item in session.items)


@pytest.fixture(autouse=True)
def _no_pyspark(request: pytest.FixtureRequest):
    yield
    if _only_unit(request.session):
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j"))
        assert not loaded, f"a test of tests/unit imported {loaded[:3]}: keep the JVM's modules out of them"
