"""The pure rules of the one-commit upsert (key_upsert.py), stated without Spark so tests/unit
checks each with a truth table: which tables it writes, which key ranges its file pruning reads,
how it reads the members of Delta's classes, and what its commit records.

>>> key_ranges([7, 1, 2, 3, 9, 10], max_ranges=8)
[(1, 3), (7, 7), (9, 10)]
>>> table_refusals({"deletionVectors"}, {"delta.enableDeletionVectors": "true"}, ["day"])
['it is partitioned (by day)', 'the change data feed is off (delta.enableChangeDataFeed)']
"""

from __future__ import annotations

import datetime
import decimal
import enum
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from lakejoin.sink.merge_terms import MergeCounts

T = TypeVar("T")

CHANGE_TYPE = "_change_type"  # Delta's CDCReader.CDC_TYPE_COLUMN_NAME


class ChangeType(enum.Enum):
    """The change rows the caller hands in (`_change_type`): the change feed's own values."""

    INSERT = "insert"
    UPDATE_PREIMAGE = "update_preimage"
    UPDATE_POSTIMAGE = "update_postimage"
    DELETE = "delete"


# Writer features whose tables this write handles: those lakejoin creates its outputs with, and
# those Delta may add that change nothing a commit of DVs, data and CDC files must do (writeFiles
# enforces constraints; commit stamps in-commit timestamps). Any other one (clustering, identity,
# generated or default columns, type widening, Iceberg compatibility, catalog-managed or
# coordinated commits...) asks more of a writer than writeFiles does: the public MERGE writes it.
HANDLED_FEATURES = frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "deletionVectors",
        "domainMetadata",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "inCommitTimestamp",
        "checkpointProtection",
        "timestampNtz",
    }
)

# Columns the table may not have: writeFiles routes rows by `_change_type`, and the CDF reader
# adds the other two to every row it returns.
RESERVED_TABLE_COLUMNS = frozenset({CHANGE_TYPE, "__is_cdc", "_commit_version", "_commit_timestamp"})
# Names DeletionVectorBitmapGenerator gives its own columns next to the key's, and the upsert's.
RESERVED_KEY_COLUMNS = frozenset({"filepath", "deletionvectorid", "rowindexcol", "dvfilepath"})


def key_ranges(values: Iterable[Any], max_ranges: int) -> list[tuple[Any, Any]]:
    """Ranges (lo, hi) that cover every value in `values` (nulls aside), sorted, at most
    `max_ranges` of them: consecutive integers and days join exactly; above `max_ranges` the
    ranges closest to each other join (smallest gap first; strings, which have no distance, in
    groups of about as many ranges each). A range holding values the batch lacks only makes
    Delta read a file more: pruning by a superset of the keys stays exact.

    >>> key_ranges([1, 5, 6, 20], max_ranges=2)
    [(1, 6), (20, 20)]
    >>> key_ranges(["a", "b", "c", "d"], max_ranges=2)
    [('a', 'b'), ('c', 'd')]
    """
    if max_ranges < 1:
        raise ValueError(f"max_ranges must be at least 1, not {max_ranges}")
    ranges: list[tuple[Any, Any]] = []
    for value in sorted({v for v in values if v is not None}):
        if ranges and _next_to(ranges[-1][1], value):
            ranges[-1] = (ranges[-1][0], value)
        else:
            ranges.append((value, value))
    if len(ranges) <= max_ranges:
        return ranges
    gaps = [_gap(a[1], b[0]) for a, b in zip(ranges, ranges[1:], strict=False)]
    measured = [gap for gap in gaps if gap is not None]
    if len(measured) < len(gaps):
        cuts = [round(i * len(ranges) / max_ranges) for i in range(1, max_ranges)]
    else:
        widest = sorted(range(len(measured)), key=lambda i: (-measured[i], i))[: max_ranges - 1]
        cuts = sorted(i + 1 for i in widest)
    bounds = [0, *cuts, len(ranges)]
    return [(ranges[lo][0], ranges[hi - 1][1]) for lo, hi in zip(bounds, bounds[1:], strict=False)]


def _next_to(a: Any, b: Any) -> bool:
    """`b` follows `a` with no value between them (integers and days only)."""
    if isinstance(a, int) and isinstance(b, int):
        return b - a == 1
    if _is_day(a) and _is_day(b):
        return bool((b - a).days == 1)
    return False


def _gap(a: Any, b: Any) -> float | None:
    """How far apart two sorted values are, for numbers and days (None: no distance)."""
    if isinstance(a, (int, decimal.Decimal)) and isinstance(b, (int, decimal.Decimal)):
        return float(b - a)
    if _is_day(a) and _is_day(b):
        return float((b - a).days)
    return None


