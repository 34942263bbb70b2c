"""A test's folder is its pytest marker (issue 53): `pytest tests/unit` and `-m unit` select the
same tests, and `make test`, which runs tests/unit alone and without a JVM first, runs every unit
test there. (The batch commit's markers are another thing: tests/unit/test_markers.py.)

The rule: each folder of tests/ has one marker (FOLDERS), which every module in it names in its
`pytestmark`; no module names another folder's marker. An extra marker (EXTRAS) says what else
a test needs, so that a run can leave it out, and sits on top of one folder's marker only.

Modules are read with `ast`, neither imported nor collected: the other folders import pyspark."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"

FOLDERS = {
    "unit": "unit",
    "steps": "steps",
    "delta": "delta",
    "scenarios": "scenario",
    "properties": "property",
    "airflow": "airflow",
    "e2e": "e2e",
}
FOLDER_OF = {marker: folder for folder, marker in FOLDERS.items()}
# extra marker -> the one folder marker it may sit on
EXTRAS = {
    "tools": "unit",  # no JVM, but docker-compose: in `make test`, not in `make test-fast`
    "cluster": "airflow",  # a Spark standalone cluster on loopback
    "browser": "airflow",  # Airflow's UI in headless Chromium
}


def declared_markers() -> set[str]:
    """The markers pyproject.toml declares (pytest runs with --strict-markers)."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        lines = tomllib.load(file)["tool"]["pytest"]["ini_options"]["markers"]
    return {line.split(":", 1)[0].strip() for line in lines}


def _module_marks(tree: ast.Module) -> set[str]:
    """The marker names in the module's own `pytestmark = ...`."""
    return {
        name
        for statement in tree.body
        if isinstance(statement, ast.Assign | ast.AnnAssign) and statement.value is not None
        for target in (statement.targets if isinstance(statement, ast.Assign) else [statement.target])
        if isinstance(target, ast.Name) and target.id == "pytestmark"
        for name, _ in _marks_in(statement.value)
    }


def _marks_in(node: ast.AST) -> list[tuple[str, int]]:
    """Every `pytest.mark.<name>` (or `mark.<name>`) below node, with its line: in `pytestmark`,
    decorators and `pytest.param(..., marks=...)` alike."""
    found = []
    for child in ast.walk(node):
        if isinstance(child, ast.Attribute):
            mark = child.value
            if (isinstance(mark, ast.Attribute) and mark.attr == "mark") or (
                isinstance(mark, ast.Name) and mark.id == "mark"
            ):
                found.append((child.attr, child.lineno))
    return sorted(found, key=lambda pair: pair[1])


def misplaced(path: str, source: str) -> list[str]:
    """What is wrong with the markers of the test module at `path` (relative to tests/), one
    sentence each; none when its markers agree with its folder."""
    folder = path.split("/")[0] if "/" in path else ""
    marker = FOLDERS.get(folder)
    if marker is None:
        return [f"tests/{path}: not in a test folder: move it to the folder of its marker ({_folders()})"]
    tree = ast.parse(source)
    problems = []
    if marker not in _module_marks(tree):
        problems.append(
            f"tests/{path}: no `pytestmark` names `{marker}`: add `pytestmark = pytest.mark.{marker}`"
        )
    for name, line in _marks_in(tree):
        if name in FOLDER_OF and name != marker:
            problems.append(
                f"tests/{path}:{line}: `{name}` is the marker of tests/{FOLDER_OF[name]}: move the test "
                f"there, or mark it `{marker}` if it needs what tests/{folder} has"
            )
        elif name in EXTRAS and EXTRAS[name] != marker:
            problems.append(
                f"tests/{path}:{line}: `{name}` sits on `{EXTRAS[name]}` only "
                f"(tests/{FOLDER_OF[EXTRAS[name]]}), not on `{marker}`"
            )
    return problems


def _folders() -> str:
    return ", ".join(f"tests/{folder}: {marker}" for folder, marker in FOLDERS.items())


def test_every_declared_marker_is_a_folder_marker_or_an_extra():
    assert set(FOLDERS.values()) | set(EXTRAS) == declared_markers()
    assert set(EXTRAS.values()) <= set(FOLDERS.values())


