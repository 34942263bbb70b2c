"""Data-quality checks of every batch, with Great Expectations' own expectations.

Two validations run before a batch commits:
- the changed rows (what the batch wrote): keys unique and not null; for an inner join, every
  fk resolves to a right row at the pinned version;
- the output table at its new version: for a left join, as many rows as the left table.

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
from lakejoin.spec import JoinHow, PipelineSpec, View

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakejoin.batches import BatchRecord

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


def changed_rows_expectations(view: View, key: str) -> list[Any]:
    import great_expectations as gx

    expectations = [
        gx.expectations.ExpectColumnValuesToNotBeNull(column=key),
        gx.expectations.ExpectColumnValuesToBeUnique(column=key),
    ]
    if view.fk_join.how is JoinHow.INNER:
        expectations.append(gx.expectations.ExpectColumnValuesToNotBeNull(column=view.fk_join.fk))
        expectations.append(gx.expectations.ExpectColumnValuesToBeInSet(column=FK_RESOLVED, value_set=[True]))
    return expectations


def output_expectations(view: View, left_rows: int) -> list[Any]:
    import great_expectations as gx

    if view.fk_join.how is JoinHow.LEFT:
        return [gx.expectations.ExpectTableRowCountToEqual(value=left_rows)]
    return [gx.expectations.ExpectTableRowCountToBeBetween(min_value=0, max_value=left_rows)]


def with_fk_resolution(rows: DataFrame, right: DataFrame, fk: str, right_key: str) -> DataFrame:
    """The rows plus a flag: does the row's fk match a right key?"""
    from pyspark.sql import functions as F

    # Only the right keys these rows reference: the check stays proportional to the batch.
    wanted = rows.select(F.col(fk).alias("_lj_fk")).where(F.col("_lj_fk").isNotNull()).distinct()
    keys = (
        right.join(F.broadcast(wanted), right[right_key] == wanted["_lj_fk"], how="left_semi")
        .select(F.col(right_key).alias("_lj_rk"))
        .distinct()
    )
    return (
        rows.join(keys, rows[fk] == keys["_lj_rk"], how="left")
        .withColumn(FK_RESOLVED, F.col("_lj_rk").isNotNull())
        .drop("_lj_rk")
    )


def check_batch(
    spark: SparkSession,
    spec: PipelineSpec,
    view: View,
    plan: BatchRecord,
    changed_rows: DataFrame,
    left_snapshot: DataFrame,
    right_snapshot: DataFrame,
) -> QualityReport:
    """Validate a batch's changed rows and output; write the report; raise on a failure."""
    join = view.fk_join
    left, right = spec.sources[join.left], spec.sources[join.right]
    rows = changed_rows
    if join.how is JoinHow.INNER:
        rows = with_fk_resolution(changed_rows, right_snapshot, join.fk, right.key)
    checks = _Validator.validate(rows, "changed_rows", changed_rows_expectations(view, left.key))
    output = spark.read.format("delta").load(view.path)
    checks += _Validator.validate(output, "output", output_expectations(view, left_snapshot.count()))
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
