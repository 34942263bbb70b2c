"""Whether a failed write is a commit conflict: another commit landed on the table while this one
was being written, so the fix is to run again from what is committed. Told by the error's class,
never by words anywhere in its text: nearly every JVM stack trace holds
`java.util.concurrent.ThreadPoolExecutor`, and a disk-full or missing-file failure is no
conflict (issue 51).

- Delta (Spark): `io.delta.exceptions.DeltaConcurrentModificationException` and its seven kinds.
  PySpark raises Delta's Python twin of one (`delta.exceptions`, classic or Connect, which share
  no base but their names) once `delta.exceptions` is imported (`delta.tables` imports it), else
  py4j's Py4JJavaError, whose `java_exception` says it by its class; Spark Connect without
  Delta's module gives the error's condition (`DELTA_CONCURRENT_APPEND...`).
- delta-rs: CommitFailedError holds every refused commit (an append-only table, a log store
  failure too), so its conflicts are told by the words delta-rs gives its conflict kinds
  (`TransactionError::CommitConflict`, after "Failed to commit transaction: "), at the start.

>>> is_conflict(ValueError("java.util.concurrent.ThreadPoolExecutor"))
False
"""

from __future__ import annotations

from typing import Any

# io.delta.exceptions' conflicts, as delta.exceptions names their Python twins (Delta 4.4.0:
# every subclass of org.apache.spark.sql.delta.DeltaConcurrentModificationException, javap-checked).
DELTA_CONFLICTS = frozenset(
    {
        "DeltaConcurrentModificationException",
        "ConcurrentWriteException",
        "MetadataChangedException",
        "ProtocolChangedException",
        "ConcurrentAppendException",
        "ConcurrentDeleteReadException",
        "ConcurrentDeleteDeleteException",
        "ConcurrentTransactionException",
    }
)
# Their error conditions (delta-error-classes.json), before any sub-condition.
DELTA_CONDITIONS = frozenset(
    {
        "DELTA_CONCURRENT_APPEND",
        "DELTA_CONCURRENT_DELETE_READ",
        "DELTA_CONCURRENT_DELETE_DELETE",
        "DELTA_CONCURRENT_TRANSACTION",
        "DELTA_CONCURRENT_WRITE",
        "DELTA_METADATA_CHANGED",
        "DELTA_PROTOCOL_CHANGED",
    }
)
_JAVA_BASE = "org.apache.spark.sql.delta.DeltaConcurrentModificationException"
# delta-rs 1.6's CommitConflictError messages (the first three are its ConcurrentAppend,
# ConcurrentDeleteRead and ConcurrentDeleteDelete), and its VersionAlreadyExists: the race for
# the next version lost.
DELTA_RS_CONFLICTS = (
    "Commit failed: a concurrent transaction",
    "Metadata changed since last commit",
    "Concurrent transaction failed",
    "Protocol changed since last commit",
    "Tried committing existing table version",
)
_DELTA_RS_PREFIX = "Failed to commit transaction: "


def is_conflict(exc: BaseException) -> bool:
    """Whether `exc` is Delta's or delta-rs's refusal of a commit because another landed first."""
    return delta_conflict(exc) is not None or delta_rs_conflict(exc)


def delta_conflict(exc: BaseException) -> str | None:
    """The name of Delta's conflict `exc` is (None: it is none)."""
    for cls in type(exc).__mro__:
        if cls.__module__.split(".")[0] == "delta" and cls.__name__ in DELTA_CONFLICTS:
            return cls.__name__
    origin = getattr(exc, "java_exception", None)
    if origin is not None:
        return _java_conflict(origin)
    condition = _condition(exc)
    if condition is not None and condition.split(".")[0] in DELTA_CONDITIONS:
        return condition.split(".")[0]
    return None


def delta_rs_conflict(exc: BaseException) -> bool:
    """Whether `exc` is delta-rs's CommitFailedError for a conflict (not for an append-only table,
    a log store failure or another refusal, which CommitFailedError also carries)."""
    from deltalake.exceptions import CommitFailedError

    if not isinstance(exc, CommitFailedError):
        return False
    text = str(exc).strip()
    if text.startswith(_DELTA_RS_PREFIX) and text.removeprefix(_DELTA_RS_PREFIX).isdigit():
        return True  # MaxCommitAttempts: every retry lost the race for the next version
    return text.removeprefix(_DELTA_RS_PREFIX).startswith(DELTA_RS_CONFLICTS)


def _java_conflict(origin: Any, depth: int = 4) -> str | None:
    """The simple name of the Delta conflict a Java exception is, or was caused by."""
    for _ in range(depth):
        cls = origin.getClass()
        first = str(cls.getSimpleName())
        while cls is not None:
            if str(cls.getName()) == _JAVA_BASE:
                return first
            cls = cls.getSuperclass()
        origin = origin.getCause()
        if origin is None:
            return None
    return None


def _condition(exc: BaseException) -> str | None:
    """A PySpark error's condition (its error class), when it has one."""
    asked = getattr(exc, "getCondition", None)
    if not callable(asked):
        return None
    try:
        found = asked()
    except Exception:  # noqa: BLE001 - a captured error whose Java side is gone says nothing
        return None
    return found if isinstance(found, str) else None
