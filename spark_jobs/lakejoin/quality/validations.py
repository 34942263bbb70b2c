"""A batch's checks as data: what a validation is (`Validation`: the rows and the expectations a
view kind declares), and what the checks found (`CheckResult`, one per expectation, and the
batch's `QualityReport`).

Apart from the checks themselves (checks.py, which run Great Expectations and write the
reports), so that the view kinds that declare validations and the engine that reads the
results import data, not the checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Validation:
    """One Great Expectations validation: a scope name, the rows, the expectations."""

    scope: str
    rows: Any  # a Spark DataFrame, or a pandas one of a few rows lakejoin counted itself
    expectations: list[Any]
    notes: tuple[str, ...] = ()  # said with a failure of this scope (join health: its keys)


@dataclass(frozen=True)
class CheckResult:
    scope: str
    expectation: str
    kwargs: dict[str, Any]
    success: bool
    observed: dict[str, Any]
    severity: str = "critical"
    data_docs: str | None = None  # GE's page of this check's validation, relative to the reports folder

    @property
    def blocking(self) -> bool:
        return not self.success and self.severity == "critical"


@dataclass(frozen=True)
class QualityReport:
    success: bool
    checks: list[CheckResult]
    report_path: str
    page_path: str | None = None
