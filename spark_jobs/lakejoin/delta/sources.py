"""Reading source tables at pinned versions, through Delta's own APIs."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

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
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    table = DeltaTable(path, version=version)
    if "deletionVectors" in (table.protocol().writer_features or []):
        return None
    files = pa.table(table.get_add_actions(flatten=True))
    if "num_records" not in files.column_names:
        return None if files.num_rows else 0
    records = files["num_records"]
    if records.null_count:
        return None
    return int(pc.sum(records).as_py() or 0)


def snapshot(spark: SparkSession, path: str, version: int) -> DataFrame:
    """The table as it was at `version`."""
    return spark.read.format("delta").option("versionAsOf", version).load(path)
