"""What every view kind gives the batch engine (engine/batch.py): its output key, its recompute
of a batch's affected rows, its state tables, and its data quality checks.

The engine owns the protocol: plan, changes, write, check, commit, idempotency. A view kind
owns its semantics: which output keys a batch's changes can affect, how to recompute them, and
how to keep its own state table (rekey's re-keyed index; the other kinds keep none) in step.
What the engine gives a view kind in return, while one batch runs, is views/context.py; the
fan-out rule several kinds share is views/fanout.py.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakejoin.delta.key_ranges import KeyRange
from lakejoin.quality.checks import Validation
from lakejoin.spec.model import PipelineSpec, Source, View
from lakejoin.views.context import STATE

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakejoin.views.context import BatchContext


@dataclass(frozen=True)
class Rebuilt:
    """A batch's recomputed output rows, and the output keys they replace (None: all keys).
    When the view kind materialised the affected keys it says how many there are and their
    range (`key_ranges.materialised`), so the write does not materialise them again."""

    rows: DataFrame
    affected: DataFrame | None
    affected_count: int | None = None
    bounds: KeyRange | None = None


class ViewKindLogic(ABC):
    """One view kind's part of a batch. A new instance serves each batch."""

    state_name = "state table"  # what the view's state table is called in messages

    def __init__(self, spec: PipelineSpec, view: View) -> None:
        self.spec = spec
        self.view = view

    @property
    def sources(self) -> tuple[Source, ...]:
        return tuple(self.spec.sources[name] for name in self.view.inputs)

    @property
    def change_sources(self) -> tuple[Source, ...]:
        """The sources whose changes a batch reads; the others are only read at pinned versions.
        A batch with no new version of any of these has nothing to do."""
        return self.sources

    def state_tables(self, state_path: str) -> dict[str, str]:
        """The view's state tables, by the name under which a plan pins each one's version."""
        return {STATE: state_path}

    def metrics(self) -> dict[str, int]:
        """Counts of this kind's own, reported with the batch (composite rows, conflicts...)."""
        return {}

    @property
    @abstractmethod
    def output_key(self) -> tuple[str, ...]:
        """The column(s) that identify an output row."""

    def prepare(self, schemas: Mapping[str, Mapping[str, str]]) -> None:  # noqa: B027 - optional hook
        """Called with each source's columns (name -> type) at the pinned versions, after the
        spec's own checks passed."""

    @abstractmethod
    def rebuild(self, ctx: BatchContext, changes: Mapping[str, DataFrame] | None) -> Rebuilt:
        """Recompute the output rows this batch affects (every row when `changes` is None).

        `changes` maps each source to its net changed rows since the last batch (see
        changes.net_changes). A failure here leaves nothing written.
        """

    @abstractmethod
    def write_state(self, ctx: BatchContext) -> None:
        """Bring the view's state table up to the pinned versions, before the output commit
        (called inside `idempotent`). It must end exact whatever an earlier attempt at older
        pins wrote: state is a function of the pinned inputs, rewritten key by key."""

    @abstractmethod
    def validations(self, ctx: BatchContext, written: DataFrame) -> list[Validation]:
        """Great Expectations checks of the rows the batch is about to write (run before its
        output commit: a failing blocking check leaves nothing committed). Each validation's
        rows are at most one per row of `written` (the checks choose their engine by that count)."""
