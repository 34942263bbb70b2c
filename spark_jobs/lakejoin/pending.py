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

from lakejoin.batches import BatchStatus, read_histories
from lakejoin.spec import PipelineSpec


@dataclass(frozen=True)
class Pending:
    run: bool
    reason: str


def pending_work(spec: PipelineSpec, view_name: str) -> Pending:
    """Whether `view_name` has a batch to run, and why (or why not)."""
    from lakejoin.runner import view_logic

    try:
        records = read_histories(spec.name, str(Path(spec.state_path) / "batches"), view_name)
        history = records.get(view_name, [])
    except Exception as exc:  # noqa: BLE001 - unreadable records: let the engine say what is wrong
        return Pending(True, f"batch records unreadable without Spark ({type(exc).__name__})")
    if history and history[-1].status is BatchStatus.PLANNED:
        return Pending(
            True, f"batch {history[-1].batch_id} was planned and not committed: it will be retried"
        )
    committed = [r for r in history if r.status is BatchStatus.COMMITTED]
    if not committed:
        return Pending(True, "the view has no committed batch yet")
    last = committed[-1]
    newer: list[str] = []
    maintenance: list[str] = []
    for source in view_logic(spec, spec.views[view_name]).change_sources:
        try:
            latest = (
                _latest_version(source.path) if source.upstream is None else _committed(spec, source.upstream)
            )
        except Exception as exc:  # noqa: BLE001 - a missing or unreadable source: let the engine explain
            return Pending(True, f"source '{source.name}' unreadable without Spark ({type(exc).__name__})")
        pinned = last.pinned_versions.get(source.name, -1)
        if latest == pinned:
            continue
        if pinned >= 0 and not _may_hold_changes(source.path, pinned, latest):
            maintenance.append(f"{source.name} {pinned}->{latest}")
            continue
        newer.append(f"{source.name} {pinned}->{latest}")
    if newer:
        return Pending(True, "new versions: " + ", ".join(newer))
    if maintenance:
        return Pending(
            False,
            f"nothing new since batch {last.batch_id}: only maintenance commits (VACUUM, OPTIMIZE) "
            "in " + ", ".join(maintenance),
        )
    read = ", ".join(f"{k}@{v}" for k, v in sorted(last.pinned_versions.items()) if not k.startswith("_"))
    return Pending(False, f"no new versions since batch {last.batch_id}: {read}")


def _committed(spec: PipelineSpec, upstream: str) -> int:
    """The output version of the upstream view's last committed batch: what a batch would pin
    (runner.Batch._latest)."""
    from lakejoin.runner import committed_output_version

    history = read_histories(spec.name, str(Path(spec.state_path) / "batches"), upstream).get(upstream, [])
    committed = [r for r in history if r.status is BatchStatus.COMMITTED]
    if not committed or committed_output_version(committed[-1]) < 0:
        return _latest_version(spec.sources[upstream].path)
    return committed_output_version(committed[-1])


def _may_hold_changes(path: str, after: int, upto: int) -> bool:
    """The engine's rule (sources.history_may_hold_changes) on delta-rs's history; unreadable: True."""
    from deltalake import DeltaTable

    from lakejoin.sources import history_may_hold_changes

    try:
        table = DeltaTable(path, without_files=True)

        def newest(limit: int) -> list[tuple[int, str]]:
            return [(int(c["version"]), str(c["operation"])) for c in table.history(limit)]

        return history_may_hold_changes(newest, after, upto)
    except Exception:  # noqa: BLE001 - in doubt, run: the batch engine decides
        return True


def _latest_version(path: str) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(path, without_files=True).version())
