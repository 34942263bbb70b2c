"""The package's imports form no cycle, lazy, type-only or not (issues 25 and 53). Read with
`ast`, nothing imported.

Every import of a lakejoin module counts wherever it sits: at module level, inside a function or
a method, or under `if TYPE_CHECKING:`, absolute or relative, `import lakejoin.a.b` and `from
lakejoin import a` (`a` a module, or a name of the package). An import moved into a function
hides a cycle from Python's import machinery, and one under `if TYPE_CHECKING:` never runs, but
neither hides it from the design: the two modules still need each other, if only for their
types. A type that two layers share lives below both. An import names one module: the parent
packages Python runs first are not edges.

The layers, lowest first, are the package's folders (`LAYERS`). A module imports from its own
folder and from folders of lower layers; two folders of one layer do not import each other.
`test_no_layer_imports_a_higher_one` checks it, `test_the_package_has_no_import_cycle` checks
that no modules need each other, within a folder too.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = "lakejoin"
ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "spark_jobs" / PACKAGE


@dataclass(frozen=True)
class Import:
    """One import statement's edge: `importer` imports `imported` at `line`, inside a function
    or not, under `if TYPE_CHECKING:` (`type_only`) or not."""

    importer: str
    imported: str
    line: int
    in_function: bool
    type_only: bool = False

    def __str__(self) -> str:
        where = "in a function" if self.in_function else "at module level"
        if self.type_only:
            where += ", under TYPE_CHECKING"
        return f"{self.importer} -> {self.imported}, {where}"


def package_modules(package_dir: Path = PACKAGE_DIR) -> dict[str, Path]:
    """Every module of the package by dotted name; a package's name is its __init__.py's."""
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    """Collects a module's imports of package modules, marking those in `if TYPE_CHECKING:`
    bodies as type-only."""

    def __init__(self, module: str, is_package: bool, modules: Collection[str]) -> None:
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.modules = modules
        self.found: list[Import] = []
        self._functions = 0
        self._type_checking = 0

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        self._type_checking += 1
        for statement in node.body:
            self.visit(statement)
        self._type_checking -= 1
        for statement in node.orelse:
            self.visit(statement)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._functions += 1
        self.generic_visit(node)
        self._functions -= 1

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self.visit_FunctionDef(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = self._absolute(node.module, node.level)
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            self._add(submodule if submodule in self.modules else base, node)

    def _absolute(self, name: str | None, level: int) -> str:
        if level == 0:
            return name or ""
        parts = self.package.split(".")
        base = ".".join(parts[: len(parts) - level + 1])
        return f"{base}.{name}" if name else base

    def _add(self, name: str, node: ast.stmt) -> None:
        # `import lakejoin.a.b` names lakejoin.a.b; a name that is no module is its package's.
        while name and name not in self.modules:
            name = name.rpartition(".")[0]
        if name and name != self.module:
            self.found.append(
                Import(self.module, name, node.lineno, self._functions > 0, self._type_checking > 0)
            )


def imports_in(module: str, source: str, modules: Collection[str], is_package: bool = False) -> list[Import]:
    collector = _Imports(module, is_package, modules)
    collector.visit(ast.parse(source))
    return collector.found


def package_imports(modules: Mapping[str, Path]) -> list[Import]:
    return [
        found
        for module, path in modules.items()
        for found in imports_in(module, path.read_text(), modules, path.name == "__init__.py")
    ]


def strongly_connected(graph: Mapping[str, Collection[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the graph's strongly connected components, each sorted."""
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = lowlink[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                lowlink[node] = min(lowlink[node], lowlink[successor])
            elif successor in on_stack:
                lowlink[node] = min(lowlink[node], index[successor])
        if lowlink[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def shortest_cycle(start: str, graph: Mapping[str, Collection[str]], within: Collection[str]) -> list[str]:
    """The shortest chain start -> ... -> start inside one component (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for successor in sorted(graph.get(node, ())):
                if successor == start:
                    chain = [node]
                    while chain[-1] != start:
                        chain.append(came_from[chain[-1]])
                    return [*reversed(chain), start]
                if successor in within and successor not in came_from:
                    came_from[successor] = node
                    following.append(successor)
        frontier = following
    raise AssertionError(f"{start} is on no cycle")


def import_cycles(imports: Iterable[Import]) -> list[tuple[list[str], list[Import]]]:
    """Each cyclic component, with one concrete cycle through it as its import statements."""
    graph: dict[str, set[str]] = {}
    statements: dict[tuple[str, str], Import] = {}
    for found in imports:
        graph.setdefault(found.importer, set()).add(found.imported)
        statements.setdefault((found.importer, found.imported), found)
    cycles = []
    for component in strongly_connected(graph):
        if len(component) > 1:
            chain = shortest_cycle(component[0], graph, component)
            cycles.append((component, [statements[edge] for edge in pairwise(chain)]))
    return cycles


def check_no_import_cycle(imports: Iterable[Import], files: Mapping[str, str]) -> None:
    """Fail on an import cycle, naming each and the statements of one chain through it, each at
    its module's file (`files`)."""
    cycles = import_cycles(imports)
    report = "\n\n".join(
        f"{len(component)} modules import each other: {', '.join(component)}\n  e.g. "
        + " -> ".join([chain[0].importer, *(step.imported for step in chain)])
        + "".join(f"\n    {files[step.importer]}:{step.line}: {step}" for step in chain)
        for component, chain in cycles
    )
    assert not cycles, (
        f"import cycles in {PACKAGE} (imports inside functions and under TYPE_CHECKING count):\n\n"
        f"{report}\n\nBreak each cycle where a lower layer (see this test's docstring) imports a "
        "higher one: move the shared piece down, into the lower module or a small new one, or pass "
        "the value in as an argument. Moving the import into a function or under TYPE_CHECKING "
        "hides a cycle, it does not break it."
    )


def test_the_package_has_no_import_cycle():
    modules = package_modules()
    assert f"{PACKAGE}.spec" in modules and f"{PACKAGE}.views" in modules

    check_no_import_cycle(
        package_imports(modules), {module: str(path.relative_to(ROOT)) for module, path in modules.items()}
    )


# Small packages whose modules need each other, each source a module's whole text, after two
# cycles the package had (issue 53, item 4).
TYPE_ONLY_CYCLE = {  # the plan and the view kinds, naming each other's types
    "lakejoin.engine.plan": "if TYPE_CHECKING:\n    from lakejoin.views.base import ViewKindLogic\n",
    "lakejoin.views.base": "if TYPE_CHECKING:\n    from lakejoin.engine.plan import BatchPlan\n",
}
FUNCTION_LEVEL_CYCLE = {  # the audit, join health and the write, importing each other in functions
    "lakejoin.engine.audit": "def last_batch():\n    from lakejoin.engine.write import state_path\n",
    "lakejoin.engine.write": "if TYPE_CHECKING:\n    from lakejoin.engine.health import FlaggedUpdate\n",
    "lakejoin.engine.health": "def count_batch():\n    from lakejoin.engine.audit import derived\n",
}
TYPE_ONLY = "at module level, under TYPE_CHECKING"


@pytest.mark.parametrize(
    ("sources", "said"),
    [
        (
            TYPE_ONLY_CYCLE,
            [
                "2 modules import each other: lakejoin.engine.plan, lakejoin.views.base",
                f"plan.py:2: lakejoin.engine.plan -> lakejoin.views.base, {TYPE_ONLY}",
                f"base.py:2: lakejoin.views.base -> lakejoin.engine.plan, {TYPE_ONLY}",
            ],
        ),
        (
            FUNCTION_LEVEL_CYCLE,
            [
                "3 modules import each other: lakejoin.engine.audit, lakejoin.engine.health, "
                "lakejoin.engine.write",
                "audit.py:2: lakejoin.engine.audit -> lakejoin.engine.write, in a function",
                f"write.py:2: lakejoin.engine.write -> lakejoin.engine.health, {TYPE_ONLY}",
                "health.py:2: lakejoin.engine.health -> lakejoin.engine.audit, in a function",
            ],
        ),
    ],
    ids=["type_only", "in_functions"],
)
def test_the_cycle_check_fails_on_imports_under_type_checking_or_in_functions(sources, said):
    imports = [found for module, source in sources.items() for found in imports_in(module, source, sources)]
    files = {module: module.rpartition(".")[2] + ".py" for module in sources}

    with pytest.raises(AssertionError) as failed:
        check_no_import_cycle(imports, files)

    assert all(line in str(failed.value) for line in said), str(failed.value)
    # Without the imports of the last module, the others need each other no more.
    check_no_import_cycle([found for found in imports if found.importer != list(sources)[-1]], files)


# Each folder of the package and its layer: a module may import its own folder and lower layers.
LAYERS = {
    "errors": 0,  # the error types every layer raises
    "spec": 1,  # the model, YAML with line numbers, parsing, each kind's registry entry: no Spark
    "delta": 2,  # the I/O edge: session, sources, change feeds, delta-rs lookups, log and markers
    "sink": 3,  # the output write and its counts
    "quality": 3,  # Great Expectations checks, Data Docs, reports
    "views": 4,  # the view kinds
    "engine": 5,  # the batch protocol, one module per step; repair ranges, pending work
    "cli": 6,  # the command line
    "demo": 6,  # the demo's marketplace
    "airflow": 7,  # the DAG's task logic and the spark-submit path (it prints the CLI's summary)
    "": 8,  # the package itself: its public names
}


def folder_of(module: str) -> str:
    """The folder (or top-level module) a module sits in, `LAYERS`' key: `lakejoin.views.rekey`
    -> `views`, `lakejoin.errors` -> `errors`, the package itself -> ``."""
    parts = module.split(".")[1:]
    return parts[0] if parts else ""


def layer_violations(imports: Iterable[Import]) -> list[Import]:
    return [
        found
        for found in imports
        if (importer := folder_of(found.importer)) != (imported := folder_of(found.imported))
        and importer in LAYERS
        and imported in LAYERS
        and LAYERS[importer] <= LAYERS[imported]
    ]


def test_every_folder_has_a_layer():
    unplaced = sorted({folder_of(module) for module in package_modules()} - set(LAYERS))
    assert not unplaced, (
        f"folders or top-level modules of {PACKAGE} without a layer: {unplaced}; add each to "
        f"LAYERS in {Path(__file__).name} at the layer of what it imports"
    )


def test_no_layer_imports_a_higher_one():
    modules = package_modules()
    wrong = layer_violations(package_imports(modules))
    report = "\n".join(
        f"  {modules[w.importer].relative_to(ROOT)}:{w.line}: {w} "
        f"({folder_of(w.importer) or PACKAGE} is layer {LAYERS[folder_of(w.importer)]}, "
        f"{folder_of(w.imported) or PACKAGE} is layer {LAYERS[folder_of(w.imported)]})"
        for w in wrong
    )
    assert not wrong, (
        f"imports against the layers (see LAYERS in {Path(__file__).name}):\n{report}\n"
        "Move the shared piece down to the lower layer, or pass the value in from above."
    )


@pytest.mark.parametrize(
    ("importer", "imported", "wrong"),
    [
        ("lakejoin.views.rekey", "lakejoin.spec.model", False),
        ("lakejoin.views.rekey", "lakejoin.views.base", False),
        ("lakejoin.spec.parse", "lakejoin.views.registry", True),
        ("lakejoin.sink.writers", "lakejoin.quality.checks", True),
        ("lakejoin.errors", "lakejoin", True),
        ("lakejoin", "lakejoin.engine.batch", False),
    ],
)
def test_a_layer_violation_is_an_import_upwards_or_sideways(importer, imported, wrong):
    assert layer_violations([Import(importer, imported, 1, False)]) == (
        [Import(importer, imported, 1, False)] if wrong else []
    )


MODULES = ("lakejoin", "lakejoin.spec", "lakejoin.views", "lakejoin.views.base", "lakejoin.views.rekey")


@pytest.mark.parametrize(
    ("module", "source", "imported"),
    [
        ("lakejoin.spec", "import lakejoin.views.base", ["lakejoin.views.base"]),
        ("lakejoin.spec", "import lakejoin.views.base.thing", ["lakejoin.views.base"]),
        ("lakejoin.spec", "from lakejoin import views", ["lakejoin.views"]),
        ("lakejoin.spec", "from lakejoin import load_spec", ["lakejoin"]),
        ("lakejoin.spec", "from lakejoin.views.base import STATE", ["lakejoin.views.base"]),
        ("lakejoin.views.rekey", "from . import base", ["lakejoin.views.base"]),
        ("lakejoin.views.rekey", "from .base import STATE", ["lakejoin.views.base"]),
        ("lakejoin.views.rekey", "from ..spec import View", ["lakejoin.spec"]),
        ("lakejoin.views", "from .rekey import RekeyView", ["lakejoin.views.rekey"]),
        ("lakejoin.spec", "def parse():\n    from lakejoin.views import rekey", ["lakejoin.views.rekey"]),
        ("lakejoin.spec", "class A:\n    def f(self):\n        import lakejoin.views", ["lakejoin.views"]),
        ("lakejoin.spec", "if TYPE_CHECKING:\n    from lakejoin.views import base", ["lakejoin.views.base"]),
        (
            "lakejoin.spec",
            "if typing.TYPE_CHECKING:\n    import lakejoin.views\nelse:\n    import lakejoin",
            ["lakejoin.views", "lakejoin"],
        ),
        ("lakejoin.spec", "import pyspark\nfrom lakejoin.spec import View", []),
    ],
)
def test_every_form_of_import_names_the_module_it_runs(module, source, imported):
    found = imports_in(module, source, MODULES, is_package=module == "lakejoin.views")
    assert [edge.imported for edge in found] == imported


def test_a_function_level_import_is_reported_as_one():
    (found,) = imports_in("lakejoin.spec", "\n\ndef load():\n    from lakejoin import views\n", MODULES)
    assert (found.line, found.in_function, found.type_only) == (4, True, False)


def test_a_type_checking_import_is_reported_as_type_only():
    source = "if TYPE_CHECKING:\n    from lakejoin.views import base\nelse:\n    import lakejoin\n"
    found = imports_in("lakejoin.spec", source, MODULES)
    assert [(edge.imported, edge.type_only) for edge in found] == [
        ("lakejoin.views.base", True),
        ("lakejoin", False),
    ]


def test_a_cycle_is_reported_as_its_component_and_one_chain_through_it():
    edges = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e"), ("e", "d"), ("f", "a")]
    imports = [Import(importer, imported, 1, False) for importer, imported in edges]

    cycles = import_cycles(imports)

    assert [(component, [step.imported for step in chain]) for component, chain in cycles] == [
        (["d", "e"], ["e", "d"]),
        (["a", "b", "c"], ["b", "c", "a"]),
    ]
