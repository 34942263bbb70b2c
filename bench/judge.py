"""`python -m bench judge`: re-derive the targets and pages from the records on file; no Spark.

    python -m bench judge             # re-write docs/bench/targets.json and the pages below
    python -m bench judge --check     # compare instead: exit 1 when a page or an entry differs

Every benchmark with a pure targets hook is judged again from its records in `<docs>/bench`:
fixed_cost, composite_key, tiny_views, lineage_cost, explain_cost, plan_cost, run_path and the matrix
(results.jsonl). The pages fixed_cost.md, composite_key.md, run_path.md and benchmarks.md are
rendered again. The matrix's page keeps its machine lines, its command line and the plot it names
as they are on file: `report.machine()` runs `java -version`, and the plot is an image. The
entries of audit_cost* are kept as they are (their targets are judged inside their runs: they
follow options a record does not hold).
Use it after a limit changes, and as the proof that a change to bench/ left the published figures
alone. Nothing here imports pyspark (tests/unit/test_bench_judge.py checks).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

Entries = list[dict[str, Any]]
# The lines of benchmarks.md that `report.machine()` wrote (it runs `java -version`): kept as on file.
MACHINE_LINES = ("- Machine:", "- Python ", "- Spark local")


def _fixed_cost(folder: Path) -> tuple[Entries, dict[str, str]]:
    from bench.fixed_cost import OWNER, load_runs, report, targets

    runs = load_runs(folder / "fixed_cost.json")
    return _owned(OWNER, targets(runs)), {"fixed_cost.md": report(runs)}


def _composite_key(folder: Path) -> tuple[Entries, dict[str, str]]:
    from bench.composite_key import page, targets

    record = json.loads((folder / "composite_key.json").read_text())
    return targets(record), {"composite_key.md": page(record)}


def _tiny_views(folder: Path) -> tuple[Entries, dict[str, str]]:
    from bench.tiny_views import targets

    return targets(json.loads((folder / "tiny_views.json").read_text())), {}


def _lineage_cost(folder: Path) -> tuple[Entries, dict[str, str]]:
    from bench.lineage_cost import targets

    return targets(json.loads((folder / "lineage_cost.json").read_text())), {}


def _explain_cost(folder: Path) -> tuple[Entries, dict[str, str]]:
    from bench.explain_cost import targets

    return targets(json.loads((folder / "explain_cost.json").read_text())), {}


def _plan_cost(folder: Path) -> tuple[Entries, dict[str, str]]:
    from bench.plan_cost import targets

    return targets(json.loads((folder / "plan_cost.json").read_text())), {}


def _run_path(folder: Path) -> tuple[Entries, dict[str, str]]:
    from bench.run_path import entries, markdown

    figures = json.loads((folder / "run_path.json").read_text())
    found = entries(figures)
    return found, {"run_path.md": markdown(figures, found)}


def _matrix(folder: Path) -> tuple[Entries, dict[str, str]]:
    from bench.report import analysis_text, load, render

    published = (folder.parent / "benchmarks.md").read_text(encoding="utf-8")
    machine = [
        line
        for line in published.splitlines()
        if line.startswith(("- Machine:", "- Python ", "- Spark local"))
    ]
    command = re.search(r"- Command: `(.*)` \((\d+) min in all\)", published)
    image = re.search(r"!\[INC, FULL and FLOOR against change rate; INC against size\]\((.*)\)", published)
    if command is None or image is None:
        raise SystemExit(f"{folder.parent / 'benchmarks.md'}: no command line or plot to keep")
    text, found = render(
        load(folder / "results.jsonl"),
        shown=f"{folder.name}/results.jsonl",
        image=image.group(1),
        machine_lines=machine,
        command=command.group(1),
        total_seconds=int(command.group(2)) * 60,
        analysis=analysis_text(folder),
    )
    return found, {"../benchmarks.md": text}


def _owned(owner: str, found: Entries) -> Entries:
    from bench.targets import owns

    stray = [e["batch"] for e in found if not owns(owner, e)]
    if stray:
        raise ValueError(f"{owner}'s entries name other owners: {stray}")
    return found


# Owner (the `batch` its entries start with) -> the hook that re-derives them from the records.
JUDGES: dict[str, Callable[[Path], tuple[Entries, dict[str, str]]]] = {
    "fixed_cost": _fixed_cost,
    "composite_key": _composite_key,
    "tiny_views": _tiny_views,
    "lineage_cost": _lineage_cost,
    "explain_cost": _explain_cost,
    "plan_cost": _plan_cost,
    "run_path": _run_path,
    "matrix": _matrix,
}


def judged(folder: Path, on_file: Entries) -> tuple[Entries, dict[str, str]]:
    """targets.json as the records judge it, and every page by its path under `folder`.

    The file keeps its order: each judged owner's entries take the place of its first entry on
    file (or go last, when it has none there); the entries of owners not judged here stay."""
    from bench.targets import owns

    derived: dict[str, Entries] = {}
    pages: dict[str, str] = {}
    for name, judge in JUDGES.items():
        derived[name], more = judge(folder)
        pages |= more
    entries: Entries = []
    placed: set[str] = set()
    for entry in on_file:
        owner = next((o for o in derived if owns(o, entry)), None)
        if owner is None:
            entries.append(entry)
        elif owner not in placed:
            entries += derived[owner]
            placed.add(owner)
    entries += [e for name, found in derived.items() if name not in placed for e in found]
    return entries, pages


def _key(entry: dict[str, Any]) -> str:
    return json.dumps(entry, sort_keys=True)


def main(argv: list[str] | None = None) -> int:
    """Re-judge, or with --check compare; the exit status is 1 when --check found a difference."""
    parser = argparse.ArgumentParser(prog="python -m bench judge", description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=Path, default=Path("docs"), help="the folder that holds bench/")
    parser.add_argument("--check", action="store_true", help="compare with the files, write nothing")
    args = parser.parse_args(argv)
    folder = args.docs / "bench"
    targets = folder / "targets.json"
    on_file: Entries = json.loads(targets.read_text())
    entries, pages = judged(folder, on_file)
    text = json.dumps(entries, indent=2) + "\n"
    if not args.check:
        targets.write_text(text)
        for name, page in pages.items():
            (folder / name).write_text(page, encoding="utf-8")
        print(f"judged: {targets} ({len(entries)} entries) and {len(pages)} pages")
        return 0
    differ = []
    if sorted(map(_key, entries)) != sorted(map(_key, on_file)):
        differ.append(str(targets))
    differ += [
        str(folder / n) for n, page in pages.items() if (folder / n).read_text(encoding="utf-8") != page
    ]
    for path in differ:
        print(f"differs from the records' judgement: {path}")
    if not differ:
        print(f"as judged: {targets} ({len(entries)} entries) and {len(pages)} pages")
    return 1 if differ else 0
