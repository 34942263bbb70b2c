"""fk_join: `left ⋈ right ON left.fk = right.key`, one row per left key, inner or left.

`recompute` and the helpers above the class are DataFrame code; the class reads the pinned
inputs (through the batch context, or with delta-rs on the driver when the keys are few) and
writes nothing: the engine writes the output (engine/write.py).

>>> out = recompute(left_rows, right_rows, spec.views["display_products"].fk_join,
...                 right_key="merchant_id", right_columns=["display_name"])   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakejoin.delta.change_feed import before_rows
from lakejoin.quality import checks as quality
from lakejoin.quality.validations import Validation
from lakejoin.spec.explained import Ask, Reading, Role, why_not_joined
from lakejoin.spec.kind_parts import carried_columns
from lakejoin.spec.model import FkJoin, JoinHow, Key, PipelineSpec, View
from lakejoin.views.base import Gathered, LeftRightLogic, Rebuilt, held_rows
from lakejoin.views.context import BatchContext
from lakejoin.views.explained import driving, looked_up
from lakejoin.views.fanout import FanOutRule
from lakejoin.views.health_flags import flag
from lakejoin.views.joins import Flags, SideRows, joined, previous_rows
from lakejoin.views.joins import referenced_right_rows as referenced_right_rows  # tests/steps take it here
from lakejoin.views.reads import Affected, Route, fk_referenced_rows, fk_route
from lakejoin.views.reads import affected_keys as affected_keys  # tests/steps take it from here

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakejoin.sink.entry import StateWrite


def chosen_right_columns(join: FkJoin, right_columns: Sequence[str], right_key: Key) -> list[str]:
    """The right columns the output carries: the declared ones, or all but the right key's."""
    return carried_columns(join.right_columns, right_columns, right_key)


def recompute(
    left_rows: DataFrame,
    right_rows: DataFrame,
    join: FkJoin,
    *,
    right_key: Key,
    right_columns: Sequence[str],
    flags: bool = False,
) -> DataFrame:
    """The output rows of the given left rows: left columns, then the prefixed right columns.

    Inner keeps a left row only when its fk is not null and matches a right key; left keeps
    every left row, with null right columns when the fk is null or unmatched. Matching is
    exact equality of every fk column with its right key column, so `a` never matches `ab`,
    and an fk with a null in any column never matches anything.

    With `flags` (views/health_flags.py), every left row, flagged `null_fk` and `missing_right`
    (an fk without nulls that matches no right key), and kept as the join keeps it.
    """
    side = SideRows(right_rows, right_key, join.fk, right_columns, join.right_prefix, join.how)
    return joined(left_rows, [side], flags=Flags(flag("missing_right"), flag("null_fk")) if flags else None)


@dataclass(frozen=True)
class JoinRows:
    """The rows an fk_join recompute takes: left rows and the right rows they reference."""

    left: DataFrame
    right: DataFrame


class FkJoinView(LeftRightLogic[JoinRows]):
    """fk_join on the batch protocol. The pinned left table is its own routing index: the left
    rows a right change reaches are those whose fk holds a changed right key at the pin (read
    by the key and fk columns alone). A left row whose fk moved away from it is a left change,
    so it is rewritten anyway. No state table: see docs/decisions.md, "State only where it
    pays"."""

    def __init__(self, spec: PipelineSpec, view: View) -> None:
        super().__init__(spec, view)
        self.join = view.fk_join

    def _right_columns(self, schemas: Mapping[str, Mapping[str, str]]) -> list[str]:
        return chosen_right_columns(self.join, list(schemas[self.right.name]), self.right.key)

    @property
    def routes(self) -> tuple[Route, ...]:
        """A right change reaches the left rows whose fk holds its key at the pin."""
        return (fk_route(self.right, self.join.fk, self.left),)

    @property
    def fanout(self) -> FanOutRule:
        # A right row referenced by many left rows (a popular customer) can reach a large
        # share of the output: then one recompute beats routing every key.
        return FanOutRule.of_join(self.left, self.right, self.join)

    def gather(
        self, ctx: BatchContext, changes: Mapping[str, DataFrame], affected: Affected, metrics: dict[str, int]
    ) -> Gathered[JoinRows]:
        """The affected left rows and the right rows they reference: read on the driver when they
        are few (lookups.py). With `ctx.derivation.previous`, also both at the previous pins
        (each side's changed rows as they were), and the right rows read include those the left
        rows before reference."""
        left_changes, left_rows = changes[self.left.name], affected.rows
        left_before, referring, few = None, left_rows, [left_rows]
        if ctx.derivation.previous:
            left_before = previous_rows(left_rows, left_changes, self.left.key)
            # A left row whose fk moved references at the previous pins a right row no left
            # row references now: one read of the right rows serves both. The rows before are
            # the unchanged left rows and the changed ones' before their change, so the left
            # rows and those reference the same right rows (and, on the driver, with no join).
            referring = left_rows.select(*self.join.fk).unionByName(left_before.select(*self.join.fk))
            few.append(before_rows(left_changes))
        right_rows = fk_referenced_rows(
            ctx, self.right, self.join.fk, referring, few if affected.few else None
        )
        before = None
        if left_before is not None:
            before = JoinRows(
                left_before, previous_rows(right_rows, changes[self.right.name], self.right.key)
            )
        return Gathered(JoinRows(left_rows, right_rows), before, held={self.right.name: right_rows})

    def gather_whole(self, ctx: BatchContext, metrics: dict[str, int]) -> Gathered[JoinRows]:
        return Gathered(JoinRows(ctx.whole_unique(self.left), ctx.whole_unique(self.right)))

    def recompute(self, ctx: BatchContext, rows: JoinRows, *, flags: bool) -> DataFrame:
        return recompute(
            rows.left,
            rows.right,
            self.join,
            right_key=self.right.key,
            right_columns=self._right_columns(ctx.schemas),
            flags=flags,
        )

    def write_state(self, ctx: BatchContext, rebuilt: Rebuilt, *, since: int) -> tuple[StateWrite, ...]:
        """No state to write (see the class)."""
        return ()

    def validations(self, ctx: BatchContext, written: DataFrame, rebuilt: Rebuilt) -> list[Validation]:
        import great_expectations as gx

        expectations = quality.key_expectations(self.left.key)
        rows = written
        if self.join.how is JoinHow.INNER:
            rows = quality.with_key_resolution(
                written,
                held_rows(ctx, rebuilt, self.right.name, self.right),
                self.join.fk,
                self.right.key,
                quality.FK_RESOLVED,
            )
            expectations += [
                *(gx.expectations.ExpectColumnValuesToNotBeNull(column=c) for c in self.join.fk),
                gx.expectations.ExpectColumnValuesToBeInSet(column=quality.FK_RESOLVED, value_set=[True]),
            ]
        return [Validation("changed_rows", rows, expectations)]

    def explain(self, ask: Ask) -> Reading:
        """The left row and the right row its fk names, at the batch's pins."""
        inputs, feeds = driving(ask, self.left, Role.LEFT)
        if inputs[0].row is not None:
            fk = tuple(inputs[0].row[c] for c in self.join.fk)
            inputs.append(looked_up(ask, self.right, Role.RIGHT, fk, how=self.join.how))
            feeds.append((self.right, Role.RIGHT, self.right.key, [fk]))
        return Reading(inputs, feeds, why_not_joined(inputs) if ask.absent else None)
