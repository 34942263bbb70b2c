"""The view kinds, one entry each: where each part of a kind lives.

A new kind is: its definition in spec/model.py, its parser (spec/kinds.py) and schema check
(spec/kind_schemas.py), its logic module in views/, and one entry here. Everything that
dispatches on a view's kind reads it from `KINDS`: the spec parser, the schema checks, the batch
engine (engine/kinds.py) and the command line's labels.

>>> KINDS[ViewKind.REKEY].logic
'lakejoin.views.rekey:RekeyView'
>>> KINDS[ViewKind.LIST_JOIN].labels["left_rows_carried"]
'carried without re-join'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from lakejoin.spec.kind_schemas import check_enrich, check_fk_join, check_list_join, check_rekey
from lakejoin.spec.kinds import Known, parse_enrich, parse_fk_join, parse_list_join, parse_rekey
from lakejoin.spec.model import Enrich, FkJoin, ListJoin, PipelineSpec, Rekey, ViewKind
from lakejoin.spec.yaml_lines import SpecReader

D = TypeVar("D", FkJoin, ListJoin, Rekey, Enrich)


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


# The fan-out figures (views/fanout.py) of the kinds that can fall back to a full recompute.
_FANOUT = {
    "fanout_facts": "rows reached by the other side's changes",  # facts (enrich), left rows (the joins)
    "fanout_permille": "fan-out \u2030",
    "full_recompute": "full recompute",
}

KINDS: dict[ViewKind, Kind[Any]] = {
    ViewKind.FK_JOIN: Kind(parse_fk_join, check_fk_join, "lakejoin.views.fk_join:FkJoinView", _FANOUT),
    ViewKind.LIST_JOIN: Kind(
        parse_list_join,
        check_list_join,
        "lakejoin.views.list_join:ListJoinView",
        {
            "composite_rows_rebuilt": "composite rows rebuilt",
            "left_rows_carried": "carried without re-join",
            **_FANOUT,
        },
    ),
    ViewKind.REKEY: Kind(
        parse_rekey,
        check_rekey,
        "lakejoin.views.rekey:RekeyView",
        {"conflicts": "conflicts", "null_keys_dropped": "null keys dropped"},
    ),
    # enrich also reports `shuffled.<dimension>` (a dimension joined without broadcast), as named.
    ViewKind.ENRICH: Kind(parse_enrich, check_enrich, "lakejoin.views.enrich:EnrichView", _FANOUT),
}
