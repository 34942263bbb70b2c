"""Is there work for a view? The batch plan (engine/plan.py) answers from the Delta logs alone,
with delta-rs, without starting Spark.

A scheduled run asks this first, so a batch with no new source versions costs a few log
reads, not a JVM. The answer errs on the side of running: anything it cannot read or decide
means "run", and the batch engine decides.

>>> pending_work(spec, "display_products")          # doctest: +SKIP
Pending(run=False, reason='no new versions since batch 7: merchants@4, products@9')
"""

from __future__ import annotations

from dataclasses import dataclass

from lakejoin.delta.plans import Skip
from lakejoin.engine.batch import batch_log
from lakejoin.engine.kinds import view_logic
from lakejoin.engine.plan import plan_batch
from lakejoin.spec.model import PipelineSpec


@dataclass(frozen=True)
class Pending:
    run: bool
    reason: str


def pending_work(spec: PipelineSpec, view_name: str) -> Pending:
    """Whether `view_name` has a batch to run, and why (or why not)."""
    view = spec.views[view_name]
    try:
        planned = plan_batch(spec, view, view_logic(spec, view), batch_log(spec))
    except Exception as exc:  # noqa: BLE001 - unreadable or inconsistent: let the engine say what is wrong
        return Pending(True, f"the plan needs the engine ({type(exc).__name__}: {exc})".splitlines()[0])
    if isinstance(planned, Skip):
        return Pending(False, planned.reason)
    for why in ("replaced", "definition"):
        if why in planned.notes:
            return Pending(True, planned.notes[why])
    if not planned.start_versions:
        return Pending(True, "the view has no committed batch yet")
    newer = [
        f"{name} {planned.start_versions.get(name, -1)}->{v}"
        for name, v in planned.pinned_versions.items()
        if not name.startswith("_") and planned.start_versions.get(name, -1) != v
    ]
    return Pending(True, "new versions: " + ", ".join(newer))
