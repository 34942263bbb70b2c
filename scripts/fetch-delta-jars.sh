#!/usr/bin/env bash
# Fallback when Spark's Ivy cannot fetch Delta's jars itself: Maven fills ~/.m2/repository,
# which Spark's Ivy reads first. The artifact matches the pinned delta-spark wheel.
set -euo pipefail
version=$(.venv/bin/python -c "import importlib.metadata as m; print(m.version('delta-spark'))")
mvn -q dependency:get -Dartifact="io.delta:delta-spark_4.1_2.13:${version}"
