"""User expectation suites: Great Expectations' own suite format, one file per view.

`expectations/<pipeline>/<view>.json` (or `.yml`/`.yaml`), next to the spec's folder or under
`$LAKEJOIN_EXPECTATIONS_DIR`, holds a suite as GE writes it:

    {"name": "display_products", "expectations": [
        {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "product_id"}}]}

Every batch of the view runs it on the rows it is about to write, before its output commit,
with the built-in checks (quality/checks.py, its `user_suite` scope).

>>> user_suite(spec, spec.views["display_products"])          # doctest: +SKIP
UserSuite(file='expectations/marketplace/display_products.json', name='display_products', ...)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lakejoin.errors import ExpectationSuiteError
from lakejoin.spec.model import PipelineSpec, View

EXPECTATIONS_DIR = "LAKEJOIN_EXPECTATIONS_DIR"
SUFFIXES = (".json", ".yml", ".yaml")
FORMAT = (
    'write the suite in Great Expectations\' format: {"name": "...", "expectations": '
    '[{"type": "expect_...", "kwargs": {...}}]}'
)


@dataclass(frozen=True)
class UserSuite:
    file: str
    name: str
    expectations: list[Any]  # great_expectations Expectation objects


def expectations_dir(spec: PipelineSpec) -> Path:
    """Where user suites live: `$LAKEJOIN_EXPECTATIONS_DIR`, else `expectations/` beside the spec's folder."""
    configured = os.environ.get(EXPECTATIONS_DIR)
    if configured:
        return Path(configured)
    return Path(spec.file).resolve().parent.parent / "expectations"


def suite_file(spec: PipelineSpec, view: View) -> Path | None:
    folder = expectations_dir(spec) / spec.name
    found = [
        folder / f"{view.name}{suffix}" for suffix in SUFFIXES if (folder / f"{view.name}{suffix}").is_file()
    ]
    if len(found) > 1:
        raise ExpectationSuiteError(
            f"view '{view.name}' has {len(found)} suites: {', '.join(f.name for f in found)}",
            where=str(folder),
            fix="keep one file per view",
        )
    return found[0] if found else None


def user_suite(spec: PipelineSpec, view: View) -> UserSuite | None:
    """The view's user suite, parsed and checked by Great Expectations; None when it has none."""
    file = suite_file(spec, view)
    return None if file is None else load_suite(file)


def load_suite(file: Path) -> UserSuite:
    """Read a suite file; any mistake is an ExpectationSuiteError naming the file and expectation."""
    document = _read(file)
    if not isinstance(document, dict) or not isinstance(document.get("expectations"), list):
        raise _error(file, "it is not a suite: no list of 'expectations' at its top level")
    unknown = sorted(set(document) - {"name", "expectations", "suite_parameters", "meta", "notes", "id"})
    if unknown:
        raise _error(file, f"unknown top-level key(s) {unknown}")
    expectations = [_expectation(file, i, e) for i, e in enumerate(document["expectations"])]
    return UserSuite(str(file), str(document.get("name") or file.stem), expectations)


def _read(file: Path) -> Any:
    text = file.read_text(encoding="utf-8")
    try:
        if file.suffix == ".json":
            return json.loads(text)
        import yaml

        return yaml.safe_load(text)
    except (json.JSONDecodeError, ValueError) as exc:
        raise _error(file, f"it is not valid JSON: {exc}") from None
    except Exception as exc:  # yaml.YAMLError and its subclasses
        raise _error(file, f"it is not valid YAML: {exc}") from None


def _expectation(file: Path, index: int, entry: Any) -> Any:
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    at = f"expectations[{index}]"
    if not isinstance(entry, dict) or "type" not in entry:
        raise _error(file, f"{at} has no 'type' (e.g. \"expect_column_values_to_not_be_null\")")
    kind = entry["type"]
    # The id GE wrote names this file's copy; the suite lakejoin runs is a suite of its own.
    fields = {k: v for k, v in entry.items() if k not in ("id", "rendered_content")}
    fields.setdefault("kwargs", {})
    try:
        return ExpectationConfiguration(**fields).to_domain_obj()
    except Exception as exc:  # GE raises several types: unknown expectation, pydantic, TypeError
        reason = " ".join(str(exc).split())[:400]
        raise _error(file, f"{at} ({kind}) is not a valid expectation: {reason}") from None


def _error(file: Path, what: str) -> ExpectationSuiteError:
    return ExpectationSuiteError(what, where=str(file), fix=FORMAT)
