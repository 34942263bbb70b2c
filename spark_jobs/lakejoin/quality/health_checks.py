"""Join health's limits as a Great Expectations validation (issue 40): one row of the view's
counts, an expectation per limit."""

from __future__ import annotations

from collections.abc import Sequence

from lakejoin.quality.health import Health, breaches
from lakejoin.quality.validations import Validation
from lakejoin.spec.model import Limit, OnBreach

SCOPE = "join_health"


def validation(limits: Sequence[Limit], health: Health) -> Validation | None:
    """The view's health limits as expectations of Great Expectations on one row of its counts
    (`<measure>`, `<measure>_share`, `waiting_batches`, `waiting_hours`), so Data Docs show them
    with every batch: a `fail` limit is critical (a breach stops the batch before its commit),
    a `warn` limit a warning. The failure's message names the counts and a few keys."""
    import great_expectations as gx
    import pandas as pd
    from great_expectations.expectations.metadata_types import FailureSeverity

    if not limits:
        return None
    row: dict[str, float | None] = {}
    for measure, rows in health.totals.items():
        row[measure] = rows
        row[f"{measure}_share"] = rows / health.rows if health.rows else 0.0
    row["waiting_batches"] = health.waiting_batches
    row["waiting_hours"] = None if health.waiting_seconds is None else health.waiting_seconds / 3600
    expectations = []
    for limit in limits:
        columns = (
            {"max_batches": "waiting_batches", "max_hours": "waiting_hours"}
            if limit.measure == "waiting"
            else {"max_rows": limit.measure, "max_share": f"{limit.measure}_share"}
        )
        for bound, column in columns.items():
            most = getattr(limit, bound)
            if most is not None:
                expectations.append(
                    gx.expectations.ExpectColumnValuesToBeBetween(
                        column=column,
                        max_value=most,
                        severity=FailureSeverity.CRITICAL
                        if limit.on_breach is OnBreach.FAIL
                        else FailureSeverity.WARNING,
                    )
                )
    notes = tuple(b.text() for b in breaches(limits, health) if b.fails)
    return Validation(SCOPE, pd.DataFrame([row]).astype("float64"), expectations, notes)
