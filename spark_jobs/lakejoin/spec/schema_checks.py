"""Checks of a view against the columns of the tables it reads, at the versions a batch pinned:
the checks every kind shares here, then the kind's own (spec/kinds/<kind>.py) through the kind
registry (spec/registry.py).

Errors point at the spec line of the setting that does not fit, and say what to do.
"""

from __future__ import annotations

from collections.abc import Mapping

from lakejoin.spec.definition import taken_columns
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
    check_taken_names(spec, view, schemas)
    KINDS[view.kind].check_schemas(spec, view.definition, f"views.{view.name}.{view.kind.value}", schemas)


def check_taken_names(spec: PipelineSpec, view: View, schemas: Mapping[str, Mapping[str, str]]) -> None:
    """Refuse a column the view takes whose name holds a backtick. Spark reads every other name
    Delta accepts (`geo.lat` too) through `delta.sql_text`, but Delta 4.4's MERGE into a table
    with a Change Data Feed (every output and state table) fails on this one whatever its
    quoting: it reads the column as packedCdc.`<name>`, the backtick not doubled
    (MergeOutputGeneration.scala)."""
    base = f"views.{view.name}.{view.kind.value}"
    for name, columns in taken_columns(spec, view, schemas).items():
        odd = [c for c, _ in columns if "`" in c]
        if not odd:
            continue
        path, (at, listing) = spec.sources[name].path, _setting(view, name)
        rename = "rename it in that table (with Delta's column mapping on, ALTER TABLE ... RENAME COLUMN)"
        raise spec.error(
            f"{base}.{at}",
            f"column '{odd[0]}' of {path} holds a backtick, which Delta's MERGE cannot write into "
            f"the output of view '{view.name}' (a table with a Change Data Feed)",
            f"list the columns the view takes without it ({listing}: [...]), or {rename}"
            if listing
            else f"the view takes every column of {name}: {rename}",
        )


def _setting(view: View, source: str) -> tuple[str, str | None]:
    """The setting of the view's kind that names `source`, and the one that lists the columns
    the view takes of it (None: it takes them all, as of a left or fact table)."""
    named = next(i for i in view.definition.inputs() if i.source == source)
    return named.setting, named.listing