def test_every_folder_that_holds_tests_has_a_marker():
    holding = {path.parent.relative_to(TESTS).parts[0] for path in TESTS.glob("*/**/test_*.py")}
    assert holding == set(FOLDERS)


def test_every_test_module_names_its_folder_marker_and_no_other():
    modules = sorted({*TESTS.rglob("test_*.py"), *TESTS.rglob("*_test.py")})
    assert len(modules) > 60
    problems = [
        problem
        for module in modules
        for problem in misplaced(module.relative_to(TESTS).as_posix(), module.read_text(encoding="utf-8"))
    ]
    assert not problems, "\n".join(problems)


GOOD = {
    "unit/test_a.py": "pytestmark = pytest.mark.unit\n",
    "unit/test_compose.py": "pytestmark = [pytest.mark.unit, pytest.mark.tools]\n",
    "scenarios/test_a.py": (
        "pytestmark = pytest.mark.scenario\n\n@pytest.mark.parametrize('x', [1])\ndef test(x): ...\n"
    ),
    "airflow/test_browser.py": (
        "pytestmark = [pytest.mark.airflow, pytest.mark.browser, pytest.mark.timeout(9)]\n"
    ),
    "airflow/sub/test_a.py": "from pytest import mark\npytestmark = mark.airflow\n",
}


@pytest.mark.parametrize("path", list(GOOD))
def test_a_module_marked_as_its_folder_is_right(path):
    assert misplaced(path, GOOD[path]) == []


BAD = {
    # the shape issue 53 found: tests/delta/test_bad_input.py, unit tests among delta ones
    "delta/test_bad_input.py": (
        "import pytest\n\n@pytest.mark.unit\ndef test_parse(): ...\n\n"
        "@pytest.mark.delta\ndef test_run(): ...\n",
        [
            "tests/delta/test_bad_input.py: no `pytestmark` names `delta`",
            "tests/delta/test_bad_input.py:3: `unit` is the marker of tests/unit: move the test there",
        ],
    ),
    "e2e/test_jars.py": (
        "pytestmark = pytest.mark.scenario\n",
        [
            "no `pytestmark` names `e2e`",
            "tests/e2e/test_jars.py:1: `scenario` is the marker of tests/scenarios",
        ],
    ),
    "unit/test_compose.py": ("pytestmark = pytest.mark.tools\n", ["no `pytestmark` names `unit`"]),
    "unit/test_two.py": (
        "pytestmark = [pytest.mark.unit, pytest.mark.delta]\n",
        ["tests/unit/test_two.py:1: `delta` is the marker of tests/delta"],
    ),
    "steps/test_param.py": (
        "pytestmark = pytest.mark.steps\n\n"
        "@pytest.mark.parametrize('x', [1, pytest.param(2, marks=pytest.mark.unit)])\ndef test(x): ...\n",
        ["tests/steps/test_param.py:3: `unit` is the marker of tests/unit"],
    ),
    "steps/test_imported_mark.py": (
        "from pytest import mark\npytestmark = mark.steps\n\n@mark.property\ndef test(): ...\n",
        ["tests/steps/test_imported_mark.py:4: `property` is the marker of tests/properties"],
    ),
    "delta/test_extra.py": (
        "pytestmark = [pytest.mark.delta, pytest.mark.browser]\n",
        ["tests/delta/test_extra.py:1: `browser` sits on `airflow` only (tests/airflow), not on `delta`"],
    ),
    "cluster/test_cluster.py": (
        "pytestmark = pytest.mark.cluster\n",
        ["tests/cluster/test_cluster.py: not in a test folder: move it to the folder of its marker"],
    ),
    "test_loose.py": (
        "pytestmark = pytest.mark.unit\n",
        ["tests/test_loose.py: not in a test folder"],
    ),
}


@pytest.mark.parametrize("path", list(BAD))
def test_a_module_whose_markers_disagree_with_its_folder_is_named_with_the_fix(path):
    source, expected = BAD[path]
    problems = misplaced(path, source)
    assert len(problems) == len(expected), problems
    for problem, phrase in zip(problems, expected, strict=True):
        assert phrase in problem, problems
