"""The JSON Schema of a pipeline spec, written from the settings the parser reads (spec/settings.py:
the sections of spec/parse.py and spec/trust.py, each kind's `settings` in spec/registry.py), so
an editor's YAML support refuses what `lakejoin run` refuses while the spec is typed.

It is shipped as `lakejoin/spec/pipeline.schema.json`; `lakejoin schema` prints it, and
`python -m lakejoin.spec.json_schema` writes it again after a setting changes (a unit test
checks the file is current). A spec names it on its first line:

    # yaml-language-server: $schema=../spark_jobs/lakejoin/spec/pipeline.schema.json

It says it is draft 2020-12, and uses only keywords that mean the same in draft 7 (editors'
YAML support validates with draft 7): no `$ref`, so no keyword beside one is ignored. What it
cannot say is left to the parser: the names a view reads, a cycle between views, a view named as a
source.

>>> schema = pipeline_schema()
>>> schema["required"]
['pipeline', 'storage', 'sources', 'views']
>>> schema["properties"]["spark"]["properties"]["run"]["enum"]
['local', 'submit', None]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lakejoin.spec.model import ViewKind
from lakejoin.spec.registry import KINDS
from lakejoin.spec.sections import PIPELINE
from lakejoin.spec.settings import EMPTY_IS_UNSET, Setting, Settings, Shape
from lakejoin.spec.trust import limit_settings
from lakejoin.spec.yaml_lines import IDENTIFIER

FILE = Path(__file__).with_name("pipeline.schema.json")
DRAFT = "https://json-schema.org/draft/2020-12/schema"

Schema = dict[str, Any]

NAME: Schema = {"type": "string", "pattern": IDENTIFIER.pattern}


def pipeline_schema() -> Schema:
    """The JSON Schema of a pipeline spec (a JSON document)."""
    return {
        "$schema": DRAFT,
        "title": "lakejoin pipeline spec",
        **_section(PIPELINE),
    }


def schema_text() -> str:
    """The schema as its file holds it."""
    return json.dumps(pipeline_schema(), indent=2, ensure_ascii=False) + "\n"


def _section(settings: Settings) -> Schema:
    """A mapping of `settings`: no other key, the required ones, and the rules between them."""
    schema: Schema = {
        "description": settings.about,
        "type": "object",
        "properties": {s.name: _setting(s) for s in settings},
        "additionalProperties": False,
    }
    required = [s.name for s in settings if s.required]
    if required:
        schema["required"] = required
    rules = [_applies(settings, s) for s in settings if s.only_with]
    rules += [{"not": {"required": [s.name, s.excludes]}} for s in settings if s.excludes]
    if settings.one_of:
        rules.append({"anyOf": [{"required": [name]} for name in settings.one_of]})
    if rules:
        schema["allOf"] = rules
    return schema


def _applies(settings: Settings, setting: Setting) -> Schema:
    """`setting` is set only while the setting it depends on has the value it needs (when that
    is its default, leaving it out or empty is that value too)."""
    assert setting.only_with is not None
    name, value = setting.only_with
    if _json(settings[name].default) == value:
        return {"if": {"required": [setting.name]}, "then": {"properties": {name: {"enum": [value, None]}}}}
    condition = {"properties": {name: {"const": value}}, "required": [name]}
    return {"if": {"required": [setting.name]}, "then": condition}


def _setting(setting: Setting) -> Schema:
    schema: Schema = {"description": setting.about, **_shape(setting)}
    unset = not setting.required and setting.shape in EMPTY_IS_UNSET
    if unset and "enum" in schema:
        schema["enum"] = [*schema["enum"], None]
    elif unset:
        kinds = schema["type"]
        schema["type"] = [*(kinds if isinstance(kinds, list) else [kinds]), "null"]
    if setting.also:
        schema = {"description": setting.about, "anyOf": [{"enum": [*setting.also]}, _inner(schema)]}
    if setting.default is not None:
        schema["default"] = _json(setting.default)
    return schema


def _inner(schema: Schema) -> Schema:
    return {k: v for k, v in schema.items() if k != "description"}


def _shape(setting: Setting) -> Schema:
    shape = setting.shape
    if shape is Shape.TEXT:
        return {"type": ["string", "integer"]}  # the parser reads a number as its digits
    if shape is Shape.NAME:
        return dict(NAME)
    if shape is Shape.PREFIX:
        return {"type": "string", "pattern": f"^({IDENTIFIER.pattern[1:-1]})?$"}
    if shape is Shape.KEY:
        columns = {"type": "array", "items": NAME, "minItems": 1, "uniqueItems": True}
        return {"anyOf": [NAME, columns]}
    if shape is Shape.COLUMNS:
        return {"type": "array", "items": NAME, "minItems": 1}
    if shape is Shape.CHOICE:
        assert setting.choices is not None
        return {"enum": [c.value for c in setting.choices]}
    if shape in (Shape.NUMBER, Shape.WHOLE):
        bounds = {"minimum": setting.least, "exclusiveMinimum": setting.above, "maximum": setting.most}
        kind = "number" if shape is Shape.NUMBER else "integer"
        return {"type": kind, **{k: v for k, v in bounds.items() if v is not None}}
    if shape is Shape.FLAG:
        return {"type": "boolean"}
    assert setting.of is not None, setting.name
    if shape is Shape.SECTION:
        return _inner(_section(setting.of))
    if shape is Shape.LIST:
        return {"type": "array", "minItems": 1, "items": _section(setting.of)}
    if shape is Shape.NAMED:
        return _named(_section(setting.of))
    if shape is Shape.VIEWS:
        return _named(_view(setting.of))
    raise AssertionError(f"no schema for {shape}")  # HEALTH: per kind, in _view


def _named(entry: Schema) -> Schema:
    """Entries by name, at least one."""
    return {"type": "object", "minProperties": 1, "propertyNames": NAME, "additionalProperties": entry}


def _view(settings: Settings) -> Schema:
    """A view: exactly one kind's block beside `settings`; its `health:` names its kind's measures."""
    blocks = {kind.value: _section(declared.settings) for kind, declared in KINDS.items()}
    beside = {s.name: _health_of_any(s) if s.shape is Shape.HEALTH else _setting(s) for s in settings}
    return {
        "description": settings.about,
        "type": "object",
        "properties": {**blocks, **beside},
        "additionalProperties": False,
        "oneOf": [{"required": [kind]} for kind in blocks],
        "allOf": [
            {"if": {"required": [kind.value]}, "then": {"properties": {"health": _health(kind)}}}
            for kind in KINDS
        ],
    }


def _health_of_any(setting: Setting) -> Schema:
    """`health:` before its kind is known: a mapping (the kind's rule says of what)."""
    return {"description": setting.about, "type": ["object", "null"]}


def _health(kind: ViewKind) -> Schema:
    """A view's `health:` of this kind: a limit per measure it names."""
    limits = KINDS[kind].limits()
    return {
        "type": ["object", "null"],
        "properties": {
            measure: {**_section(limit_settings(measure)), "description": f"{measure}: {counts}"}
            for measure, counts in limits.items()
        },
        "additionalProperties": False,
    }


def _json(value: Any) -> Any:
    """A default as the YAML writes it."""
    return getattr(value, "value", value)


def main() -> None:
    FILE.write_text(schema_text(), encoding="utf-8")
    print(f"wrote {FILE}")


if __name__ == "__main__":
    main()
