"""Errors a user can meet. Each says what was wrong, where, and what to do next."""

from __future__ import annotations


class LakejoinError(Exception):
    """Base class of every error lakejoin raises on purpose."""

    def __init__(self, what: str, *, where: str = "", fix: str = "") -> None:
        self.what = what
        self.where = where
        self.fix = fix
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [f"{self.where}: {self.what}" if self.where else self.what]
        if self.fix:
            parts.append(f"  fix: {self.fix}")
        return "\n".join(parts)


class SpecError(LakejoinError):
    """A pipeline spec is malformed or does not fit the tables it names."""

    def __init__(self, what: str, *, file: str, line: int | None, key: str, fix: str = "") -> None:
        self.file = file
        self.line = line
        self.key = key
        location = f"{file}:{line}" if line else file
        super().__init__(what, where=f"{location} (at '{key}')", fix=fix)


class SourceError(LakejoinError):
    """A source table cannot be read the way the view needs it."""


class UpstreamNotCommittedError(SourceError):
    """A view reads another view that has no committed batch yet."""


class ChangeFeedMissingError(SourceError):
    """A source has no Change Data Feed enabled."""


class ChangesUnreadableError(SourceError):
    """A version range of a source's Change Data Feed can no longer be read."""


class DuplicateKeyError(SourceError):
    """A source snapshot holds several rows for one key."""


class NullKeyError(SourceError):
    """A source holds a row whose key is null."""


class QualityCheckError(LakejoinError):
    """A blocking data-quality check failed; the batch was not committed."""


class BatchStateError(LakejoinError):
    """A view's batches (its output's commits, its state tables, its batch log) are inconsistent
    with what is asked."""


class KeyConflictError(SourceError):
    """Several source rows claim one output key under a policy that forbids it."""


class RepairError(LakejoinError):
    """A repair range is malformed, or the view has no checkpoint to repair at."""


class ExpectationSuiteError(LakejoinError):
    """A user expectation suite (expectations/<pipeline>/<view>.json) cannot be used."""


class ConcurrentBatchError(LakejoinError):
    """Another commit landed on a table while this run's batch was writing it."""


class CommittedElsewhereError(ConcurrentBatchError):
    """Another run of the same view committed the batch this run was writing: the batch is in,
    once; this run has nothing left to do (engine/batch.py reports it as nothing new)."""


class DefinitionChangedError(LakejoinError):
    """A view's definition changed since its last batch, and its policy is to stop
    (`on_definition_change: fail`)."""


class InputReplacedError(LakejoinError):
    """An input is not the table the view's last batch read, or the view's output was changed
    behind lakejoin's back, and the view's policy is to stop (`on_input_replaced: fail`), or a
    repair is asked (engine/plan.plan_repair: it would read at pins that name what is gone)."""


class AuditDifferenceError(LakejoinError):
    """The audit found output rows that differ from what the inputs at the pins give."""


class CommandError(LakejoinError):
    """A command's arguments do not fit the pipeline: a key of the wrong length or type, a
    version the output does not have."""
