"""What the plan of a batch decides, as data: the batch to run (`BatchPlan`) or that there is
none (`Skip`), and where the view's batches stand (`ViewBatches`), from which it decides. The
planning itself is engine/plan.py.

Here, beside the batch records, because the layers below the engine read a plan: a view kind
runs for one (views/context.py), the checks report it (quality/checks.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from lakejoin.delta.identity import Identities
from lakejoin.delta.markers import BatchMarker
from lakejoin.delta.records import BatchMode, BatchRecord
from lakejoin.spec.definition import Definition


@dataclass(frozen=True)
class BatchPlan:
    """A batch to run: its id, mode, and the input versions (start, pinned] it reads.
    `repair_ends`: a repair's last version of each change source."""

    view: str
    batch_id: int
    mode: BatchMode
    start_versions: dict[str, int]
    pinned_versions: dict[str, int]
    notes: dict[str, str] = field(default_factory=dict)
    repair_ends: dict[str, int] = field(default_factory=dict)
    # The view's definition the batch runs under, and each input's columns at its pin (read by
    # the plan, checked against the spec): both are what the plan decided on, not what it is.
    definition: Definition | None = field(default=None, compare=False)
    schemas: dict[str, dict[str, str]] = field(default_factory=dict, compare=False, repr=False)
    rewrite: str | None = None  # why the output is rewritten whole, not merged (its key changed)
    audit_slice: int | None = None  # the slice of the keys the batch audits (quality/audit_plan.py)
    audit_round: int | None = None  # the output version its round's key ranges come from
    # The metrics of the last committed batch (join health's totals go on from them).
    last_metrics: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    # Which table each pin is of (delta/identity.py): the inputs at their pins, and the state
    # tables at the versions the batch starts from (the write replaces those it writes).
    identities: Identities = field(default_factory=dict, compare=False, repr=False)
    # An incremental batch's change rows per change source, as the commits in its range count
    # them (delta/change_feed.logged_change_rows; None: they cannot say): how its changes are read.
    change_rows: dict[str, int | None] = field(default_factory=dict, compare=False, repr=False)

    def marker(
        self,
        part: str,
        pinned_versions: Mapping[str, int] | None = None,
        identities: Identities | None = None,
    ) -> BatchMarker:
        pins = dict(self.pinned_versions if pinned_versions is None else pinned_versions)
        return BatchMarker(
            self.batch_id,
            part,
            self.mode,
            dict(self.start_versions),
            pins,
            definition=self.definition,
            repair_ends=dict(self.repair_ends),
            identities={k: v for k, v in (identities or self.identities).items() if k in pins},
        )


@dataclass(frozen=True)
class Skip:
    """Nothing new for the view since its last batch, and why."""

    reason: str
    start_versions: dict[str, int]
    pinned_versions: dict[str, int]


@dataclass(frozen=True)
class ViewBatches:
    """A view's batches as its output's log tells them: the last committed one and the id the
    next batch takes; and, from the batch log, the last batch after the committed one that found
    no change of content (`unchanged`, see engine/plan.read_on), from whose pins the next
    incremental batch reads on."""

    committed: BatchRecord | None
    next_id: int
    unchanged: BatchRecord | None = None
    audit_slice: int | None = None  # the slice the next batch audits, if incremental
    audit_round: int | None = None  # the output version that slice's round is cut on
