"""OpenLineage events for every batch (issue 39): START after the plan, COMPLETE after the batch
commit (or after changes of no content: then no output), FAIL with the error. A view with
nothing new sends nothing.

Sent with `openlineage-python` through its own configuration (`openlineage.yml`,
`OPENLINEAGE_URL`, `OPENLINEAGE__TRANSPORT__*`); with none, no client is made and nothing is
sent. A collector that is down or refuses an event is a warning, never the batch's error.

Everything an event says is what the batch already knows: its plan (pins, input columns), its
summary (counts, output version), the rows' schema and its checks. No Spark job, no Delta read.
- job: namespace = the pipeline, name = `<pipeline>.<view>`;
- run id: a UUID derived from the pipeline, the view and the batch id, so a retry of a batch
  is the same run; the parent run (an Airflow task's) is read from the Spark conf keys the
  OpenLineage provider injects into spark-submit (`spark.openlineage.parentRunId`, ...), which
  the in-process Airflow tasks set the same way;
- datasets are named as OpenLineage's Spark agent names a Delta table (a local path: namespace
  `file`, name the absolute path), so a catalog merges both.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import traceback
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlparse

from lakejoin.spec.column_lineage import IDENTITY, ColumnLineage
from lakejoin.spec.model import PipelineSpec, View
from lakejoin.spec.registry import KINDS

if TYPE_CHECKING:
    from openlineage.client import OpenLineageClient
    from openlineage.client.event_v2 import InputDataset, OutputDataset, RunEvent
    from pyspark.sql import SparkSession

    from lakejoin.delta.plans import BatchPlan
    from lakejoin.quality.validations import CheckResult
    from lakejoin.spec.model import PipelineSpec, View

logger = logging.getLogger(__name__)

PRODUCER = "urn:lakejoin:0.1.0"  # a URI naming what wrote the event (the spec asks for one)
_FACETS = "urn:lakejoin:facets:1-0-0:"  # lakejoin's own facets' schema URLs start with this
# Run ids are uuid5 of "<pipeline>/<view>/<batch id>" in this namespace: fixed, never changed.
RUNS = uuid.UUID("6b1b7c52-3f0e-4d8e-9a55-4f1f2d0c7a31")
# The Spark conf keys OpenLineage's Airflow provider injects into spark-submit, read here for
# the parent run; lakejoin's in-process Airflow tasks set the same keys on their session.
PARENT_KEYS = {
    "namespace": "spark.openlineage.parentJobNamespace",
    "name": "spark.openlineage.parentJobName",
    "run": "spark.openlineage.parentRunId",
    "root_namespace": "spark.openlineage.rootParentJobNamespace",
    "root_name": "spark.openlineage.rootParentJobName",
    "root_run": "spark.openlineage.rootParentRunId",
}
# Spark's simpleString names against the type names OpenLineage's Spark agent writes.
_TYPE_NAMES = {"bigint": "long", "int": "integer", "smallint": "short", "tinyint": "byte"}
_SEVERITY = {"critical": "error", "warning": "warn"}
_lock = threading.Lock()  # views run in threads; one client's transport is not shared safely


@functools.cache
def _facet_classes() -> dict[str, type]:
    """lakejoin's three facets, made when first needed (openlineage-python imported lazily)."""
    import attr
    from openlineage.client.facet_v2 import InputDatasetFacet, OutputDatasetFacet, RunFacet

    @attr.define
    class LakejoinBatchRunFacet(RunFacet):
        pipeline: str
        view: str
        batchId: int  # noqa: N815 - OpenLineage's field names are camelCase
        mode: str
        reason: str | None = None
        startVersions: dict[str, int] = attr.field(factory=dict)  # noqa: N815
        pinnedVersions: dict[str, int] = attr.field(factory=dict)  # noqa: N815

        @staticmethod
        def _get_schema() -> str:
            return _FACETS + "LakejoinBatchRunFacet"

    @attr.define
    class LakejoinChangesInputDatasetFacet(InputDatasetFacet):
        role: str  # "changes": its change feed read after startVersion up to pinnedVersion; "pinned"
        startVersion: int  # noqa: N815 - the last version read before (exclusive); -1: none
        pinnedVersion: int  # noqa: N815
        changedKeys: int | None = None  # noqa: N815 - the keys whose content changed (COMPLETE)
        readBy: str | None = None  # noqa: N815 - who read the changes: "driver" (delta-rs), "spark"

        @staticmethod
        def _get_schema() -> str:
            return _FACETS + "LakejoinChangesInputDatasetFacet"

    @attr.define
    class LakejoinBatchOutputDatasetFacet(OutputDatasetFacet):
        mode: str  # incremental, full_refresh, repair, fanout_fallback
        reason: str | None
        inserted: int
        updated: int
        deleted: int
        affectedKeys: int  # noqa: N815
        write: str | None = None  # the strategy that wrote the output (sink/strategy.py); optional

        @staticmethod
        def _get_schema() -> str:
            return _FACETS + "LakejoinBatchOutputDatasetFacet"

    return {
        "run": LakejoinBatchRunFacet,
        "input": LakejoinChangesInputDatasetFacet,
        "output": LakejoinBatchOutputDatasetFacet,
    }


