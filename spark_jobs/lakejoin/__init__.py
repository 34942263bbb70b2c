"""lakejoin: incremental joins on Delta Lake.

>>> from lakejoin import load_spec, run_view, spark_session   # doctest: +SKIP
>>> spec = load_spec("pipelines/marketplace.yaml")            # doctest: +SKIP
>>> run_view(spark_session(spec.spark), spec, "display_products").outcome  # doctest: +SKIP
<BatchOutcome.COMMITTED: 'committed'>

Importing this package does not import Spark: Airflow parses specs at DAG parse time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lakejoin.errors import LakejoinError, SpecError
from lakejoin.spec.model import PipelineSpec
from lakejoin.spec.parse import load_spec

if TYPE_CHECKING:
    from lakejoin.delta.session import spark_session
    from lakejoin.engine.batch import run_view

__all__ = ["LakejoinError", "PipelineSpec", "SpecError", "load_spec", "run_view", "spark_session"]


def __getattr__(name: str) -> Any:
    if name == "run_view":
        from lakejoin.engine.batch import run_view

        return run_view
    if name == "spark_session":
        from lakejoin.delta.session import spark_session

        return spark_session
    raise AttributeError(name)
