"""The batch log: one row per batch of every view of a pipeline, for people (status, reports,
repair history) and for the Airflow skip check. Written and read with delta-rs, no JVM.

The log is an index, not the truth: a batch is its output's commit (delta/markers.py). The
engine appends a batch's row after that commit; if the row is missing (a crash in between, a
deleted log), the next plan rebuilds it from the output's own log (`catch_up`).

>>> BatchLog.of(spec).last_committed("display_products").pinned_versions  # doctest: +SKIP
{'merchants': 4, 'products': 9}
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakejoin.delta.identity import identities_from, identities_json
from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus, last_of
from lakejoin.delta.sql_text import literal, spark_quoted
from lakejoin.errors import BatchStateError
from lakejoin.spec.layout import batch_log_path

if TYPE_CHECKING:
    import pyarrow as pa

    from lakejoin.spec.model import PipelineSpec

log = logging.getLogger(__name__)

COMPACT_EVERY = 50  # appends (one small file each) between compactions of the log
_MAP = ("start_versions", "pinned_versions", "metrics")


def _schema() -> pa.Schema:
    import pyarrow as pa

    versions = pa.map_(pa.string(), pa.int64())
    return pa.schema(
        [
            ("pipeline", pa.string()),
            ("view", pa.string()),
            ("batch_id", pa.int64()),
            ("status", pa.string()),
            ("mode", pa.string()),
            ("start_versions", versions),
            ("pinned_versions", versions),
            ("output_version", pa.int64()),
            ("recorded_at", pa.timestamp("us", tz="UTC")),
            ("metrics", versions),
            ("notes", pa.string()),
            ("definition", pa.string()),  # its fingerprint; added in session 37 (older rows: null)
            ("identities", pa.string()),  # JSON, delta/identity.py; added in session 55 (older: null)
            ("write", pa.string()),  # the strategy that wrote the output; added in issue 53 (older: null)
        ]
    )


class BatchLog:
    """The batch log of one pipeline, a Delta table at `path` written by delta-rs."""

    def __init__(self, pipeline: str, path: str, *, read_only: bool = False) -> None:
        self.pipeline = pipeline
        self.path = path
        # `lakejoin plan` reads the log and writes nothing: the rows a plan would catch up with
        # its outputs' logs are left for the next batch to write.
        self.read_only = read_only

    @classmethod
    def of(cls, spec: PipelineSpec, *, read_only: bool = False) -> BatchLog:
        return cls(spec.name, batch_log_path(spec), read_only=read_only)

    def exists(self) -> bool:
        return (Path(self.path) / "_delta_log").is_dir()

    # --- reading ------------------------------------------------------------------------------

    def histories(self, views: Collection[str] | None = None) -> dict[str, list[BatchRecord]]:
        """Every view's records (those of `views`, when given), oldest first, one per batch: a
        committed row wins over an abandoned one of the same batch."""
        from deltalake import DeltaTable

        found: dict[str, list[BatchRecord]] = {view: [] for view in views or ()}
        if not self.exists():
            return found
        filters: list[Any] = [("pipeline", "=", self.pipeline)]
        if views is not None:
            filters.append(("view", "in", list(views)))
        rows = DeltaTable(self.path).to_pyarrow_table(filters=filters).to_pylist()
        records = [self._read(row) for row in rows]
        by_view: dict[str, dict[int, BatchRecord]] = {}
        for record in sorted(records, key=lambda r: (r.batch_id, r.recorded_at or datetime.min)):
            batches = by_view.setdefault(record.view, {})
            if record.batch_id not in batches or record.status is BatchStatus.COMMITTED:
                batches[record.batch_id] = record
        found.update({view: [b[i] for i in sorted(b)] for view, b in by_view.items()})
        return found

    def _read(self, row: dict[str, Any]) -> BatchRecord:
        """A row as its record; a row lakejoin did not write so (another tool's, or a status a
        newer lakejoin knows) stops the reader, named, rather than be read around: the plan, the
        skip check and the repair history would rest on a log lakejoin knows it cannot read."""
        try:
            return _record(row)
        except (KeyError, TypeError, ValueError) as exc:  # an unknown status or mode, a null, bad JSON
            raise _unreadable(row, self.path, exc) from exc

    def history(self, view: str) -> list[BatchRecord]:
        return self.histories([view])[view]

    def last(self, view: str) -> BatchRecord | None:
        return last_of(self.history(view))

    def last_committed(self, view: str) -> BatchRecord | None:
        return last_of(self.history(view), BatchStatus.COMMITTED)

    # --- writing ------------------------------------------------------------------------------

    def append(self, *records: BatchRecord) -> None:
        """Append records in one delta-rs commit (a blind append: views running in parallel do
        not conflict, and delta-rs retries the commit when another landed first)."""
        import pyarrow as pa
        from deltalake import write_deltalake

        if not records or self.read_only:
            return
        now = datetime.now(UTC)
        rows = [
            {
                "pipeline": self.pipeline,
                "view": r.view,
                "batch_id": r.batch_id,
                "status": r.status.value,
                "mode": r.mode.value,
                "start_versions": list(r.start_versions.items()),
                "pinned_versions": list(r.pinned_versions.items()),
                "output_version": r.output_version,
                "recorded_at": r.recorded_at or now,
                "metrics": list(r.metrics.items()),
                "notes": json.dumps(r.notes, sort_keys=True),
                "definition": r.definition,
                "identities": json.dumps(identities_json(r.identities)) if r.identities else None,
                "write": r.write,
            }
            for r in records
        ]
        table = pa.Table.from_pylist(rows, schema=_schema())
        for attempt in range(3):
            try:
                # "merge": a log written before a column was added gains it (older rows: null).
                write_deltalake(self.path, table, mode="append", schema_mode="merge")
                break
            except Exception:
                # Only the very first appends of parallel views race to create the table.
                if attempt == 2 or not self.exists():
                    raise
        if any(r.batch_id % COMPACT_EVERY == 0 for r in records):
            self.compact()

    def compact(self) -> None:
        """Merge the log's small files (housekeeping: a failure is logged, the next one retries)."""
        from deltalake import DeltaTable

        try:
            DeltaTable(self.path).optimize.compact()
        except Exception:
            log.warning("lakejoin: could not compact the batch log at %s", self.path, exc_info=True)