class BatchSummary(Protocol):
    """What the events read of a batch's summary (engine/batch.BatchSummary)."""

    output_version: int | None
    pinned_versions: dict[str, int]
    changed_keys: dict[str, int]
    change_reads: dict[str, str]
    affected_keys: int
    inserted: int
    updated: int
    deleted: int
    reason: str | None
    notes: dict[str, str]
    kind_metrics: dict[str, int]
    write: str | None


def lineage_client() -> OpenLineageClient | None:
    """The client OpenLineage's configuration asks for, or None when it asks for none (the
    client itself would print every event to the console then). Without a file or a variable
    of OpenLineage's, the client is not even imported (1-2 s on this machine)."""
    if not _configured_somewhere():
        return None
    try:
        from openlineage.client import OpenLineageClient
        from openlineage.client.transport.noop import NoopConfig, NoopTransport
    except ImportError:  # pragma: no cover - a core dependency; an install without it sends nothing
        return None
    if os.environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        return None
    if not os.environ.get("OPENLINEAGE_URL"):
        configured = OpenLineageClient(transport=NoopTransport(NoopConfig())).config.transport or {}
        if not configured.get("type"):
            return None
    return OpenLineageClient()


def _configured_somewhere() -> bool:
    """Whether any place openlineage-python reads its configuration from has something: its
    variables, or one of its files (`$OPENLINEAGE_CONFIG`, ./openlineage.yml,
    ~/.openlineage/openlineage.yml)."""
    from pathlib import Path

    if any(name.startswith(("OPENLINEAGE_URL", "OPENLINEAGE__")) and os.environ[name] for name in os.environ):
        return True
    files = [os.environ.get("OPENLINEAGE_CONFIG"), "openlineage.yml", "~/.openlineage/openlineage.yml"]
    return any(f and Path(f).expanduser().is_file() for f in files)


def column_lineage(
    spec: PipelineSpec, view: View, schemas: Mapping[str, Mapping[str, str]], output_columns: Sequence[str]
) -> ColumnLineage:
    """Which input columns each of `output_columns` (the view's output, in order) comes from,
    by the rule of the view's kind (its registry entry's `lineage`, spec/column_lineage.py)."""
    return KINDS[view.kind].lineage(spec, view.definition, schemas, output_columns)


def run_id(pipeline: str, view: str, batch_id: int) -> str:
    """The batch's OpenLineage run id: the same for every attempt at one batch."""
    return str(uuid.uuid5(RUNS, f"{pipeline}/{view}/{batch_id}"))