def _is_day(value: Any) -> bool:
    return isinstance(value, datetime.date) and not isinstance(value, datetime.datetime)


def balanced(terms: Sequence[T], join: Callable[[T, T], T]) -> T:
    """`terms` joined pairwise in a balanced tree: a left fold of a thousand ORs is a
    thousand-deep expression, which Catalyst's recursive rules may overflow on.

    >>> balanced(["a", "b", "c"], lambda x, y: f"({x} OR {y})")
    '(a OR (b OR c))'
    """
    if not terms:
        raise ValueError("no terms to join")
    if len(terms) == 1:
        return terms[0]
    half = len(terms) // 2
    return join(balanced(terms[:half], join), balanced(terms[half:], join))


@dataclass(frozen=True)
class TableLog:
    """What the upsert asks of a table, read from its protocol and metadata actions as Delta's
    log writes them (`Protocol.json()`, `Metadata.json()`)."""

    writer_features: frozenset[str]
    configuration: dict[str, str]
    partition_columns: tuple[str, ...]
    schema: dict[str, Any]  # the table's schema as Spark's StructType JSON

    @classmethod
    def of(cls, protocol_json: str, metadata_json: str) -> TableLog:
        protocol = json.loads(protocol_json)["protocol"]
        metadata = json.loads(metadata_json)["metaData"]
        return cls(
            # A legacy protocol (writer version < 7) lists no features: it has no deletion
            # vectors, which `table_refusals` then names.
            writer_features=frozenset(protocol.get("writerFeatures") or ()),
            configuration={str(k): str(v) for k, v in (metadata.get("configuration") or {}).items()},
            partition_columns=tuple(metadata.get("partitionColumns") or ()),
            schema=json.loads(metadata["schemaString"]),
        )

    @property
    def columns(self) -> list[str]:
        return [str(field["name"]) for field in self.schema["fields"]]


def table_refusals(
    writer_features: Collection[str], configuration: Mapping[str, str], partition_columns: Sequence[str]
) -> list[str]:
    """Why the upsert may not write a table with these writer features, table properties and
    partition columns (empty: it may)."""
    on = {k: str(v).strip().lower() == "true" for k, v in configuration.items()}
    reasons = []
    if partition_columns:
        reasons.append(f"it is partitioned (by {', '.join(partition_columns)})")
    if (configuration.get("delta.columnMapping.mode") or "none").lower() != "none":
        reasons.append("it maps column names (delta.columnMapping.mode)")
    # Once the feature is merely supported, Delta gives every new file fresh row ids: an
    # updated row would change its id, which a MERGE keeps.
    if "rowTracking" in writer_features or on.get("delta.enableRowTracking"):
        reasons.append("it tracks row ids (rowTracking)")
    # DeletionVectorUtils.deletionVectorsWritable: the feature, and the property that turns it on.
    if "deletionVectors" not in writer_features or not on.get("delta.enableDeletionVectors"):
        reasons.append("deletion vectors are off (delta.enableDeletionVectors)")
    # Without the feed, writeFiles would write the change rows into the table as rows.
    if not on.get("delta.enableChangeDataFeed"):
        reasons.append("the change data feed is off (delta.enableChangeDataFeed)")
    if on.get("delta.appendOnly"):
        reasons.append("it is append-only (delta.appendOnly)")
    other = sorted(set(writer_features) - HANDLED_FEATURES - {"rowTracking", "columnMapping"})
    if other:
        reasons.append(f"it has writer features this write does not handle: {', '.join(other)}")
    return reasons


def column_refusals(table_columns: Sequence[str], columns: Sequence[str], key: Sequence[str]) -> list[str]:
    """Why the upsert may not write rows of `columns` keyed by `key` into a table of
    `table_columns` (empty: it may). Names compare case-insensitively, as Spark's do."""
    table = {c.lower() for c in table_columns}
    given = {c.lower() for c in columns}
    reasons = []
    if not key:
        reasons.append("the rows have no key")
    if given != table:
        missing, extra = sorted(table - given), sorted(given - table)
        reasons.append(f"the rows' columns are not the table's (missing {missing}, extra {extra})")
    if not {k.lower() for k in key} <= given:
        reasons.append(f"the key {list(key)} is not among the rows' columns")
    clash = sorted(c for c in table_columns if c.lower() in RESERVED_TABLE_COLUMNS)
    clash += sorted(k for k in key if k.lower() in RESERVED_KEY_COLUMNS)
    if clash:
        reasons.append(f"a column has a name Delta's change feed or row-index scan uses: {clash}")
    return reasons


MODIFIERS = frozenset(
    {"public", "protected", "private", "abstract", "final", "native", "synchronized", "default", "strictfp"}
)


