"""Builds the typed spec model (`lakejoin.spec.model`) from YAML: sources, views of each kind, the views'
dependency order and the sources that views become for the views that read them.

>>> spec = load_spec("pipelines/marketplace.yaml")
>>> spec.views["display_products"].fk_join.how
<JoinHow.LEFT: 'left'>
>>> spec.upstream_views("enriched_purchases")
['display_products']
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from lakejoin.errors import SpecError
from lakejoin.spec.kind_parts import Known
from lakejoin.spec.layout import output_path
from lakejoin.spec.model import (
    OnDefinitionChange,
    OnInputReplaced,
    PipelineSpec,
    Source,
    SparkRun,
    SparkSettings,
    View,
    ViewKind,
)
from lakejoin.spec.registry import KINDS
from lakejoin.spec.sections import PIPELINE, SOURCE, SPARK, VIEW
from lakejoin.spec.trust import parse_audit, parse_health
from lakejoin.spec.yaml_lines import SpecReader, compose_with_lines


def _resolve(base: Path, path: str) -> str:
    candidate = Path(path).expanduser()
    return str(candidate if candidate.is_absolute() else (base / candidate).resolve())


def _sources(reader: SpecReader, raw: Any, base: Path) -> dict[str, Source]:
    raw = reader.mapping(raw, "sources")
    if not raw:
        raise reader.fail("sources", "no sources are declared", "declare at least one source table")
    sources: dict[str, Source] = {}
    for name, body in raw.items():
        key = f"sources.{name}"
        reader.check_identifier(name, key)
        body = reader.mapping(body, key)
        reader.only(body, key, SOURCE.names())
        path = reader.text(body, key, "path")
        columns = reader.key_columns(body, key, "key")
        assert path is not None
        sources[name] = Source(name, _resolve(base, path), columns, reader.lines.get(key))
    return sources


def _spark(reader: SpecReader, raw: Any) -> SparkSettings:
    raw = reader.mapping(raw, "spark")
    reader.only(raw, "spark", SPARK.names())
    run_text = reader.text(raw, "spark", "run", required=False) or SPARK["run"].default.value
    try:
        run = SparkRun(run_text)
    except ValueError:
        raise reader.fail(
            "spark.run",
            f"unknown way to run Spark '{run_text}'",
            "use 'local' (Spark in the Airflow task's own process) or 'submit' (spark-submit to the "
            "cluster of an Airflow Spark connection)",
        ) from None
    master = reader.text(raw, "spark", "master", required=False)
    remote = reader.text(raw, "spark", "remote", required=False)
    conn_id = reader.text(raw, "spark", "conn_id", required=False)
    if run is SparkRun.SUBMIT:
        for name in ("master", "remote"):
            if name in raw:
                raise reader.fail(
                    f"spark.{name}",
                    f"'{name}' does not apply to 'run: submit': spark-submit takes the master from the "
                    f"Airflow connection '{conn_id or SparkSettings.conn_id}'",
                    f"remove '{name}' and set the master URL in that connection",
                )
    elif conn_id is not None:
        raise reader.fail(
            "spark.conn_id",
            "'conn_id' applies only to 'run: submit' (Spark in the task's process uses no connection)",
            "add 'run: submit' to submit the batches to a cluster, or remove 'conn_id'",
        )
    return SparkSettings(master, remote, run, conn_id or SparkSettings.conn_id)


def _views(
    reader: SpecReader, raw: Any, storage: str, sources: dict[str, Source], base: Path
) -> dict[str, View]:
    raw = reader.mapping(raw, "views")
    if not raw:
        raise reader.fail("views", "no views are declared", "declare at least one view")
    views: dict[str, View] = {}
    known = Known(set(sources), set(raw))
    for name, body in raw.items():
        key = f"views.{name}"
        reader.check_identifier(name, key)
        if name in sources:
            raise reader.fail(key, f"view '{name}' has the name of a source", "give the view another name")
        body = reader.mapping(body, key)
        kinds = [k for k in body if k not in VIEW_SETTINGS]
        supported = ", ".join(k.value for k in ViewKind)
        unknown = [k for k in kinds if k not in {v.value for v in ViewKind}]
        if len(kinds) > 1 and unknown:
            raise reader.fail(
                f"{key}.{unknown[0]}",
                f"unknown setting '{unknown[0]}' of a view",
                f"a view holds one kind ({supported}) and may set: {', '.join(sorted(VIEW_SETTINGS))}",
            )
        if len(kinds) != 1:
            raise reader.fail(
                key, f"a view declares exactly one kind, found {len(kinds)}", f"use one of: {supported}"
            )
        try:
            kind = ViewKind(kinds[0])
        except ValueError:
            raise reader.fail(
                f"{key}.{kinds[0]}", f"unknown view kind '{kinds[0]}'", f"use one of: {supported}"
            ) from None
        definition = KINDS[kind].parse(reader, body[kind.value], f"{key}.{kind.value}", known)
        explicit = reader.text(body, key, "path", required=False)
        path = _resolve(base, explicit) if explicit else output_path(storage, name)
        lines = {k[len(key) + 1 :]: v for k, v in reader.lines.items() if k.startswith(key + ".")}
        policy = _policy(
            reader, body, key, "on_definition_change", OnDefinitionChange, "under the new definition"
        )
        replaced = _policy(reader, body, key, "on_input_replaced", OnInputReplaced, "at the new versions")
        health = parse_health(reader, body.get("health"), f"{key}.health", kind, KINDS[kind].limits())
        audit = parse_audit(reader, body.get("audit"), f"{key}.audit")
        views[name] = View(
            name, kind, definition, path, reader.lines.get(key), lines, policy, replaced, health, audit
        )
    return views


VIEW_SETTINGS = frozenset(VIEW.names())  # a view's keys beside its kind


Policy = TypeVar("Policy", OnDefinitionChange, OnInputReplaced)


def _policy(
    reader: SpecReader, body: dict[str, Any], key: str, setting: str, kind: type[Policy], then: str
) -> Policy:
    """A view's `full_refresh`-or-`fail` setting; `then`: what a full refresh does."""
    text = reader.text(body, key, setting, required=False) or VIEW[setting].default.value
    try:
        return kind(text)
    except ValueError:
        raise reader.fail(
            f"{key}.{setting}",
            f"unknown {setting} '{text}'",
            f"use 'full_refresh' (the next batch recomputes every key {then}) "
            "or 'fail' (stop until someone runs the view with --full-refresh)",
        ) from None


