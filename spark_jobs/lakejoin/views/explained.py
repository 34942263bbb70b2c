"""The reads every view kind's `explain` shares (views/<kind>.py): an input's rows at a batch's
pin with delta-rs (no JVM, no Spark job), the pin itself, the row an input holds for one key
(with the version that deleted a missing one) and a table's change rows of one key. The kinds
read their own inputs with them; cli/explain.py reads the output with them.
"""

from __future__ import annotations

from typing import Any

from lakejoin.delta import lookups
from lakejoin.errors import BatchStateError, SourceError
from lakejoin.spec.explained import Ask, BatchInfo, Feed, InputRow, Role, deleted_at
from lakejoin.spec.model import JoinHow, Key, Source

HISTORY_WINDOW = 8  # commits in the first window of a key's history, read newest first (key_history)


def read_rows(
    path: str, version: int, key: Key, values: list[tuple[Any, ...]], what: str
) -> list[dict[str, Any]]:
    """The rows of `values` at `version` of the table at `path`, as dicts."""
    try:
        rows = lookups.read_keys(path, version, key, values) if lookups.literal_keys(values) else None
    except Exception as exc:  # noqa: BLE001 - delta-rs: a version vacuumed, a log cleaned up
        raise SourceError(
            f"version {version} of {path} cannot be read ({exc})",
            where=what,
            fix="VACUUM or log cleanup removed it: explain a newer output version (--at), or rebuild "
            "the view with --full-refresh so its batches pin versions the tables still hold",
        ) from None
    if rows is None:
        raise SourceError(
            f"delta-rs cannot look keys up in {path} as Spark reads it (column mapping, a reader "
            "feature delta-rs lacks, or a key that is neither a whole number, a string nor a date)",
            where=what,
            fix="read the rows with Spark: spark.read.format('delta').option('versionAsOf', V).load(path)",
        )
    return rows.to_pylist()


def pin(batch: BatchInfo, source: Source) -> int:
    """The version of `source` the batch read; an input the batch did not read is an error."""
    if source.name not in batch.pinned_versions:
        raise BatchStateError(
            f"batch {batch.batch_id} did not read '{source.name}': the view's definition changed since",
            where=f"output version {batch.output_version}",
            fix="run the view (a changed definition refreshes it), then explain again",
        )
    return batch.pinned_versions[source.name]


def looked_up(
    ask: Ask, source: Source, role: Role, value: tuple[Any, ...], *, how: JoinHow | None = None
) -> InputRow:
    """The row of `source` keyed by `value` at the batch's pin; for an absent key, a missing
    row's delete is looked for in the source's change feed."""
    version = pin(ask.batch, source)
    if None in value:
        return InputRow(role, source.name, version, None, None, how=how)
    rows = read_rows(source.path, version, source.key, [value], f"source '{source.name}'")
    gone = _deleted_at(source, value, version, ask.notes) if ask.absent and not rows else None
    key = dict(zip(source.key, value, strict=True))
    return InputRow(role, source.name, version, key, rows[0] if rows else None, how=how, deleted_at=gone)


def key_history(path: str, version: int, key: Key, values: tuple[Any, ...]) -> list[dict[str, Any]]:
    """The change rows of one key of the table at `path`, read backwards from `version` in
    windows of commits that grow fourfold, down to the newest window that holds any (empty: the
    key was never written). A key changed recently costs a read of the last few commits, not of
    the whole feed, and versions VACUUM removed are reached only for a key untouched since."""
    window, last = HISTORY_WINDOW, version
    while True:
        first = max(0, last - window + 1)
        rows = lookups.read_key_changes(path, first, last, key, [values])
        if rows or first == 0:
            return rows
        window, last = window * 4, first - 1


def _deleted_at(source: Source, value: tuple[Any, ...], version: int, notes: list[str]) -> int | None:
    """The version of `source` up to `version` that deleted the row of `value`, from its change
    feed read backwards (None: it was never deleted, or the feed cannot be read, which `notes`
    says: not knowing since when is no error)."""
    try:
        return deleted_at(key_history(source.path, version, source.key, value))
    except Exception as exc:  # noqa: BLE001 - delta-rs: change files vacuumed, a log cleaned up
        notes.append(f"when {source.name} lost the row {value!r} is not known: its change feed ({exc})")
        return None


def driving(ask: Ask, source: Source, role: Role) -> tuple[list[InputRow], list[Feed]]:
    """The row a joining kind starts from (the left row, the fact) and the feed of its key."""
    return [looked_up(ask, source, role, ask.values)], [(source, role, source.key, [ask.values])]
