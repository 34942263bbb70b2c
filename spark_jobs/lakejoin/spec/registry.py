"""The view kinds, one entry each: where each part of a kind lives.

A new kind is: its definition in spec/model.py, its parser (spec/kinds.py) and schema check
(spec/kind_schemas.py), its logic module in views/, and one entry here (its types: spec/kind.py).
Everything that dispatches on a view's kind reads it from `KINDS`: the spec parser, the schema
checks, the `health:` limits, the batch engine (engine/kinds.py), the kinds' health measures and
state tables (views/base.py) and the command line's labels.

>>> KINDS[ViewKind.REKEY].logic
'lakejoin.views.rekey:RekeyView'
>>> KINDS[ViewKind.LIST_JOIN].labels["left_rows_carried"]
'carried without re-join'
"""

from __future__ import annotations

from typing import Any

from lakejoin.spec.column_lineage import enrich_lineage, fk_join_lineage, list_join_lineage, rekey_lineage
from lakejoin.spec.kind import Kind, Measure
from lakejoin.spec.kind_schemas import check_enrich, check_fk_join, check_list_join, check_rekey
from lakejoin.spec.kinds import FANOUT, parse_enrich, parse_fk_join, parse_list_join, parse_rekey
from lakejoin.spec.model import ViewKind

# The fan-out figures (views/fanout.py) of the kinds that can fall back to a full recompute.
_FANOUT = {
    "fanout_facts": "rows reached by the other side's changes",  # facts (enrich), left rows (the joins)
    "fanout_permille": "fan-out \u2030",
    "full_recompute": "full recompute",
}

_FANOUT_SETTINGS = frozenset(FANOUT)

KINDS: dict[ViewKind, Kind[Any]] = {
    ViewKind.FK_JOIN: Kind(
        parse_fk_join,
        check_fk_join,
        "lakejoin.views.fk_join:FkJoinView",
        _FANOUT,
        measures=(
            Measure(
                "missing_right",
                "left rows whose fk finds no right row (null-filled, or held back by an inner join)",
            ),
            Measure("null_fk", "left rows whose fk holds a null", from_changes=lambda d: (d.left, d.fk)),
        ),
        waiting="the oldest left row still without its right row",
        waits="missing_right",
        lineage=fk_join_lineage,
        performance=_FANOUT_SETTINGS,
        key_fields=frozenset({"fk"}),
    ),
    ViewKind.LIST_JOIN: Kind(
        parse_list_join,
        check_list_join,
        "lakejoin.views.list_join:ListJoinView",
        {
            "composite_rows_rebuilt": "composite rows rebuilt",
            "left_rows_carried": "carried without re-join",
            **_FANOUT,
        },
        measures=(
            Measure("missing_elements", "list elements without a right row"),
            Measure("lists_with_missing", "left rows whose list has an element without a right row"),
        ),
        waiting="the oldest list still waiting for an element's right row",
        waits="lists_with_missing",
        lineage=list_join_lineage,
        performance=_FANOUT_SETTINGS,
    ),
    ViewKind.REKEY: Kind(
        parse_rekey,
        check_rekey,
        "lakejoin.views.rekey:RekeyView",
        {"conflicts": "conflicts", "null_keys_dropped": "null keys dropped"},
        measures=(
            # Counted from the master's changes alone: a master row with a null derived key is
            # dropped, so no output row can carry its flag.
            Measure(
                "null_keys",
                "master rows dropped for a null derived key",
                flagged=False,
                from_changes=lambda d: (d.source, d.key),
            ),
            Measure("conflicts", "derived keys claimed by more than one master"),
        ),
        waiting="the oldest conflict not yet resolved",
        # A conflict waits for its masters to part: `late` counts those resolved.
        waits="conflicts",
        lineage=rekey_lineage,
        state="rekey index",
        key_fields=frozenset({"key"}),
    ),
    # enrich also reports `shuffled.<dimension>` (a dimension joined without broadcast), as named.
    ViewKind.ENRICH: Kind(
        parse_enrich,
        check_enrich,
        "lakejoin.views.enrich:EnrichView",
        _FANOUT,
        measures=(Measure("missing_dimension", "facts whose row of some dimension is missing"),),
        waiting="the oldest fact still without a dimension row",
        waits="missing_dimension",
        lineage=enrich_lineage,
        performance=_FANOUT_SETTINGS | {"broadcast_limit_mb"},
        key_fields=frozenset({"fk"}),  # each dimension's
    ),
}
