"""Pipeline specs: YAML in, a typed model out, every mistake reported with file and line.

This module must stay importable without Spark: Airflow's DAG files parse specs at parse time.

>>> spec = load_spec("pipelines/marketplace.yaml")          # doctest: +SKIP
>>> spec.views["display_products"].fk_join.how               # doctest: +SKIP
<JoinHow.LEFT: 'left'>
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lakejoin.errors import SpecError

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ViewKind(enum.Enum):
    FK_JOIN = "fk_join"
    LIST_JOIN = "list_join"
    REKEY = "rekey"
    ENRICH = "enrich"


class JoinHow(enum.Enum):
    INNER = "inner"
    LEFT = "left"


class Duplicates(enum.Enum):
    """What a list_join does with an element key that appears more than once in one list."""

    KEEP = "keep"  # every occurrence, each joined on its own
    DROP = "drop"  # the first occurrence wins


class EnrichMode(enum.Enum):
    """How an enrich view treats a dimension change."""

    LOOKUP = "lookup"  # a fact keeps the dimensions as they were when its batch ran (KIP-99)
    PROPAGATE = "propagate"  # a dimension change rewrites every fact that references it (KIP-314)


class OnConflict(enum.Enum):
    """What a unique rekey does when two master keys claim one derived key."""

    FAIL = "fail"  # stop the batch before its commit, listing the conflicting keys
    LATEST = "latest"  # the master changed most recently wins; the conflict is reported


@dataclass(frozen=True)
class Source:
    name: str
    path: str
    key: str
    line: int | None
    upstream: str | None = None  # the view whose output this is, when a view reads another view


@dataclass(frozen=True)
class FkJoin:
    left: str
    right: str
    fk: str
    how: JoinHow
    right_columns: tuple[str, ...] | None
    right_prefix: str


@dataclass(frozen=True)
class ListJoin:
    left: str
    list: str
    right: str
    into: str
    duplicates: Duplicates
    right_columns: tuple[str, ...] | None


@dataclass(frozen=True)
class Rekey:
    source: str
    key: str
    columns: tuple[str, ...] | None
    unique: bool
    on_conflict: OnConflict


@dataclass(frozen=True)
class Dimension:
    table: str
    fk: str
    how: JoinHow
    prefix: str
    columns: tuple[str, ...] | None

    @property
    def id(self) -> str:
        """A stable name for the dimension's routing index (reordering the spec keeps it)."""
        return f"{self.table}_by_{self.fk}"


@dataclass(frozen=True)
class Enrich:
    fact: str
    mode: EnrichMode
    dimensions: tuple[Dimension, ...]
    fanout_threshold: float  # propagate: above this share of the facts, recompute in full
    broadcast_limit_mb: float  # a dimension larger than this on disk is shuffled, not broadcast


Definition = FkJoin | ListJoin | Rekey | Enrich


@dataclass(frozen=True)
class View:
    name: str
    kind: ViewKind
    definition: Definition
    path: str
    line: int | None
    lines: Mapping[str, int] = field(default_factory=dict, repr=False, compare=False)

    @property
    def inputs(self) -> tuple[str, ...]:
        """The sources the view reads, the driving one first."""
        d = self.definition
        if isinstance(d, Rekey):
            return (d.source,)
        if isinstance(d, Enrich):
            return tuple(dict.fromkeys((d.fact, *(dim.table for dim in d.dimensions))))
        return (d.left, d.right)

    @property
    def fk_join(self) -> FkJoin:
        assert isinstance(self.definition, FkJoin), f"view '{self.name}' is a {self.kind.value}"
        return self.definition

    @property
    def list_join(self) -> ListJoin:
        assert isinstance(self.definition, ListJoin), f"view '{self.name}' is a {self.kind.value}"
        return self.definition

    @property
    def rekey(self) -> Rekey:
        assert isinstance(self.definition, Rekey), f"view '{self.name}' is a {self.kind.value}"
        return self.definition

    @property
    def enrich(self) -> Enrich:
        assert isinstance(self.definition, Enrich), f"view '{self.name}' is a {self.kind.value}"
        return self.definition


