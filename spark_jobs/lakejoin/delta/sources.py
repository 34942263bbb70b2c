"""Reading source tables at pinned versions, through Delta's own APIs."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lakejoin.errors import SourceError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def delta_table(spark: SparkSession, path: str, *, role: str):  # noqa: ANN201 - DeltaTable
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        raise SourceError(
            f"no Delta table at {path}",
            where=role,
            fix="check the path in the spec, or create the table with Delta before running",
        )
    return DeltaTable.forPath(spark, path)


def latest_version(spark: SparkSession, path: str, *, role: str) -> int:
    """The newest committed version of the Delta table at `path`."""
    history = delta_table(spark, path, role=role).history(1).select("version").first()
    assert history is not None
    return int(history["version"])


# Commits that change no row, so their versions hold no change rows: a VACUUM (logged as two
# commits on filesystems that allow it) and an OPTIMIZE (compaction, Z-order, clustering).
NO_DATA_OPERATIONS = frozenset({"VACUUM START", "VACUUM END", "OPTIMIZE"})
FIRST_HISTORY_PAGE = 16  # commits; a few writes may have landed after the pin

Commits = Callable[[int], list[tuple[int, str]]]


def history_may_hold_changes(newest: Commits, after: int, upto: int) -> bool:
    """False only when a table's history shows every version in (after, upto] as a commit in
    NO_DATA_OPERATIONS; when in doubt (a version missing from the history), True.

    `newest(limit)` gives the table's newest `limit` commits as (version, operation), newest
    first (Delta's `history` in Spark or in delta-rs). The history is read a page at a time and
    the first data commit answers, so a source with many new writes costs one short read.
    """
    if upto == after:
        return False
    if upto < after:  # the table went back (recreated, restored): let the batch say what broke
        return True
    limit = FIRST_HISTORY_PAGE
    while True:
        commits = newest(limit)
        in_range = [(v, op) for v, op in commits if after < v <= upto]
        if any(op not in NO_DATA_OPERATIONS for _, op in in_range):
            return True
        if len(in_range) == upto - after:
            return False
        if len(commits) < limit or any(v <= after for v, _ in commits):
            return True  # the history ends, or skips a version, before it covers the range
        limit *= 4


def logged_row_count(path: str, version: int) -> int | None:
    """The table's rows at `version`, summed from its data files' statistics in the Delta log
    (delta-rs): no Spark job. None when the log cannot say exactly: a file written without
    statistics, or a table whose protocol allows deletion vectors (a file's `numRecords` then
    still counts the rows its deletion vector removed, and delta-rs does not give the vector's
    cardinality)."""
    vectors, records = _records(path, version)
    if vectors or records is None or records.null_count:
        return None
    return _sum(records)


def logged_rows(path: str, version: int) -> int:
    """The rows the table's data files hold at `version` by the log's statistics, those a
    deletion vector removed included and a file without statistics counted as none: an
    estimate (`lakejoin plan`'s), never a count a batch decides by (`logged_row_count`)."""
    return _sum(_records(path, version)[1])


def _records(path: str, version: int) -> tuple[bool, Any]:
    """Whether the table at `version` may hold deletion vectors, and its files' `num_records`
    (a pyarrow column; None when the log has no statistics column)."""
    import pyarrow as pa
    from deltalake import DeltaTable

    table = DeltaTable(path, version=version)
    vectors = "deletionVectors" in (table.protocol().writer_features or [])
    files = pa.table(table.get_add_actions(flatten=True))
    if "num_records" not in files.column_names:
        return vectors, (None if files.num_rows else pa.array([], pa.int64()))
    return vectors, files["num_records"]


def _sum(records: Any) -> int:  # noqa: ANN401 - a pyarrow column, or None
    import pyarrow.compute as pc

    return int(pc.sum(records).as_py() or 0) if records is not None else 0


def snapshot(spark: SparkSession, path: str, version: int) -> DataFrame:
    """The table as it was at `version`."""
    return spark.read.format("delta").option("versionAsOf", version).load(path)
