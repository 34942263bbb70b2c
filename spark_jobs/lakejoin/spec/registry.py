"""The view kinds, one entry each: where each part of a kind lives.

A new kind is: its definition in spec/model.py; its module spec/kinds/<kind>.py, with its
parser, schema check, column lineage and `DECLARED` entry (its types: spec/kind.py); its logic
module in views/, with its `explain` reader; and one line here. Everything that dispatches on a
view's kind reads it from `KINDS`: the spec parser, the schema checks, the `health:` limits, the
batch engine (engine/kinds.py), the kinds' health measures and state tables (views/base.py),
`lakejoin explain` (through engine/kinds.py) and the command line's labels.

>>> KINDS[ViewKind.REKEY].logic
'lakejoin.views.rekey:RekeyView'
>>> KINDS[ViewKind.LIST_JOIN].labels["left_rows_carried"]
'carried without re-join'
"""

from __future__ import annotations

from typing import Any

from lakejoin.spec.kind import Kind
from lakejoin.spec.kinds import enrich, fk_join, list_join, rekey
from lakejoin.spec.model import ViewKind

KINDS: dict[ViewKind, Kind[Any]] = {
    ViewKind.FK_JOIN: fk_join.DECLARED,
    ViewKind.LIST_JOIN: list_join.DECLARED,
    ViewKind.REKEY: rekey.DECLARED,
    ViewKind.ENRICH: enrich.DECLARED,
}
