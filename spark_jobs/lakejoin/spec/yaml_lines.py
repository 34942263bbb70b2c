"""YAML with a line number for every key, and a reader of typed settings whose errors point at
those lines. The spec's parser (`spec/parse.py`) builds the model with it."""

from __future__ import annotations

import re
from typing import Any

import yaml

from lakejoin.errors import SpecError

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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


def compose_with_lines(text: str, file: str) -> tuple[Any, dict[str, int]]:
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


class SpecReader:
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
            raise self.fail(key, f"expected a mapping, found {describe(raw)}", "write 'name: value' pairs")
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
            raise self.fail(path, f"'{name}' must be text, found {describe(value)}")
        return str(value)

    def identifier(self, raw: dict[str, Any], key: str, name: str, *, required: bool = True) -> str | None:
        value = self.text(raw, key, name, required=required)
        if value is not None:
            self.check_identifier(value, f"{key}.{name}")
        return value

    def key_columns(self, raw: dict[str, Any], key: str, name: str) -> tuple[str, ...]:
        """A key: one column name (`key: id`), or a list of distinct ones (`key: [tenant_id, id]`)."""
        path = f"{key}.{name}" if key else name
        value = raw.get(name)
        if not isinstance(value, list):
            column = self.identifier(raw, key, name)
            assert column is not None
            return (column,)
        if not value:
            raise self.fail(
                path, f"'{name}' is an empty list", "name one column, or a list of columns in order"
            )
        for i, column in enumerate(value):
            if not isinstance(column, str):
                raise self.fail(f"{path}[{i}]", f"expected a column name, found {describe(column)}")
            self.check_identifier(column, f"{path}[{i}]")
            if column in value[:i]:
                raise self.fail(
                    f"{path}[{i}]", f"column '{column}' is listed twice in '{name}'", "list it once"
                )
        return tuple(value)

    def check_identifier(self, value: str, key: str) -> None:
        if not IDENTIFIER.match(value):
            raise self.fail(
                key,
                f"'{value}' is not a valid name",
                "use letters, digits and '_' only, starting with a letter or '_'",
            )


def describe(value: Any) -> str:
    return {dict: "a mapping", list: "a list", type(None): "nothing"}.get(type(value), repr(value))
