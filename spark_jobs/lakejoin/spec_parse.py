"""Builds the typed spec model (`lakejoin.spec`) from YAML: sources, views of each kind, the views'
dependency order and the sources that views become for the views that read them."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakejoin.spec import (
    FANOUT_THRESHOLD,
    Definition,
    Dimension,
    Duplicates,
    Enrich,
    EnrichMode,
    FkJoin,
    JoinHow,
    ListJoin,
    OnConflict,
    PipelineSpec,
    Rekey,
    Source,
    SparkRun,
    SparkSettings,
    View,
    ViewKind,
)
from lakejoin.spec_yaml import SpecReader, compose_with_lines, describe


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
        reader.only(body, key, {"path", "key"})
        path = reader.text(body, key, "path")
        column = reader.identifier(body, key, "key")
        assert path is not None and column is not None
        sources[name] = Source(name, _resolve(base, path), column, reader.lines.get(key))
    return sources


@dataclass(frozen=True)
class _Known:
    """The names a view may read: declared sources, and the other views."""

    sources: set[str]
    views: set[str]

    def choices(self, reader: SpecReader, key: str) -> str:
        names = ", ".join(sorted(self.sources))
        me = key.split(".")[1] if key.startswith("views.") else ""
        views = sorted(self.views - {me})
        return f"use one of: {names}" + (f", or one of the views: {', '.join(views)}" if views else "")


def _source_name(reader: SpecReader, raw: dict[str, Any], key: str, role: str, known: _Known) -> str:
    name = reader.identifier(raw, key, role)
    assert name is not None
    if name not in known.sources and name not in known.views:
        raise reader.fail(
            f"{key}.{role}",
            f"unknown source '{name}'",
            f"declare it under 'sources:' or {known.choices(reader, key)}",
        )
    return name


def _choice(
    reader: SpecReader, raw: dict[str, Any], key: str, name: str, kind: type[enum.Enum], default: str
) -> Any:
    text = reader.text(raw, key, name, required=False) or default
    try:
        return kind(text)
    except ValueError:
        raise reader.fail(
            f"{key}.{name}", f"unknown {name} '{text}'", f"use one of: {', '.join(k.value for k in kind)}"
        ) from None


def _columns(reader: SpecReader, raw: dict[str, Any], key: str, name: str) -> tuple[str, ...] | None:
    columns_raw = raw.get(name)
    if columns_raw is None:
        return None
    if not isinstance(columns_raw, list) or not columns_raw:
        raise reader.fail(f"{key}.{name}", f"{name} must be a non-empty list of column names")
    for i, column in enumerate(columns_raw):
        if not isinstance(column, str):
            raise reader.fail(f"{key}.{name}[{i}]", f"expected a column name, found {describe(column)}")
        reader.check_identifier(column, f"{key}.{name}[{i}]")
    return tuple(columns_raw)


def _fk_join(reader: SpecReader, raw: Any, key: str, known: _Known) -> FkJoin:
    raw = reader.mapping(raw, key)
    reader.only(raw, key, {"left", "right", "fk", "how", "right_columns", "right_prefix", "fanout_threshold"})
    left = _source_name(reader, raw, key, "left", known)
    right = _source_name(reader, raw, key, "right", known)
    fk = reader.identifier(raw, key, "fk")
    assert fk
    how = _how(reader, raw, key, default=JoinHow.INNER)
    columns = _columns(reader, raw, key, "right_columns")
    prefix = reader.text(raw, key, "right_prefix", required=False) or ""
    if prefix:
        reader.check_identifier(prefix, f"{key}.right_prefix")
    threshold = _number(reader, raw, key, "fanout_threshold", FANOUT_THRESHOLD, most=1.0)
    return FkJoin(left, right, fk, how, columns, prefix, threshold)


def _how(reader: SpecReader, raw: dict[str, Any], key: str, *, default: JoinHow) -> JoinHow:
    how_text = reader.text(raw, key, "how", required=False) or default.value
    try:
        return JoinHow(how_text)
    except ValueError:
        raise reader.fail(
            f"{key}.how",
            f"unknown join type '{how_text}'",
            f"use one of: {', '.join(h.value for h in JoinHow)}",
        ) from None


def _number(
    reader: SpecReader, raw: dict[str, Any], key: str, name: str, default: float, *, most: float
) -> float:
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= most:
        raise reader.fail(
            f"{key}.{name}",
            f"'{name}' must be a number from 0 to {most:g}, found {value!r}",
            f"set it within that range (the default is {default:g}) or remove it",
        )
    return float(value)


def _enrich(reader: SpecReader, raw: Any, key: str, known: _Known) -> Enrich:
    raw = reader.mapping(raw, key)
    reader.only(raw, key, {"fact", "mode", "dimensions", "fanout_threshold", "broadcast_limit_mb"})
    fact = _source_name(reader, raw, key, "fact", known)
    mode = _choice(reader, raw, key, "mode", EnrichMode, EnrichMode.LOOKUP.value)
    listed = raw.get("dimensions")
    if not isinstance(listed, list) or not listed:
        raise reader.fail(
            f"{key}.dimensions",
            "'dimensions' must be a non-empty list",
            "list the dimension tables, e.g. [{table: customers, fk: customer_id, prefix: customer_}]",
        )
    dimensions: list[Dimension] = []
    for i, body in enumerate(listed):
        at = f"{key}.dimensions[{i}]"
        body = reader.mapping(body, at)
        reader.only(body, at, {"table", "fk", "how", "prefix", "columns"})
        table = _source_name(reader, body, at, "table", known)
        fk = reader.identifier(body, at, "fk")
        assert fk
        if table == fact:
            raise reader.fail(f"{at}.table", f"'{table}' is the fact table", "enrich from another table")
        prefix = reader.text(body, at, "prefix", required=False) or ""
        if prefix:
            reader.check_identifier(prefix, f"{at}.prefix")
        dimension = Dimension(
            table,
            fk,
            _how(reader, body, at, default=JoinHow.LEFT),
            prefix,
            _columns(reader, body, at, "columns"),
        )
        if any(d.id == dimension.id for d in dimensions):
            raise reader.fail(at, f"dimension '{table}' on fk '{fk}' is listed twice", "list it once")
        dimensions.append(dimension)
    threshold = _number(reader, raw, key, "fanout_threshold", FANOUT_THRESHOLD, most=1.0)
    if "fanout_threshold" in raw and mode is not EnrichMode.PROPAGATE:
        raise reader.fail(
            f"{key}.fanout_threshold",
            "fanout_threshold applies only to 'mode: propagate' (lookup never rewrites facts)",
            "remove it, or set 'mode: propagate'",
        )
    limit = _number(reader, raw, key, "broadcast_limit_mb", 64.0, most=8192.0)
    return Enrich(fact, mode, tuple(dimensions), threshold, limit)


def _list_join(reader: SpecReader, raw: Any, key: str, known: _Known) -> ListJoin:
    raw = reader.mapping(raw, key)
    allowed = {"left", "list", "right", "into", "duplicates", "right_columns", "fanout_threshold"}
    reader.only(raw, key, allowed)
    left = _source_name(reader, raw, key, "left", known)
    right = _source_name(reader, raw, key, "right", known)
    column = reader.identifier(raw, key, "list")
    into = reader.identifier(raw, key, "into")
    assert column and into
    duplicates = _choice(reader, raw, key, "duplicates", Duplicates, Duplicates.KEEP.value)
    columns = _columns(reader, raw, key, "right_columns")
    threshold = _number(reader, raw, key, "fanout_threshold", FANOUT_THRESHOLD, most=1.0)
    return ListJoin(left, column, right, into, duplicates, columns, threshold)


def _rekey(reader: SpecReader, raw: Any, key: str, known: _Known) -> Rekey:
    raw = reader.mapping(raw, key)
    reader.only(raw, key, {"source", "key", "columns", "unique", "on_conflict"})
    source = _source_name(reader, raw, key, "source", known)
    column = reader.identifier(raw, key, "key")
    assert column
    unique = raw.get("unique", True)
    if not isinstance(unique, bool):
        raise reader.fail(f"{key}.unique", f"'unique' must be true or false, found {describe(unique)}")
    if not unique and "on_conflict" in raw:
        raise reader.fail(
            f"{key}.on_conflict",
            "on_conflict applies only to a unique rekey: with 'unique: false' every "
            "(derived key, master key) pair is its own row, so nothing can conflict",
            "remove on_conflict, or set 'unique: true'",
        )
    on_conflict = _choice(reader, raw, key, "on_conflict", OnConflict, OnConflict.FAIL.value)
    return Rekey(source, column, _columns(reader, raw, key, "columns"), unique, on_conflict)


_PARSERS: dict[ViewKind, Callable[[SpecReader, Any, str, _Known], Definition]] = {
    ViewKind.FK_JOIN: _fk_join,
    ViewKind.LIST_JOIN: _list_join,
    ViewKind.REKEY: _rekey,
    ViewKind.ENRICH: _enrich,
}


def _spark(reader: SpecReader, raw: Any) -> SparkSettings:
    raw = reader.mapping(raw, "spark")
    reader.only(raw, "spark", {"run", "conn_id", "master", "remote"})
    run_text = reader.text(raw, "spark", "run", required=False) or SparkRun.LOCAL.value
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
    known = _Known(set(sources), set(raw))
    for name, body in raw.items():
        key = f"views.{name}"
        reader.check_identifier(name, key)
        if name in sources:
            raise reader.fail(key, f"view '{name}' has the name of a source", "give the view another name")
        body = reader.mapping(body, key)
        kinds = [k for k in body if k != "path"]
        supported = ", ".join(k.value for k in ViewKind)
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
        definition = _PARSERS[kind](reader, body[kind.value], f"{key}.{kind.value}", known)
        explicit = reader.text(body, key, "path", required=False)
        path = _resolve(base, explicit) if explicit else str(Path(storage) / "views" / name)
        lines = {k[len(key) + 1 :]: v for k, v in reader.lines.items() if k.startswith(key + ".")}
        views[name] = View(name, kind, definition, path, reader.lines.get(key), lines)
    return views


def parse(text: str, file: str) -> PipelineSpec:
    """Build a PipelineSpec from YAML text; relative paths resolve against the spec's folder."""
    raw, lines = compose_with_lines(text, file)
    reader = SpecReader(file, lines)
    raw = reader.mapping(raw, "")
    reader.only(raw, "", {"pipeline", "schedule", "storage", "sources", "views", "spark"})
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
    """The declared sources plus every view that another view reads, keyed by its output key."""
    everything = dict(sources)
    read = {n for v in views.values() for n in v.inputs if n in views}
    for name in order:
        if name not in read:
            continue
        view = views[name]
        d = view.definition
        if isinstance(d, Rekey):
            if not d.unique:
                readers = sorted(v.name for v in views.values() if name in v.inputs)
                raise reader.fail(
                    f"views.{readers[0]}",
                    f"view '{readers[0]}' reads view '{name}', a rekey with 'unique: false', whose rows "
                    f"are keyed by two columns ({d.key}, {everything[d.source].key})",
                    "read a unique rekey, or the master table itself",
                )
            key = d.key
        else:
            driving = d.fact if isinstance(d, Enrich) else d.left
            key = everything[driving].key
        everything[name] = Source(name, view.path, key, view.line, upstream=name)
    return everything
