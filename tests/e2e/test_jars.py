"""Delta's jars are resolved once at install (issue 24): a Spark start resolves nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_a_spark_start_sets_no_packages_and_its_jar_files_exist(spark):
    from lakejoin.delta.jars import jar_files

    assert spark.conf.get("spark.jars.packages", None) in (None, "")
    listed = [j for j in spark.conf.get("spark.jars").split(",") if j]
    assert listed == jar_files() and listed, "run `make install` (python -m lakejoin.delta.jars) first"
    assert all(Path(j).is_file() for j in listed)
    assert any(Path(j).name.startswith("io.delta_delta-spark_") for j in listed)