@dataclass(frozen=True)
class SparkSettings:
    master: str | None = None
    remote: str | None = None


@dataclass(frozen=True)
class PipelineSpec:
    name: str
    file: str
    schedule: str | None
    storage: str
    sources: Mapping[str, Source]
    views: Mapping[str, View]
    spark: SparkSettings
    lines: Mapping[str, int] = field(default_factory=dict, repr=False, compare=False)
    order: tuple[str, ...] = ()

    @property
    def state_path(self) -> str:
        """Where lakejoin keeps its own tables (batch records, routing indexes, reports)."""
        return str(Path(self.storage) / "_lakejoin")

    def error(self, key: str, what: str, fix: str = "") -> SpecError:
        return SpecError(what, file=self.file, line=self.lines.get(key), key=key, fix=fix)

    def view_order(self) -> list[str]:
        """Views in dependency order (a view after every view it reads)."""
        return list(self.order or self.views)

    def upstream_views(self, view: str) -> list[str]:
        """The views that `view` reads as sources."""
        return [n for n in self.views[view].inputs if self.sources[n].upstream is not None]


# --- YAML with line numbers -------------------------------------------------------------------


def _to_python(node: yaml.Node, path: str, lines: dict[str, int], file: str) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            child = f"{path}.{key}" if path else key
            if key in result:
                raise SpecError(
                    f"'{key}' appears twice",
                    file=file,
                    line=key_node.start_mark.line + 1,
                    key=child,
                    fix="keep one entry per name (view and source names must be unique)",
                )
            lines[child] = key_node.start_mark.line + 1
            result[key] = _to_python(value_node, child, lines, file)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(item, f"{path}[{i}]", lines, file) for i, item in enumerate(node.value)]
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()


def _compose(text: str, file: str) -> tuple[Any, dict[str, int]]:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        if exc.context_mark is not None and "simple key" in (exc.context or ""):
            # A missing ':' is found on the next line; the key that lacks it is the context.
            mark = exc.context_mark
        raise SpecError(
            f"not valid YAML: {exc.problem}",
            file=file,
            line=mark.line + 1 if mark else None,
            key="<document>",
            fix="fix the YAML syntax at that line (indentation, a missing ':' or quote)",
        ) from None
    lines: dict[str, int] = {}
    if root is None:
        return {}, lines
    return _to_python(root, "", lines, file), lines


# --- model building ---------------------------------------------------------------------------


class _Reader:
    """Reads typed fields out of the raw mapping, raising SpecErrors that point at the line."""

    def __init__(self, file: str, lines: dict[str, int]) -> None:
        self.file = file
        self.lines = lines

    def fail(self, key: str, what: str, fix: str = "") -> SpecError:
        line = self.lines.get(key)
        parent = key
        while line is None and "." in parent:
            parent = parent.rsplit(".", 1)[0]
            line = self.lines.get(parent)
        return SpecError(what, file=self.file, line=line, key=key, fix=fix)

    def mapping(self, raw: Any, key: str) -> dict[str, Any]:
        if not isinstance(raw, dict):
            raise self.fail(key, f"expected a mapping, found {_kind(raw)}", "write 'name: value' pairs")
        return raw

    def only(self, raw: dict[str, Any], key: str, allowed: set[str]) -> None:
        for name in raw:
            if name not in allowed:
                child = f"{key}.{name}" if key else name
                raise self.fail(
                    child,
                    f"unknown setting '{name}'",
                    f"use one of: {', '.join(sorted(allowed))}",
                )

    def text(self, raw: dict[str, Any], key: str, name: str, *, required: bool = True) -> str | None:
        path = f"{key}.{name}" if key else name
        value = raw.get(name)
        if value is None:
            if required:
                raise self.fail(
                    path, f"'{name}' is required", f"add '{name}: ...' under '{key or 'the top level'}'"
                )
            return None
        if not isinstance(value, str | int) or isinstance(value, bool):
            raise self.fail(path, f"'{name}' must be text, found {_kind(value)}")
        return str(value)

    def identifier(self, raw: dict[str, Any], key: str, name: str, *, required: bool = True) -> str | None:
        value = self.text(raw, key, name, required=required)
        if value is not None:
            self.check_identifier(value, f"{key}.{name}")
        return value

    def check_identifier(self, value: str, key: str) -> None:
        if not IDENTIFIER.match(value):
            raise self.fail(
                key,
                f"'{value}' is not a valid name",
                "use letters, digits and '_' only, starting with a letter or '_'",
            )


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", type(None): "nothing"}.get(type(value), repr(value))


