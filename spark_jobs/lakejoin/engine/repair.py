"""Repairs: re-derive the output keys that source changes in a range touched, at the versions
the view's last committed batch pinned, without moving its checkpoint.

Use one after a fix to a view's logic, or when drift is suspected. A range is two bounds, each
a version number (the same for every source) or a timestamp (each source's commits at or after
the start and before the end). The changed keys in the range go through the view kind's own
incremental rule, with each key's state as of the pinned versions, so a repair writes exactly
what an incremental batch over those keys would have written.

>>> RepairRange.parse("2026-11-01T00:00", "2026-11-02T00:00").bounds()
('2026-11-01T00:00:00+00:00', '2026-11-02T00:00:00+00:00')
>>> RepairRange.parse("3").bounds()
('3', None)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from lakejoin.delta.change_feed import VERSION, net_changes, no_changes, read_change_feed
from lakejoin.delta.history import numbered_history
from lakejoin.delta.sources import snapshot
from lakejoin.errors import RepairError
from lakejoin.spec.model import Source

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Bound = int | datetime


@dataclass(frozen=True)
class RepairRange:
    start: Bound
    end: Bound | None = None  # None: up to the pinned versions

    @classmethod
    def parse(cls, start: object, end: object = None) -> RepairRange:
        """From the trigger form or the command line: numbers are versions, text is a timestamp."""
        first = _bound(start, "repair_from")
        if first is None:
            raise RepairError(
                "a repair needs a start", where="repair_from", fix="give repair_from a version or timestamp"
            )
        last = _bound(end, "repair_to")
        if type(first) is not type(last) and last is not None:
            raise RepairError(
                f"repair_from ({start}) and repair_to ({end}) mix a version and a timestamp",
                where="repair_from / repair_to",
                fix="give both as versions or both as timestamps",
            )
        if last is not None and last < first:  # type: ignore[operator]
            raise RepairError(
                f"the range ends ({end}) before it starts ({start})",
                where="repair_from / repair_to",
                fix="swap the bounds",
            )
        return cls(first, last)

    def bounds(self) -> tuple[str, str | None]:
        """The bounds as text, the way `parse` reads them (command lines, task arguments)."""

        def text(bound: Bound) -> str:
            return bound.isoformat() if isinstance(bound, datetime) else str(bound)

        return text(self.start), (None if self.end is None else text(self.end))

    def describe(self) -> str:
        def shown(bound: Bound | None) -> str:
            if bound is None:
                return "the pinned versions"
            return bound.isoformat() if isinstance(bound, datetime) else f"version {bound}"

        return f"{shown(self.start)} to {shown(self.end)}"

    def versions(self, source: Source, pinned: int) -> tuple[int, int]:
        """The first and last version of `source` in the range, capped at the pinned version
        (first > last: no commit of the source falls in the range). A timestamp range takes the
        commits at or after its start and before its end by the times Delta's time travel reads
        (delta-rs's `load_as_version`, as Spark's `timestampAsOf`: no JVM, so `lakejoin plan`
        shows a repair's ranges too)."""
        if isinstance(self.start, int):
            last = pinned if self.end is None else min(int(self.end), pinned)  # type: ignore[arg-type]
            return self.start, last
        end = self.end  # a timestamp too (`parse` refuses a mix)
        assert end is None or isinstance(end, datetime)
        first = _last_at(source, self.start - _TICK) + 1
        last = pinned if end is None else min(_last_at(source, end - _TICK), pinned)
        return (first, last) if first <= last else (pinned + 1, pinned)


_TICK = timedelta(milliseconds=1)  # commit times are in milliseconds


def _last_at(source: Source, when: datetime) -> int:
    """The last version of `source` committed at or before `when` (one before its first: none),
    by the commit times Delta's time travel reads (the commit file's, or the in-commit
    timestamp), read with delta-rs."""
    from deltalake import DeltaTable

    try:
        table = DeltaTable(source.path)
        commits = {int(h["version"]): h for h in numbered_history(table)[0]}
        table.load_as_version(when)
    except Exception as exc:  # noqa: BLE001 - delta-rs: no table, or a log it cannot read
        raise RepairError(
            f"the history of {source.path} cannot be read ({type(exc).__name__}: {exc})".splitlines()[0],
            where=f"source '{source.name}'",
            fix="check the source's path in the spec; a repair by timestamp reads each source's commit times",
        ) from exc
    version = int(table.version())
    # delta-rs loads the oldest version for a time before it: that one is not at or before `when`.
    oldest = commits.get(version, {}) if version == min(commits) else {}
    stamp = oldest.get("inCommitTimestamp") or oldest.get("timestamp")
    if stamp is not None and when < datetime.fromtimestamp(int(stamp) / 1000, UTC):
        return version - 1
    return version


def one_asked(full_refresh: bool, repair: RepairRange | None, *, where: str) -> None:
    """A run (or its plan) is asked for a full refresh or a repair, not both."""
    if repair is not None and full_refresh:
        raise RepairError(
            "a repair and a full refresh were both asked for",
            where=where,
            fix="a full refresh already re-derives every key: ask for one or the other",
        )


def requested_repair(
    params: Mapping[str, Any], *, backfill: bool, interval: tuple[datetime | None, datetime | None]
) -> RepairRange | None:
    """The repair an Airflow run asks for: the trigger form's range, else a backfill run's data
    interval (a backfill re-derives what changed in each past interval; it never replays)."""
    if params.get("repair_from") or params.get("repair_to"):
        return RepairRange.parse(params.get("repair_from"), params.get("repair_to"))
    if backfill and interval[0] is not None:
        return RepairRange.parse(interval[0], interval[1])
    return None


def _bound(value: object, name: str) -> Bound | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
        return int(value)
    try:
        stamp = datetime.fromisoformat(str(value).strip())
    except ValueError:
        raise RepairError(
            f"{value!r} is neither a version number nor an ISO timestamp",
            where=name,
            fix="write a Delta version (e.g. 12) or a timestamp (e.g. 2026-11-01T00:00:00Z)",
        ) from None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def repair_changes(spark: SparkSession, source: Source, first: int, last: int, pinned: int) -> DataFrame:
    """The net change up to `pinned` of every key of `source` changed in versions first..last.

    Reading on to the pinned version gives each touched key its state as the view's checkpoint
    sees it (and the version of its last change), not its state at the end of the range.
    """
    from pyspark.sql import functions as F

    if first > last:
        return no_changes(snapshot(spark, source.path, pinned))
    feed = read_change_feed(spark, source.path, first, pinned)
    touched = feed.where(F.col(VERSION) <= last).select(*source.key).distinct()
    return net_changes(feed, source.key).join(touched, on=list(source.key), how="left_semi")
