"""Data-quality checks of every batch, with Great Expectations' own expectations.

Each view kind declares its validations (views/*.py): expectations on the rows the batch wrote
(keys unique and not null, references that resolve at the pinned versions, list lengths) and on
the output table at its new version (row counts against the sources).

Every batch leaves a JSON report under `<storage>/_lakejoin/reports/<view>/`. A failed check
raises QualityCheckError before the commit, naming the failed expectations and the report.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakejoin.errors import QualityCheckError
from lakejoin.spec import PipelineSpec, View

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakejoin.batches import BatchRecord
    from lakejoin.views.base import Validation

FK_RESOLVED = "_lj_fk_resolved"


@dataclass(frozen=True)
class CheckResult:
    scope: str
    expectation: str
    kwargs: dict[str, Any]
    success: bool
    observed: dict[str, Any]


@dataclass(frozen=True)
class QualityReport:
    success: bool
    checks: list[CheckResult]
    report_path: str


class _Validator:
    """One ephemeral GE context per process; each validation gets names of its own."""

    _context: Any = None
    _serial = 0

    @classmethod
    def validate(cls, frame: DataFrame, name: str, expectations: list[Any]) -> list[CheckResult]:
        os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
        import great_expectations as gx

        if cls._context is None:
            from great_expectations.data_context.types.base import ProgressBarsConfig

            cls._context = gx.get_context(mode="ephemeral")
            cls._context.variables.progress_bars = ProgressBarsConfig(globally=False)
        cls._serial += 1
        unique = f"{name}_{cls._serial}"
        context = cls._context
        source = context.data_sources.add_spark(name=f"src_{unique}", persist=False)
        batch_definition = source.add_dataframe_asset(
            name=f"asset_{unique}"
        ).add_batch_definition_whole_dataframe(f"batch_{unique}")
        suite = context.suites.add(gx.ExpectationSuite(name=f"suite_{unique}", expectations=expectations))
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=f"validation_{unique}", data=batch_definition, suite=suite)
        )
        result = definition.run(batch_parameters={"dataframe": frame})
        checks = [
            CheckResult(
                scope=name,
                expectation=r.expectation_config.type,
                kwargs={k: v for k, v in r.expectation_config.kwargs.items() if k != "batch_id"},
                success=bool(r.success),
                observed=_jsonable(r.result),
            )
            for r in result.results
        ]
        return checks


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def with_key_resolution(
    rows: DataFrame, target: DataFrame, column: str, target_key: str, flag: str
) -> DataFrame:
    """The rows plus a boolean column `flag`: does the row's `column` match a key of `target`?"""
    from pyspark.sql import functions as F

    # Only the target keys these rows reference: the check stays proportional to the batch.
    wanted = rows.select(F.col(column).alias("_lj_ref")).where(F.col("_lj_ref").isNotNull()).distinct()
    keys = (
        target.join(F.broadcast(wanted), target[target_key] == wanted["_lj_ref"], how="left_semi")
        .select(F.col(target_key).alias("_lj_tk"))
        .distinct()
    )
    return (
        rows.join(keys, rows[column] == keys["_lj_tk"], how="left")
        .withColumn(flag, F.col("_lj_tk").isNotNull())
        .drop("_lj_tk")
    )


def check_batch(
    spec: PipelineSpec, view: View, plan: BatchRecord, validations: list[Validation]
) -> QualityReport:
    """Run the view's validations; write the report; raise QualityCheckError on a failure."""
    checks: list[CheckResult] = []
    for validation in validations:
        checks += _Validator.validate(validation.rows, validation.scope, validation.expectations)
    report_path = write_report(spec, view, plan, checks)
    report = QualityReport(all(c.success for c in checks), checks, report_path)
    if not report.success:
        failed = "; ".join(
            f"{c.scope}: {c.expectation}({_brief(c.kwargs)}) observed {_brief(c.observed)}"
            for c in checks
            if not c.success
        )
        raise QualityCheckError(
            f"batch {plan.batch_id} failed its checks: {failed}",
            where=f"view '{view.name}', report {report_path}",
            fix="the batch was not committed; fix the source data, then rerun with --full-refresh",
        )
    return report


def _brief(values: dict[str, Any]) -> str:
    keep = {k: v for k, v in values.items() if k not in ("partial_unexpected_index_list",)}
    return ", ".join(f"{k}={v!r}" for k, v in keep.items())[:300]


def reports_folder(spec: PipelineSpec, view: View) -> Path:
    return Path(spec.state_path) / "reports" / view.name


def write_report(spec: PipelineSpec, view: View, plan: BatchRecord, checks: list[CheckResult]) -> str:
    folder = reports_folder(spec, view)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"batch-{plan.batch_id:06d}.json"
    payload = {
        "pipeline": spec.name,
        "view": view.name,
        "batch_id": plan.batch_id,
        "mode": plan.mode.value,
        "start_versions": plan.start_versions,
        "pinned_versions": plan.pinned_versions,
        "checked_at": datetime.now(UTC).isoformat(),
        "success": all(c.success for c in checks),
        "checks": [c.__dict__ for c in checks],
    }
    path.write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
    return str(path)