def _resolve(base: Path, path: str) -> str:
    candidate = Path(path).expanduser()
    return str(candidate if candidate.is_absolute() else (base / candidate).resolve())


def _sources(reader: _Reader, raw: Any, base: Path) -> dict[str, Source]:
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

    def choices(self, reader: _Reader, key: str) -> str:
        names = ", ".join(sorted(self.sources))
        me = key.split(".")[1] if key.startswith("views.") else ""
        views = sorted(self.views - {me})
        return f"use one of: {names}" + (f", or one of the views: {', '.join(views)}" if views else "")


def _source_name(reader: _Reader, raw: dict[str, Any], key: str, role: str, known: _Known) -> str:
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
    reader: _Reader, raw: dict[str, Any], key: str, name: str, kind: type[enum.Enum], default: str
) -> Any:
    text = reader.text(raw, key, name, required=False) or default
    try:
        return kind(text)
    except ValueError:
        raise reader.fail(
            f"{key}.{name}", f"unknown {name} '{text}'", f"use one of: {', '.join(k.value for k in kind)}"
        ) from None


def _columns(reader: _Reader, raw: dict[str, Any], key: str, name: str) -> tuple[str, ...] | None:
    columns_raw = raw.get(name)
    if columns_raw is None:
        return None
    if not isinstance(columns_raw, list) or not columns_raw:
        raise reader.fail(f"{key}.{name}", f"{name} must be a non-empty list of column names")
    for i, column in enumerate(columns_raw):
        if not isinstance(column, str):
            raise reader.fail(f"{key}.{name}[{i}]", f"expected a column name, found {_kind(column)}")
        reader.check_identifier(column, f"{key}.{name}[{i}]")
    return tuple(columns_raw)


def _fk_join(reader: _Reader, raw: Any, key: str, known: _Known) -> FkJoin:
    raw = reader.mapping(raw, key)
    reader.only(raw, key, {"left", "right", "fk", "how", "right_columns", "right_prefix"})
    left = _source_name(reader, raw, key, "left", known)
    right = _source_name(reader, raw, key, "right", known)
    fk = reader.identifier(raw, key, "fk")
    assert fk
    how = _how(reader, raw, key, default=JoinHow.INNER)
    columns = _columns(reader, raw, key, "right_columns")
    prefix = reader.text(raw, key, "right_prefix", required=False) or ""
    if prefix:
        reader.check_identifier(prefix, f"{key}.right_prefix")
    return FkJoin(left, right, fk, how, columns, prefix)


def _how(reader: _Reader, raw: dict[str, Any], key: str, *, default: JoinHow) -> JoinHow:
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
    reader: _Reader, raw: dict[str, Any], key: str, name: str, default: float, *, most: float
) -> float:
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= most:
        raise reader.fail(f"{key}.{name}", f"'{name}' must be a number from 0 to {most:g}, found {value!r}")
    return float(value)


