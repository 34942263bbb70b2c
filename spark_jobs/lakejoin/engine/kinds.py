"""The batch logic of a view kind, resolved from the import path its registry entry names
(spec/registry.py): the one place that imports a view kind's module.

>>> kind_logic(ViewKind.FK_JOIN).__name__
'FkJoinView'
"""

from __future__ import annotations

import importlib

from lakejoin.spec.model import PipelineSpec, View, ViewKind
from lakejoin.spec.registry import KINDS
from lakejoin.views.base import ViewKindLogic


def kind_logic(kind: ViewKind) -> type[ViewKindLogic]:
    """The ViewKindLogic class of `kind`, imported from its registry entry's "module:class"."""
    path = KINDS[kind].logic
    module, _, name = path.partition(":")
    logic = getattr(importlib.import_module(module), name, None)
    if not (isinstance(logic, type) and issubclass(logic, ViewKindLogic)):
        raise TypeError(
            f"view kind '{kind.value}': its logic '{path}' is not a ViewKindLogic class; "
            f"fix its entry in lakejoin/spec/registry.py"
        )
    return logic


def view_logic(spec: PipelineSpec, view: View) -> ViewKindLogic:
    """The logic of the view's kind, for one batch of the view."""
    return kind_logic(view.kind)(spec, view)