def _unreadable(row: dict[str, Any], path: str, exc: Exception) -> BatchStateError:
    """The error for a batch-log row lakejoin cannot read: the row, and how to be rid of it."""
    view, batch = row.get("view"), row.get("batch_id")
    where = [f"view = {literal(view)}", f"batch_id = {batch}" if batch is not None else "batch_id IS NULL"]
    what = f"{type(exc).__name__}: {exc}"
    for column, kind in (("status", BatchStatus), ("mode", BatchMode)):
        known = [k.value for k in kind]
        if row.get(column) not in known:
            what = f"{column} {row.get(column)!r}, where lakejoin writes one of: {', '.join(known)}"
            value = row.get(column)
            where.append(f"{column} = {literal(value)}" if value is not None else f"{column} IS NULL")
            break
    table = f"delta.{spark_quoted(path)}"
    return BatchStateError(
        f"a row lakejoin did not write cannot be read: view '{view}', batch {batch}: {what}",
        where=f"batch log {path}",
        fix=f"delete that row (DELETE FROM {table} WHERE {' AND '.join(where)}), or the whole "
        "batch log: lakejoin rebuilds each view's last batch from its output's commits (the older "
        "rows, the history `lakejoin status` and the reports show, are lost)",
    )


def _record(row: dict[str, Any]) -> BatchRecord:
    # Arrow gives a MAP column as a list of (key, value) pairs.
    maps = {c: {k: int(v) for k, v in (row[c] or [])} for c in _MAP}
    recorded = row["recorded_at"]
    return BatchRecord(
        view=row["view"],
        batch_id=int(row["batch_id"]),
        status=BatchStatus(row["status"]),
        mode=BatchMode(row["mode"]),
        start_versions=maps["start_versions"],
        pinned_versions=maps["pinned_versions"],
        recorded_at=recorded.replace(tzinfo=None) if recorded is not None else None,
        metrics=maps["metrics"],
        notes=json.loads(row["notes"] or "{}"),
        output_version=int(row["output_version"]),
        definition=row.get("definition"),
        identities=identities_from(json.loads(row.get("identities") or "null")),
        write=row.get("write"),
    )