def load_spec(path: str | Path) -> PipelineSpec:
    """Load and validate the pipeline spec at `path`."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(
            f"cannot read the spec: {exc.strerror}",
            file=file,
            line=None,
            key="<file>",
            fix="check the path to the YAML spec",
        ) from None
    return parse_spec(text, file)


def parse_spec(text: str, file: str = "<spec>") -> PipelineSpec:
    """Build a PipelineSpec from YAML text; relative paths resolve against the spec's folder."""
    raw, lines = compose_with_lines(text, file)
    reader = SpecReader(file, lines)
    raw = reader.mapping(raw, "")
    reader.only(raw, "", PIPELINE.names())
    name = reader.identifier(raw, "", "pipeline")
    base = Path(file).resolve().parent if not file.startswith("<") else Path.cwd()
    storage = _resolve(base, reader.text(raw, "", "storage") or "")
    schedule = reader.text(raw, "", "schedule", required=False)
    spark = _spark(reader, raw.get("spark") or {})
    if "sources" not in raw:
        raise reader.fail("sources", "'sources' is required", "declare the source tables under 'sources:'")
    if "views" not in raw:
        raise reader.fail("views", "'views' is required", "declare at least one view under 'views:'")
    sources = _sources(reader, raw["sources"], base)
    views = _views(reader, raw["views"], storage, sources, base)
    order = _dependency_order(reader, views)
    assert name is not None
    return PipelineSpec(
        name,
        file,
        schedule,
        storage,
        _with_view_sources(reader, sources, views, order),
        views,
        spark,
        lines,
        order,
    )


def _dependency_order(reader: SpecReader, views: dict[str, View]) -> tuple[str, ...]:
    """Views ordered so that each comes after every view it reads (declaration order otherwise);
    a cycle is an error that names it."""
    order: list[str] = []
    state: dict[str, str] = {}  # name -> "visiting" | "done"

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            cycle = path[path.index(name) :] + [name]
            raise reader.fail(
                f"views.{cycle[0]}",
                f"views read each other in a cycle: {' -> '.join(cycle)}",
                "a view cannot read itself, directly or through other views: remove one of these reads",
            )
        state[name] = "visiting"
        for upstream in views[name].inputs:
            if upstream in views:
                visit(upstream, [*path, name])
        state[name] = "done"
        order.append(name)

    for name in views:
        visit(name, [])
    return tuple(order)


def _with_view_sources(
    reader: SpecReader, sources: dict[str, Source], views: dict[str, View], order: tuple[str, ...]
) -> dict[str, Source]:
    """The declared sources plus every view that another view reads, keyed by its output key
    (every column of it)."""
    everything = dict(sources)
    read = {n for v in views.values() for n in v.inputs if n in views}
    for name in order:
        if name not in read:
            continue
        view = views[name]
        key = view.definition.output_key(lambda source: everything[source].key)
        everything[name] = Source(name, view.path, key, view.line, upstream=name)
    return everything
