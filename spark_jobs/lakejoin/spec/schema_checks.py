"""Checks of a view against the columns of the tables it reads, at the versions a batch pinned:
the checks every kind shares here, then the kind's own (spec/kind_schemas.py) through the kind
registry (spec/registry.py).

Errors point at the spec line of the setting that does not fit, and say what to do.
"""

from __future__ import annotations

from collections.abc import Mapping

from lakejoin.spec.model import PipelineSpec, View
from lakejoin.spec.registry import KINDS


def check_view_schemas(spec: PipelineSpec, view: View, schemas: Mapping[str, Mapping[str, str]]) -> None:
    """Check a view against the columns (name -> Spark type) of the tables it reads."""
    for name in view.inputs:
        source = spec.sources[name]
        for i, column in enumerate(source.key if source.upstream is None else ()):
            if column not in schemas[source.name]:
                raise spec.error(
                    f"sources.{source.name}.key" + (f"[{i}]" if len(source.key) > 1 else ""),
                    f"key column '{column}' is not in table {source.path}",
                    f"use one of its columns: {', '.join(schemas[source.name])}",
                )
    KINDS[view.kind].check_schemas(spec, view.definition, f"views.{view.name}.{view.kind.value}", schemas)