def dataset_name(path: str) -> tuple[str, str]:
    """(namespace, name) of the Delta table at `path`, as the Spark agent names it: a local path
    is ("file", the absolute path); a URI is ("scheme://authority", its path)."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return "file", (parsed.path if parsed.scheme else path).rstrip("/") or "/"
    return f"{parsed.scheme}://{parsed.netloc}", parsed.path.rstrip("/") or "/"


def type_name(simple: str) -> str:
    return _TYPE_NAMES.get(simple, simple)


class BatchLineage:
    """The events of one batch. Made after its plan; `start`, then `complete` or `fail`."""

    def __init__(
        self,
        spec: PipelineSpec,
        view: View,
        plan: BatchPlan,
        client: OpenLineageClient | None,
        parent: Mapping[str, str] | None = None,
    ) -> None:
        self.spec, self.view, self.plan, self.client = spec, view, plan, client
        self.parent = dict(parent or {})
        self.output_columns: list[tuple[str, str]] | None = None  # (name, type) of the rows written
        self.checks: Sequence[CheckResult] | None = None

    @classmethod
    def of(cls, spark: SparkSession, spec: PipelineSpec, view: View, plan: BatchPlan) -> BatchLineage:
        client = lineage_client()
        parent = None
        if client is not None:  # the conf is read on the driver: no Spark job
            found = {k: spark.conf.get(key, None) for k, key in PARENT_KEYS.items()}
            parent = {k: v for k, v in found.items() if v}
        return cls(spec, view, plan, client, parent)

    # --- what the batch tells -------------------------------------------------------------

    def start(self) -> None:
        self._emit("START", self._inputs(None))

    def complete(self, summary: BatchSummary) -> None:
        outputs = [] if summary.output_version is None else [self._output(summary)]
        self._emit(
            "COMPLETE", self._inputs(summary.changed_keys, summary.change_reads), outputs, summary=summary
        )

    def fail(self, error: BaseException) -> None:
        if self.client is None:
            return
        from openlineage.client.facet_v2 import error_message_run

        message = getattr(error, "message", None) or str(error) or type(error).__name__
        stack = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        facet = error_message_run.ErrorMessageRunFacet(
            message=message, programmingLanguage="python", stackTrace=stack, producer=PRODUCER
        )
        self._emit("FAIL", self._inputs(None), run_facets={"errorMessage": facet})

    # --- the event --------------------------------------------------------------------------

    def event(
        self,
        state: str,
        inputs: list[InputDataset],
        outputs: Sequence[OutputDataset] = (),
        *,
        summary: BatchSummary | None = None,
        run_facets: Mapping[str, Any] | None = None,
    ) -> RunEvent:
        from openlineage.client.event_v2 import Job, Run, RunEvent, RunState
        from openlineage.client.facet_v2 import job_type_job, parent_run

        plan, pipeline = self.plan, self.spec.name
        facets: dict[str, Any] = {
            "lakejoin_batch": _facet_classes()["run"](
                pipeline=pipeline,
                view=self.view.name,
                batchId=plan.batch_id,
                mode=self._mode(summary),
                reason=None if summary is None else summary.reason,
                startVersions=dict(plan.start_versions),
                pinnedVersions=dict(summary.pinned_versions if summary else plan.pinned_versions),
                producer=PRODUCER,
            ),
            **(run_facets or {}),
        }
        if self.parent.get("run") and self.parent.get("name"):
            root = None
            if self.parent.get("root_run") and self.parent.get("root_name"):
                root = parent_run.Root(
                    run=parent_run.RootRun(runId=self.parent["root_run"]),
                    job=parent_run.RootJob(
                        namespace=self.parent.get("root_namespace")
                        or self.parent.get("namespace")
                        or "default",
                        name=self.parent["root_name"],
                    ),
                )
            facets["parent"] = parent_run.ParentRunFacet(
                run=parent_run.Run(runId=self.parent["run"]),
                job=parent_run.Job(
                    namespace=self.parent.get("namespace") or "default", name=self.parent["name"]
                ),
                root=root,
                producer=PRODUCER,
            )
        job_facets: dict[str, Any] = {
            "jobType": job_type_job.JobTypeJobFacet(
                processingType="BATCH",
                integration="LAKEJOIN",
                jobType=self.view.kind.value.upper(),
                producer=PRODUCER,
            )
        }
        return RunEvent(
            eventType=RunState[state],
            eventTime=datetime.now(UTC).isoformat(),
            run=Run(runId=run_id(pipeline, self.view.name, plan.batch_id), facets=facets),
            job=Job(namespace=pipeline, name=f"{pipeline}.{self.view.name}", facets=job_facets),
            inputs=inputs,
            outputs=list(outputs),
            producer=PRODUCER,
        )

    def _emit(
        self, state: str, inputs: list[InputDataset], outputs: Sequence[OutputDataset] = (), **kw: Any
    ) -> None:
        if self.client is None:
            return
        try:
            event = self.event(state, inputs, outputs, **kw)
            with _lock:
                self.client.emit(event)
        except Exception:  # a lineage collector never fails a batch
            logger.warning(
                "lakejoin: the OpenLineage %s event of batch %s of %s was not sent",
                state,
                self.plan.batch_id,
                self.view.name,
                exc_info=True,
            )

    def _mode(self, summary: BatchSummary | None) -> str:
        if summary is not None and summary.kind_metrics.get("full_recompute"):
            return "fanout_fallback"
        return self.plan.mode.value

    def _inputs(
        self, changed: Mapping[str, int] | None, reads: Mapping[str, str] | None = None
    ) -> list[InputDataset]:
        """Every source and upstream view the batch read, at its pin (state tables are not
        inputs: they are the view's own); `reads`: who read each one's changes."""
        from openlineage.client.event_v2 import InputDataset
        from openlineage.client.facet_v2 import dataset_version_dataset

        facet = _facet_classes()["input"]
        plan = self.plan
        inputs = []
        for name in self.view.inputs:
            source = self.spec.sources[name]
            pinned = plan.pinned_versions[name]
            start = plan.start_versions.get(name, -1)
            role = "changes" if changed is None or name in changed else "pinned"
            namespace, path = dataset_name(source.path)
            inputs.append(
                InputDataset(
                    namespace=namespace,
                    name=path,
                    facets={
                        "version": dataset_version_dataset.DatasetVersionDatasetFacet(
                            datasetVersion=str(pinned), producer=PRODUCER
                        ),
                        **self._schema(self.plan.schemas.get(name, {}).items()),
                    },
                    inputFacets={
                        "lakejoin_changes": facet(
                            role=role,
                            startVersion=start,
                            pinnedVersion=pinned,
                            changedKeys=None if changed is None else changed.get(name),
                            readBy=(reads or {}).get(name),
                            producer=PRODUCER,
                        )
                    },
                )
            )
        return inputs

    def _output(self, summary: BatchSummary) -> OutputDataset:
        from openlineage.client.event_v2 import OutputDataset
        from openlineage.client.facet_v2 import dataset_version_dataset, output_statistics_output_dataset

        namespace, path = dataset_name(self.view.path)
        facets: dict[str, Any] = {
            "version": dataset_version_dataset.DatasetVersionDatasetFacet(
                datasetVersion=str(summary.output_version), producer=PRODUCER
            )
        }
        if self.output_columns is not None:
            facets.update(self._schema(self.output_columns))
            facets["columnLineage"] = self._column_lineage([c for c, _ in self.output_columns])
        if self.checks:
            facets["dataQualityAssertions"] = self._assertions(self.checks)
        written = summary.inserted + summary.updated
        return OutputDataset(
            namespace=namespace,
            name=path,
            facets=facets,
            outputFacets={
                "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                    rowCount=written, producer=PRODUCER
                ),
                "lakejoin_output": _facet_classes()["output"](
                    mode=self._mode(summary),
                    # the fan-out decision, or the definition change behind a full refresh
                    reason=summary.notes.get("strategy")
                    or summary.notes.get("replaced")
                    or summary.notes.get("definition")
                    or summary.reason,
                    inserted=summary.inserted,
                    updated=summary.updated,
                    deleted=summary.deleted,
                    affectedKeys=summary.affected_keys,
                    write=summary.write,
                    producer=PRODUCER,
                ),
            },
        )

    @staticmethod
    def _schema(columns: Any) -> dict[str, Any]:
        from openlineage.client.facet_v2 import schema_dataset

        fields = [
            schema_dataset.SchemaDatasetFacetFields(name=name, type=type_name(kind), ordinal_position=i + 1)
            for i, (name, kind) in enumerate(columns)
        ]
        return (
            {"schema": schema_dataset.SchemaDatasetFacet(fields=fields, producer=PRODUCER)} if fields else {}
        )

    def _column_lineage(self, output_columns: list[str]) -> Any:
        from openlineage.client.facet_v2 import column_lineage_dataset as cl

        lineage = column_lineage(self.spec, self.view, self.plan.schemas, output_columns)

        def field(source: str, column: str, kind: str, subtype: str) -> Any:
            namespace, path = dataset_name(self.spec.sources[source].path)
            return cl.InputField(
                namespace=namespace,
                name=path,
                field=column,
                transformations=[cl.Transformation(type=kind, subtype=subtype, masking=False)],
            )

        fields = {
            column: cl.Fields(
                inputFields=[field(o.source, o.column, "DIRECT", o.subtype) for o in origins],
                transformationType="IDENTITY" if all(o.subtype == IDENTITY for o in origins) else None,
                transformationDescription=None,
            )
            for column, origins in lineage.fields.items()
            if origins
        }
        matched = [field(o.source, o.column, "INDIRECT", o.subtype) for o in lineage.matched_on]
        return cl.ColumnLineageDatasetFacet(fields=fields, dataset=matched, producer=PRODUCER)

    @staticmethod
    def _assertions(checks: Sequence[CheckResult]) -> Any:
        import json

        from openlineage.client.facet_v2 import data_quality_assertions_dataset as dq

        def text(value: Any) -> str | None:
            return None if not value else json.dumps(value, default=str, sort_keys=True)

        return dq.DataQualityAssertionsDatasetFacet(
            assertions=[
                dq.Assertion(
                    assertion=check.expectation,
                    success=check.success,
                    column=check.kwargs.get("column"),
                    severity=_SEVERITY.get(check.severity, check.severity),
                    description=check.scope,
                    expected=text({k: v for k, v in check.kwargs.items() if k != "column"}),
                    actual=text(check.observed),
                )
                for check in checks
            ],
            producer=PRODUCER,
        )