def member_shapes(listing: str) -> set[str]:
    """The shapes of the members in `listing`, `java.util.Arrays.toString` of a class's
    `getMethods()` or `getConstructors()`: `[static ]<return type> <name>(<parameter types>)`,
    a constructor `<init>(<parameter types>)`. The declaring class is left out: Scala puts a
    method on a class or on the trait it mixes in, from one build to the next.

    >>> sorted(member_shapes("[public static int a.B.f(java.lang.String,long), public a.B(int)]"))
    ['<init>(int)', 'static int f(java.lang.String,long)']
    """
    shapes = set()
    for member in listing.strip().removeprefix("[").removesuffix("]").split(", "):
        if "(" not in member:
            continue
        head, _, rest = member.partition("(")
        parameters = rest.partition(")")[0]
        *words, qualified = head.split()
        static = "static" in words
        kept = [w for w in words if w not in MODIFIERS and w != "static"]
        if not kept:
            shapes.add(f"<init>({parameters})")
        else:
            name = qualified.rpartition(".")[2]
            shapes.add(f"{'static ' if static else ''}{kept[-1]} {name}({parameters})")
    return shapes


@dataclass(frozen=True)
class ChangeCounts:
    """The change rows of a batch by `_change_type` (`unknown`: rows of any other value, null
    included)."""

    inserts: int = 0
    preimages: int = 0
    postimages: int = 0
    deletes: int = 0
    unknown: int = 0

    @property
    def old_rows(self) -> int:
        """The table rows the write marks deleted: one for each update and each delete."""
        return self.preimages + self.deletes

    @property
    def new_rows(self) -> int:
        """The rows the write adds to the table: inserts and the updated rows."""
        return self.inserts + self.postimages

    @property
    def keys(self) -> int:
        """The keys the batch changes (an update is two change rows of one key)."""
        return self.inserts + self.postimages + self.deletes

    @property
    def change_rows(self) -> int:
        return self.inserts + self.preimages + self.postimages + self.deletes

    def fault(self) -> str | None:
        """What makes these rows no batch of changes (None: nothing)."""
        if self.unknown:
            kinds = ", ".join(t.value for t in ChangeType)
            return f"{self.unknown} change rows have a {CHANGE_TYPE} other than {kinds}"
        if self.preimages != self.postimages:
            return f"{self.preimages} update pre-images but {self.postimages} post-images"
        return None

    def merge_counts(self, version: int | None) -> MergeCounts:
        return MergeCounts(
            inserted=self.inserts, updated=self.postimages, deleted=self.deletes, version=version
        )


# What DMLWithDeletionVectorsHelper.processUnmodifiedData reports, and the names MERGE's history
# gives them (numRemovedFiles: files every row of which went).
DV_METRICS = {
    "numRemovedFiles": "numTargetFilesRemoved",
    "numDeletionVectorsAdded": "numTargetDeletionVectorsAdded",
    "numDeletionVectorsRemoved": "numTargetDeletionVectorsRemoved",
    "numDeletionVectorsUpdated": "numTargetDeletionVectorsUpdated",
}


@dataclass(frozen=True)
class WrittenFiles:
    """What `writeFiles` returned: data files, change data files, and the data files' bytes."""

    data: int = 0
    changes: int = 0
    data_bytes: int = 0


def commit_metrics(
    counts: ChangeCounts, dv: Mapping[str, int], files: WrittenFiles, times_ms: Mapping[str, int]
) -> dict[str, int]:
    """The operationMetrics of the upsert's commit, under MERGE's names, so history and
    output_counts.py read it as a MERGE. `operationNumSourceRows` is not optional: Delta's
    Merge.transformMetrics reads it without a default, and the commit fails without it. The
    source is one row per changed key, as lakejoin's MERGE source is.

    >>> commit_metrics(ChangeCounts(inserts=1), {}, WrittenFiles(1, 1, 9), {})["numOutputRows"]
    1
    """
    metrics = {
        "operationNumSourceRows": counts.keys,
        "numTargetRowsInserted": counts.inserts,
        "numTargetRowsUpdated": counts.postimages,
        "numTargetRowsDeleted": counts.deletes,
        "numTargetRowsMatchedUpdated": counts.postimages,
        "numTargetRowsMatchedDeleted": counts.deletes,
        "numTargetRowsNotMatchedBySourceUpdated": 0,
        "numTargetRowsNotMatchedBySourceDeleted": 0,
        "numTargetRowsCopied": 0,  # deletion vectors: no unchanged row is rewritten
        "numOutputRows": counts.new_rows,
        "numTargetFilesAdded": files.data,
        "numTargetChangeFilesAdded": files.changes,
        "numTargetBytesAdded": files.data_bytes,
    }
    metrics.update({history: int(dv.get(name, 0)) for name, history in DV_METRICS.items()})
    metrics.update({name: int(ms) for name, ms in times_ms.items()})
    return metrics
