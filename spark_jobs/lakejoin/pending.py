"""Is there work for a view? Answered from the Delta logs alone, without starting Spark.

A scheduled run asks this first, so a batch with no new source versions costs a few log
reads (delta-rs, Delta's Rust implementation), not a JVM. The answer errs on the side of
running: anything it cannot read or decide means "run", and the batch engine decides.

>>> pending_work(spec, "display_products")          # doctest: +SKIP
Pending(run=False, reason='no new versions since batch 7: merchants@4, products@9')
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lakejoin.batches import BatchStatus
from lakejoin.spec import PipelineSpec


@dataclass(frozen=True)
class Pending:
    run: bool
    reason: str


def pending_work(spec: PipelineSpec, view_name: str) -> Pending:
    """Whether `view_name` has a batch to run, and why (or why not)."""
    from lakejoin.runner import view_logic

    try:
        last = _last_record(spec, view_name)
    except Exception as exc:  # noqa: BLE001 - unreadable records: let the engine say what is wrong
        return Pending(True, f"batch records unreadable without Spark ({type(exc).__name__})")
    if last is None:
        return Pending(True, "the view has never run")
    status, batch_id, pinned = last
    if status is BatchStatus.PLANNED:
        return Pending(True, f"batch {batch_id} was planned and not committed: it will be retried")
    newer = []
    for source in view_logic(spec, spec.views[view_name]).change_sources:
        try:
            latest = _latest_version(source.path)
        except Exception as exc:  # noqa: BLE001 - a missing or unreadable source: let the engine explain
            return Pending(True, f"source '{source.name}' unreadable without Spark ({type(exc).__name__})")
        if latest != pinned.get(source.name):
            newer.append(f"{source.name} {pinned.get(source.name, -1)}->{latest}")
    if newer:
        return Pending(True, "new versions: " + ", ".join(newer))
    read = ", ".join(f"{k}@{v}" for k, v in sorted(pinned.items()) if not k.startswith("_"))
    return Pending(False, f"no new versions since batch {batch_id}: {read}")


def _latest_version(path: str) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(path, without_files=True).version())


def _last_record(spec: PipelineSpec, view_name: str) -> tuple[BatchStatus, int, dict[str, int]] | None:
    """(status, batch id, pinned versions of the last committed batch) of the view's last batch."""
    from deltalake import DeltaTable

    path = Path(spec.state_path) / "batches"
    if not (path / "_delta_log").is_dir():
        return None
    rows = (
        DeltaTable(str(path))
        .to_pyarrow_table(
            columns=["pipeline", "view", "batch_id", "status", "pinned_versions"],
            filters=[("pipeline", "=", spec.name), ("view", "=", view_name)],
        )
        .to_pylist()
    )
    if not rows:
        return None
    # A batch id has a planned row and, once it ends, a committed or abandoned one.
    last_id = max(int(r["batch_id"]) for r in rows)
    statuses = {BatchStatus(r["status"]) for r in rows if int(r["batch_id"]) == last_id}
    if statuses == {BatchStatus.PLANNED}:
        return BatchStatus.PLANNED, last_id, {}
    committed = [r for r in rows if r["status"] == BatchStatus.COMMITTED.value]
    if not committed:
        return None
    newest = max(committed, key=lambda r: int(r["batch_id"]))
    return BatchStatus.COMMITTED, int(newest["batch_id"]), dict(newest["pinned_versions"] or [])