def _enrich(reader: _Reader, raw: Any, key: str, known: _Known) -> Enrich:
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
    threshold = _number(reader, raw, key, "fanout_threshold", 0.2, most=1.0)
    if "fanout_threshold" in raw and mode is not EnrichMode.PROPAGATE:
        raise reader.fail(
            f"{key}.fanout_threshold",
            "fanout_threshold applies only to 'mode: propagate' (lookup never rewrites facts)",
            "remove it, or set 'mode: propagate'",
        )
    limit = _number(reader, raw, key, "broadcast_limit_mb", 64.0, most=8192.0)
    return Enrich(fact, mode, tuple(dimensions), threshold, limit)


def _list_join(reader: _Reader, raw: Any, key: str, known: _Known) -> ListJoin:
    raw = reader.mapping(raw, key)
    reader.only(raw, key, {"left", "list", "right", "into", "duplicates", "right_columns"})
    left = _source_name(reader, raw, key, "left", known)
    right = _source_name(reader, raw, key, "right", known)
    column = reader.identifier(raw, key, "list")
    into = reader.identifier(raw, key, "into")
    assert column and into
    duplicates = _choice(reader, raw, key, "duplicates", Duplicates, Duplicates.KEEP.value)
    return ListJoin(left, column, right, into, duplicates, _columns(reader, raw, key, "right_columns"))


def _rekey(reader: _Reader, raw: Any, key: str, known: _Known) -> Rekey:
    raw = reader.mapping(raw, key)
    reader.only(raw, key, {"source", "key", "columns", "unique", "on_conflict"})
    source = _source_name(reader, raw, key, "source", known)
    column = reader.identifier(raw, key, "key")
    assert column
    unique = raw.get("unique", True)
    if not isinstance(unique, bool):
        raise reader.fail(f"{key}.unique", f"'unique' must be true or false, found {_kind(unique)}")
    if not unique and "on_conflict" in raw:
        raise reader.fail(
            f"{key}.on_conflict",
            "on_conflict applies only to a unique rekey: with 'unique: false' every "
            "(derived key, master key) pair is its own row, so nothing can conflict",
            "remove on_conflict, or set 'unique: true'",
        )
    on_conflict = _choice(reader, raw, key, "on_conflict", OnConflict, OnConflict.FAIL.value)
    return Rekey(source, column, _columns(reader, raw, key, "columns"), unique, on_conflict)


_PARSERS: dict[ViewKind, Callable[[_Reader, Any, str, _Known], Definition]] = {
    ViewKind.FK_JOIN: _fk_join,
    ViewKind.LIST_JOIN: _list_join,
    ViewKind.REKEY: _rekey,
    ViewKind.ENRICH: _enrich,
}


def _views(
    reader: _Reader, raw: Any, storage: str, sources: dict[str, Source], base: Path
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


def parse_spec(text: str, file: str = "<spec>") -> PipelineSpec:
    """Build a PipelineSpec from YAML text; relative paths resolve against the spec's folder."""
    raw, lines = _compose(text, file)
    reader = _Reader(file, lines)
    raw = reader.mapping(raw, "")
    reader.only(raw, "", {"pipeline", "schedule", "storage", "sources", "views", "spark"})
    name = reader.identifier(raw, "", "pipeline")
    base = Path(file).resolve().parent if not file.startswith("<") else Path.cwd()
    storage = _resolve(base, reader.text(raw, "", "storage") or "")
    schedule = reader.text(raw, "", "schedule", required=False)
    spark_raw = reader.mapping(raw.get("spark") or {}, "spark")
    reader.only(spark_raw, "spark", {"master", "remote"})
    spark = SparkSettings(
        reader.text(spark_raw, "spark", "master", required=False),
        reader.text(spark_raw, "spark", "remote", required=False),
    )
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


def _dependency_order(reader: _Reader, views: dict[str, View]) -> tuple[str, ...]:
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
    reader: _Reader, sources: dict[str, Source], views: dict[str, View], order: tuple[str, ...]
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


def find_specs(folder: str | Path) -> list[Path]:
    """The pipeline specs in a folder, in a stable order."""
    root = Path(folder)
    return sorted([*root.glob("*.yaml"), *root.glob("*.yml")])
