"""View logic is functions of its inputs (issue 25). Read with `ast`, nothing imported.

A view kind object keeps only what its constructor derives from the spec and the view. What one
step of a batch hands to the next is returned and passed on: `rebuild` returns `Rebuilt` (rows,
affected keys, metrics, the state to write), `write_state` takes it; the inputs' columns come in
`ctx.schemas`. So no method of a class in views/ but `__init__` assigns an attribute of `self`,
nor changes what one holds (`self.x[k] = ...`, `self.x += ...`, `self.x.update(...)`).

The one exception is `BatchContext` (views/context.py), the engine's context of one batch: it
caches the snapshots and key values it reads for the kinds, so it may fill its own dicts. It
still may not assign an attribute outside its constructor.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
VIEWS = ROOT / "spark_jobs" / "lakejoin" / "views"
# Classes that may change what their attributes hold (never rebind them), and why.
CACHES = {"BatchContext": "the engine's context of one batch caches what it reads"}
MUTATORS = {"update", "append", "extend", "add", "insert", "pop", "popitem", "clear", "setdefault", "remove"}
FIX = (
    "a view kind keeps only what __init__ derives from the spec and the view: return the value "
    "(in Rebuilt: metrics, state) or derive it from ctx.schemas, and pass it as an argument to the "
    "step or helper that needs it (views/base.py)"
)


def _self_attribute(node: ast.AST) -> str | None:
    """`self.x` for `self.x`, `self.x.y`, `self.x[k]`...; None when the expression is not rooted
    in an attribute of `self`."""
    chain = []
    while isinstance(node, ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Attribute):
            chain.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id == "self" and chain:
        return f"self.{chain[-1]}"
    return None


def _targets(node: ast.AST) -> Iterator[ast.AST]:
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield from _unpacked(target)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        yield node.target
    elif isinstance(node, ast.Delete):
        yield from node.targets
    elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
        yield from _unpacked(node.target)
    elif isinstance(node, ast.With | ast.AsyncWith):
        for item in node.items:
            if item.optional_vars is not None:
                yield from _unpacked(item.optional_vars)


def _unpacked(target: ast.AST) -> Iterator[ast.AST]:
    if isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _unpacked(element)
    elif isinstance(target, ast.Starred):
        yield from _unpacked(target.value)
    else:
        yield target


def changes_to_self(
    method: ast.FunctionDef | ast.AsyncFunctionDef, *, caches: bool
) -> Iterator[tuple[int, str]]:
    """(line, what) for each statement of `method` that assigns an attribute of `self` or, unless
    the class `caches`, changes what one holds."""
    for node in ast.walk(method):
        for target in _targets(node):
            attribute = _self_attribute(target)
            if attribute is None:
                continue
            rebinds = isinstance(target, ast.Attribute) and _self_attribute(target.value) is None
            if rebinds:
                yield node.lineno, f"assigns {attribute}"
            elif not caches:
                yield node.lineno, f"changes what {attribute} holds"
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Name) and function.id in {"setattr", "delattr"} and node.args:
            if isinstance(node.args[0], ast.Name) and node.args[0].id == "self":
                yield node.lineno, f"calls {function.id}(self, ...)"
        elif isinstance(function, ast.Attribute) and function.attr in MUTATORS and not caches:
            attribute = _self_attribute(function.value)
            if attribute is not None:
                yield node.lineno, f"changes what {attribute} holds ({function.attr})"


def findings(source: str, filename: str) -> list[str]:
    """Every change to `self` outside `__init__` in the classes of one module, as `file:line`,
    in line order."""
    found: list[tuple[int, str]] = []
    for cls in ast.walk(ast.parse(source, filename)):
        if not isinstance(cls, ast.ClassDef):
            continue
        for method in cls.body:
            if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) or method.name == "__init__":
                continue
            for line, what in changes_to_self(method, caches=cls.name in CACHES):
                found.append((line, f"{filename}:{line}: {cls.name}.{method.name} {what}"))
    return [text for _, text in sorted(found, key=lambda f: f[0])]


def test_no_view_method_but_init_changes_self():
    modules = sorted(VIEWS.glob("*.py"))
    assert {"fk_join.py", "list_join.py", "rekey.py", "enrich.py", "base.py"} <= {p.name for p in modules}
    found = [f for p in modules for f in findings(p.read_text(), str(p.relative_to(ROOT)))]
    assert not found, "\n".join(found) + f"\n-> {FIX}"


def test_the_check_finds_every_form_of_state():
    source = """
class Kind:
    def __init__(self, spec):
        self.spec = spec
        self._counts = {}

    def rebuild(self, ctx):
        self._columns = ctx.schemas
        self._counts["n"] = 1
        self._counts.update(m=2)
        self.total += 1
        self.a, (self.b, x) = 1, (2, 3)
        setattr(self, "c", 3)
        for self.i in range(2):
            pass
        ctx.notes["fine"] = "a change to ctx, not to self"
        counts = {}
        counts["fine"] = 1
        return self.spec

class BatchContext:
    def snapshot(self, name):
        self._snapshots[name] = name
        self._values.setdefault(name, [])
        self.last = name
"""
    assert findings(source, "kind.py") == [
        "kind.py:8: Kind.rebuild assigns self._columns",
        "kind.py:9: Kind.rebuild changes what self._counts holds",
        "kind.py:10: Kind.rebuild changes what self._counts holds (update)",
        "kind.py:11: Kind.rebuild assigns self.total",
        "kind.py:12: Kind.rebuild assigns self.a",
        "kind.py:12: Kind.rebuild assigns self.b",
        "kind.py:13: Kind.rebuild calls setattr(self, ...)",
        "kind.py:14: Kind.rebuild assigns self.i",
        "kind.py:25: BatchContext.snapshot assigns self.last",
    ]
