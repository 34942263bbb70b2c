"""The Airflow task of a view whose spec says `spark: {run: submit}`: one batch, spark-submitted
to the cluster of an Airflow Spark connection.

The task runs `spark-submit` in client mode (the driver in the task, the executors on the
cluster) through the spec's `conn_id` (default `spark_default`), with the application
`lakejoin/airflow/submit.py` and:
- the lakejoin package as `--py-files`: a zip built when the task runs, kept per content;
- Delta's jars as `--jars`: the files `python -m lakejoin.delta.jars` resolved once at install
  (`lakejoin.delta.jars.jar_files`), so a submit resolves nothing and needs no registry; the driver
  logs at WARN (`lakejoin/delta/log4j2.properties`, through `spark.driver.extraJavaOptions`). Only
  when they were never resolved, `--packages` (the coordinate of the installed delta-spark);
- Delta's SQL extension and catalog as `--conf`;
- this task's Python interpreter for the executors (`spark.pyspark.python`): the cluster's
  workers need the same Python at the same path, as the containers of docker-compose.yaml have.

Nothing here imports Spark; Airflow's Spark provider is imported when a DAG builds the task.

>>> submit_batch(spec_file, spec, "display_products", batch_request, trigger_rule="none_failed")
... # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakejoin.delta.jars import LOG4J, delta_package, jar_files
from lakejoin.delta.session import DELTA_CONFIG
from lakejoin.spec.model import PipelineSpec

if TYPE_CHECKING:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

PACKAGE = Path(__file__).resolve().parent.parent  # the lakejoin package, shipped as --py-files
# When the task starts: the batch's options (`full_refresh`, `repair_from`...), or a skip.
BatchRequest = Callable[[PipelineSpec, str], Mapping[str, Any]]


def submit_batch(
    spec_file: str, spec: PipelineSpec, view: str, request: BatchRequest, **task_args: Any
) -> SparkSubmitOperator:
    """The task that spark-submits one batch of `view`.

    `request(spec, view)` runs when the task starts, before any Spark: it returns the options
    of the batch, which become the application's arguments, or raises AirflowSkipException.
    `task_args` are the task's own (`trigger_rule`, `retries`, `outlets`...).
    """
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    def prepare(context: Any) -> None:
        task = context["task"]
        task.application_args = [spec_file, view, *batch_arguments(request(spec, view))]
        task.py_files = str(package_zip())

    # Resolved once at install (lakejoin/delta/jars.py): spark-submit runs no Ivy and needs no registry.
    files = jar_files()
    quiet = {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J}"} if files else {}
    return SparkSubmitOperator(
        task_id=view,
        conn_id=spec.spark.conn_id,
        application=str(PACKAGE / "airflow" / "submit.py"),
        application_args=[spec_file, view],
        jars=",".join(files) or None,
        packages=None if files else delta_package(),
        conf={**DELTA_CONFIG, "spark.pyspark.python": sys.executable, **quiet},
        name=f"lakejoin_{spec.name}.{view}",
        pre_execute=prepare,
        # The task's OpenLineage run as the parent of the batch's (engine/lineage.PARENT_KEYS):
        # the provider puts it in the application's Spark conf; without the provider, nothing.
        openlineage_inject_parent_job_info=True,
        **task_args,
    )


def batch_arguments(options: Mapping[str, Any]) -> list[str]:
    """`lakejoin.airflow.submit`'s options for a batch's; false and empty options are left out.

    >>> batch_arguments({"full_refresh": True, "repair_from": "3", "repair_to": None})
    ['--full-refresh', '--repair-from=3']
    """
    arguments = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            arguments.append(flag)
        elif value not in (None, False, ""):
            arguments.append(f"{flag}={value}")
    return arguments


def package_zip(folder: Path | None = None) -> Path:
    """The lakejoin package as a zip for `--py-files`, built once per content of its sources
    (under the temp folder unless `folder` is given)."""
    sources = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.relative_to(PACKAGE).as_posix().encode() + b"\0" + source.read_bytes())
    target = (folder or Path(tempfile.gettempdir()) / "lakejoin-packages") / (
        f"lakejoin-{digest.hexdigest()[:16]}.zip"
    )
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for source in sources:
            archive.write(source, source.relative_to(PACKAGE.parent).as_posix())
    # Tasks starting at once may build the same zip: the rename makes one whole copy win.
    os.replace(partial, target)
    return target
