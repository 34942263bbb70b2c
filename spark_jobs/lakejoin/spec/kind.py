"""What a view kind declares, as data: the types of its registry entry (spec/registry.py).

Every per-kind table is derived from these entries: the settings of its block (the parser's and
the JSON Schema's), the measures a `health:` limit may name (spec/trust.py), the flagged and
counted health measures, the waiting measure and the state table of each kind's batch logic
(views/base.py), and the labels of its metrics.

>>> m = Measure("null_fk", "left rows whose fk holds a null", from_changes=lambda d: (d.left, d.fk))
>>> m.flagged
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from lakejoin.spec.column_lineage import ColumnLineage
from lakejoin.spec.kind_parts import Known
from lakejoin.spec.model import Key, PipelineSpec
from lakejoin.spec.settings import Settings
from lakejoin.spec.yaml_lines import SpecReader

D = TypeVar("D")  # the kind's definition (spec/model.py): FkJoin for fk_join, ...

WAITING = "waiting"  # the measure every kind with a waiting measure has: the oldest row still waiting


@dataclass(frozen=True)
class Measure:
    """One join health measure of a kind: the name a `health:` limit and the batch log use, and
    what it counts. A `flagged` one is flagged per output row while the rebuild counts health
    (views/health_flags.py); a `from_changes` one is counted from a change source's net changes,
    before and after (`ViewKindLogic.health_changes`): given the definition, that source and the
    columns of which a null marks the row."""

    name: str
    counts: str
    flagged: bool = True
    from_changes: Callable[[Any], tuple[str, Key]] | None = None


@dataclass(frozen=True)
class Kind(Generic[D]):
    """One view kind's parts. The batch logic is named by its import path ("module:class", as
    Python entry points name theirs), not imported: the spec layer never imports views/ (parsing a
    spec needs no Spark, for the Airflow plugin and `lakejoin status`), and the batch engine
    resolves the path when a batch runs (`engine.kinds.kind_logic`)."""

    parse: Callable[[SpecReader, Any, str, Known], D]  # (reader, raw, key, known) -> definition
    check_schemas: Callable[[PipelineSpec, D, str, Mapping[str, Mapping[str, str]]], None]
    logic: str  # "lakejoin.views.fk_join:FkJoinView", a views.base.ViewKindLogic
    labels: Mapping[str, str]  # the kind's metrics as the command line and reports label them
    measures: tuple[Measure, ...]  # in the order a `health:` error lists them
    waiting: str  # what the kind's `waiting` measure is the age of
    waits: str | None  # the flagged measure whose rows wait for a row of another input
    # Which input columns each output column comes from (spec/column_lineage.py):
    # (spec, definition, schemas, output columns) -> the lineage.
    lineage: Callable[[PipelineSpec, D, Mapping[str, Mapping[str, str]], Sequence[str]], ColumnLineage]
    state: str | None = None  # what its state table is called in messages; None: it keeps none
    # Its definition's settings that change how a batch runs, never what it computes: left out
    # of the recorded definition (spec/definition.py), so editing one refreshes nothing.
    performance: frozenset[str] = frozenset()
    key_fields: frozenset[str] = frozenset()  # its definition's settings that hold a key
    # The names of the checks its logic runs on the rows a batch writes (`Validation.name`: GE
    # suites and reports are named by them).
    validations: tuple[str, ...] = ()
    # The settings of its block (`fk_join: {...}`): the keys its parser accepts, their defaults
    # and bounds, and what the JSON Schema says of each (spec/json_schema.py).
    settings: Settings = field(kw_only=True)

    def limits(self) -> dict[str, str]:
        """What a `health:` limit of a view of this kind may name, and what each counts."""
        return {**{m.name: m.counts for m in self.measures}, WAITING: self.waiting}
