"""`python -m bench.run_path`: what getting to a batch costs (issue 24), measured, never asserted.

    python -m bench.run_path dag  [--dags FOLDER] [--label NAME]   # a DAG run after a small change
    python -m bench.run_path demo                                  # `make demo` after install
    python -m bench.run_path ci                                    # `.ci/run` on a fresh clone
    python -m bench.run_path views [--source TREE] [--label NAME]  # each view's small batches

- `dag`: a real Airflow (api-server, scheduler with LocalExecutor, dag-processor, as
  tests/airflow_server.py starts them) on the demo's marketplace. A first run loads every key;
  then the demo's first change batch (three price updates) is committed and a second run is
  triggered: its time, from the trigger to the run's end, as Airflow records it and as the
  caller waits for it, is the figure. A third run with nothing new follows. After each run,
  every view is compared with a from-scratch recompute at its pinned versions. `--dags` measures
  another DAG file (e.g. an older commit's, for the figure before a change) with this lakejoin.
- `demo`: `make demo` in this work tree, the install already done.
- `ci`: `bash .ci/run` in a fresh clone of HEAD, with the seconds of `make test` and of the
  benchmark smoke run that `.ci/run` prints.
- `views`: the demo's marketplace in one process, `run_pipeline` of every view (`parallel=1`,
  as `lakejoin run --parallel 1`) for the first run and after each of the demo's change
  batches: each view's seconds, Spark jobs and phases (`BatchSummary.phase_seconds`), gated on
  every view equal to its recompute after each run. `--source` runs another work tree's
  `spark_jobs` (an older commit's, for the figure before a change) with the same script.

Each writes `<out>/bench/run_path.json` (the latest figures of each, by label) and
`<out>/bench/run_path.md`, and replaces its own entries of `<out>/bench/targets.json`.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
# issue 52: a DAG run after a small change in 25 s, `make demo` after install in 150 s.
LIMITS = {"dag": 25.0, "demo": 150.0, "ci": 40 * 60.0, "test": 25 * 60.0}
TARGETS = {
    "dag": "a DAG run of the demo pipeline after a small change, idle machine, end to end, s",
    "demo": "make demo after install, s",
    "ci": ".ci/run on a fresh clone, s",
    "test": "make test (within .ci/run on a fresh clone), s",
}
LAKE_SCRIPT = """
import sys
from lakejoin.demo.marketplace import CHANGE_BATCHES, create_marketplace
from lakejoin.delta.session import spark_session
spark = spark_session()
if sys.argv[1] == "create":
    create_marketplace(spark, sys.argv[2])
else:
    CHANGE_BATCHES[int(sys.argv[1])].apply(spark, sys.argv[2])
"""
# The views of `spec` that differ from their recompute, into `wrong` (both scripts' gate).
GATE = """
def differing(spark, spec):
    from lakejoin.engine.batch import recompute_view
    wrong = []
    for view in spec.view_order():
        out = spark.read.format("delta").load(spec.views[view].path)
        want = recompute_view(spark, spec, view).select(*out.columns)
        if out.exceptAll(want).count() or want.exceptAll(out).count():
            wrong.append(view)
    return wrong
"""
GATE_SCRIPT = (
    """
import json, sys
from lakejoin.delta.session import spark_session
from lakejoin.spec.parse import load_spec
"""
    + GATE
    + """
spark = spark_session()
print(json.dumps(differing(spark, load_spec(sys.argv[1]))))
"""
)


VIEWS_SCRIPT = (
    """
import json, shutil, sys, time
from pathlib import Path
from lakejoin.delta.session import spark_session
from lakejoin.demo.marketplace import CHANGE_BATCHES, create_marketplace
from lakejoin.engine.pipeline import run_pipeline
from lakejoin.spec.parse import load_spec
"""
    + GATE
    + """
root = Path(sys.argv[2])
text = Path(sys.argv[1]).read_text().replace("../lakehouse", str(root / "lakehouse"))
(root / "marketplace.yaml").write_text(text)
spec = load_spec(str(root / "marketplace.yaml"))
spark = spark_session(spec.spark)
create_marketplace(spark, str(root / "lakehouse"))
jobs = spark.sparkContext._jsc.sc().dagScheduler().nextJobId  # the next job's id: jobs started
rounds = []
for name, batch in [("first", None), *((f"change {i}", b) for i, b in enumerate(CHANGE_BATCHES))]:
    if batch is not None:
        batch.apply(spark, str(root / "lakehouse"))
    marks = {}
    def started(view):
        marks[view] = [jobs(), time.monotonic()]
    def ended(result):
        marks[result.view] += [jobs(), time.monotonic()]
    began = time.monotonic()
    results = run_pipeline(spark, spec, spec.view_order(), parallel=1, on_view=started, on_result=ended)
    seconds = time.monotonic() - began
    views = []
    for r in results:
        s, m = r.summary, marks[r.view]
        views.append({
            "view": r.view, "state": r.state.value, "keys": s.affected_keys if s else 0,
            "jobs": m[2] - m[0], "seconds": round(m[3] - m[1], 2),
            "phases": {k: round(v, 2) for k, v in (s.phase_seconds if s else {}).items()},
            "strategy": (s.notes.get("strategy", "") if s else "").split(":")[0],
        })
    gate = differing(spark, spec)
    rounds.append({"name": name, "seconds": round(seconds, 1), "views": views, "gate": gate})
print("VIEWS " + json.dumps(rounds))
"""
)


def measure_views(source: Path, label: str) -> dict[str, Any]:
    import os

    root = Path(tempfile.mkdtemp(prefix="lakejoin-views-"))
    env = {**os.environ, "PYTHONPATH": str(source / "spark_jobs"), "GX_ANALYTICS_ENABLED": "False"}
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=source, capture_output=True, text=True
    )
    done = subprocess.run(
        [PYTHON, "-c", VIEWS_SCRIPT, str(REPO / "pipelines" / "marketplace.yaml"), str(root)],
        capture_output=True,
        text=True,
        cwd=source,
        env=env,
    )
    shutil.rmtree(root, ignore_errors=True)
    found = [line for line in done.stdout.splitlines() if line.startswith("VIEWS ")]
    if done.returncode != 0 or not found:
        raise SystemExit(f"the views' run failed:\n{done.stderr[-3000:]}")
    return {"label": label, "commit": commit.stdout.strip(), "rounds": json.loads(found[-1][len("VIEWS ") :])}


def _python(script: str, *args: str) -> str:
    done = subprocess.run([PYTHON, "-c", script, *args], capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"{script.split(chr(10))[2]}... failed:\n{done.stderr[-3000:]}")
    return done.stdout


def measure_dag(dags: Path, label: str) -> dict[str, Any]:
    sys.path.insert(0, str(REPO))
    from tests.airflow_server import start_airflow, stop_airflow

    root = Path(tempfile.mkdtemp(prefix="lakejoin-dag-bench-"))
    pipelines = root / "pipelines"
    pipelines.mkdir()
    spec_file = pipelines / "marketplace.yaml"
    # Without its schedule: the scheduler would start a run of its own when the DAG is unpaused.
    text = (REPO / "pipelines" / "marketplace.yaml").read_text()
    spec_file.write_text(re.sub(r"(?m)^schedule:.*\n", "", text))
    lake = root / "lakehouse"
    _python(LAKE_SCRIPT, "create", str(lake))
    user, password = "admin", "bench-run-path"
    server = start_airflow(root, pipelines=pipelines, user=user, password=password, dags=dags)
    record: dict[str, Any] = {"label": label, "dags": str(dags), "runs": []}
    try:
        api = _Api(server.url, user, password)
        dag_id = "lakejoin_marketplace"
        api.wait_for_dag(dag_id)
        api.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
        for name, change in (("first", None), ("small change", 0), ("nothing new", None)):
            if change is not None:
                _python(LAKE_SCRIPT, str(change), str(lake))
            run = api.run(dag_id)
            run["name"] = name
            run["gate"] = json.loads(_python(GATE_SCRIPT, str(spec_file)))
            print(
                f"{label}: {name}: {run['state']} in {run['seconds']:.1f} s (wall {run['wall']:.1f} s), "
                f"gate {run['gate'] or 'every view exact'}",
                flush=True,
            )
            record["runs"].append(run)
    finally:
        stop_airflow(server)
    shutil.rmtree(root, ignore_errors=True)
    return record


class _Api:
    """Airflow's REST API with a token from the simple auth manager."""

    def __init__(self, url: str, user: str, password: str) -> None:
        self.url = url
        answer = self._send("POST", "/auth/token", {"username": user, "password": password}, token=None)
        self.token = answer["access_token"]

    def _send(self, method: str, path: str, body: Any, token: str | None) -> Any:
        import urllib.request

        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.load(answer)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        return self._send(method, path, body, self.token)

    def wait_for_dag(self, dag_id: str, seconds: float = 300) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            dags = self.call("GET", "/api/v2/dags?dag_id_pattern=" + dag_id)["dags"]
            if dags:
                return
            time.sleep(1)
        raise SystemExit(f"{dag_id} was not parsed within {seconds} s")

    def run(self, dag_id: str, seconds: float = 1800) -> dict[str, Any]:
        """Trigger a run, wait for its end; its state, Airflow's own duration, the caller's wall
        time from the trigger, and each task's state and duration."""
        from datetime import datetime

        started = time.monotonic()
        run = self.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": {}})
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run['dag_run_id']}"
        deadline = started + seconds
        while time.monotonic() < deadline:
            run = self.call("GET", path)
            if run["state"] in ("success", "failed"):
                break
            time.sleep(0.5)
        wall = time.monotonic() - started
        tasks = self.call("GET", path + "/taskInstances")["task_instances"]

        def seconds_of(item: dict[str, Any], start: str = "start_date") -> float:
            if not item.get(start) or not item.get("end_date"):
                return 0.0
            begin = datetime.fromisoformat(item[start].replace("Z", "+00:00"))
            return (datetime.fromisoformat(item["end_date"].replace("Z", "+00:00")) - begin).total_seconds()

        return {
            "state": run["state"],
            "seconds": seconds_of(run, "queued_at" if run.get("queued_at") else "start_date"),
            "wall": wall,
            "tasks": {
                t["task_id"]: {"state": t["state"], "seconds": t.get("duration") or 0.0} for t in tasks
            },
        }


def _task(item: dict[str, Any]) -> dict[str, Any]:
    return {"state": item["state"], "seconds": item.get("duration") or 0.0}


def measure_demo() -> dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run(["make", "demo"], cwd=REPO, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"make demo failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return {"label": "demo", "seconds": seconds, "tail": done.stdout.strip().splitlines()[-3:]}


def measure_ci() -> dict[str, Any]:
    clone = Path(tempfile.mkdtemp(prefix="lakejoin-ci-bench-"))
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True
    )
    started = time.monotonic()
    done = subprocess.run(["bash", ".ci/run"], cwd=clone, capture_output=True, text=True)
    seconds = time.monotonic() - started
    log = done.stdout + done.stderr
    kept = Path(tempfile.gettempdir()) / f"{clone.name}.log"
    kept.write_text(log)  # the whole output, for a run that failed
    print(f".ci/run exit {done.returncode} in {seconds / 60:.1f} min; its output: {kept}", flush=True)
    phases = {m.group(1): float(m.group(2)) for m in re.finditer(r"lakejoin-ci: (.+?) took (\d+) s", log)}
    # make test's two pytest runs (tests/unit alone, then the rest): each ends with a summary line.
    passed = re.findall(r"^=*\s*((?:\d+ \w+, )*\d+ passed.*?) in [\d.]+s", log, re.M)
    shutil.rmtree(clone, ignore_errors=True)
    return {
        "label": "ci",
        "commit": commit.stdout.strip(),
        "exit": done.returncode,
        "seconds": seconds,
        "phases": phases,
        "tests": " + ".join(passed) if passed else None,
    }


def entries(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """One targets.json entry per target measured, each with the commit its figure was taken at."""
    found = []
    dag = figures.get("dag")
    if dag:
        small = next(r for r in dag["runs"] if r["name"] == "small change")
        found.append(("dag", small["wall"], f"run_path dag ({dag['label']})", dag["commit"]))
    if "demo" in figures:
        found.append(("demo", figures["demo"]["seconds"], "run_path demo", figures["demo"]["commit"]))
    failed: set[str] = set()
    if "ci" in figures:
        ci = figures["ci"]
        found.append(("ci", ci["seconds"], "run_path ci", ci["commit"]))
        if "make test" in ci["phases"]:
            found.append(("test", ci["phases"]["make test"], "run_path ci", ci["commit"]))
        if ci.get("exit"):  # a failed run is not met, however fast it failed
            failed |= {"ci", "test"}
    return [
        {
            "target": TARGETS[key],
            "measured": round(measured, 1),
            "limit": LIMITS[key],
            "met": measured <= LIMITS[key] and key not in failed,
            "batch": batch,
            "commit": commit,
        }
        for key, measured, batch, commit in found
    ]


def write(out: Path, kind: str, record: dict[str, Any], commit: str) -> None:
    """Merge `record` into run_path.json (by kind, and by label for views and other DAG folders),
    then re-write run_path's targets.json entries and run_path.md."""
    from bench.targets import replace_entries

    folder = out / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    store = folder / "run_path.json"
    figures = json.loads(store.read_text()) if store.exists() else {}
    record["commit"] = record.get("commit") or commit
    if kind == "dag" and Path(record["dags"]) != REPO / "dags":  # another design, for comparison
        figures.setdefault("dag_compared", {})[record["label"]] = record
    elif kind == "views":
        figures.setdefault("views", {})[record["label"]] = record
    else:
        figures[kind] = record
    store.write_text(json.dumps(figures, indent=2) + "\n")
    found = entries(figures)
    replace_entries(folder / "targets.json", "run_path", found)
    (folder / "run_path.md").write_text(markdown(figures, found))


def markdown(figures: dict[str, Any], entries: list[dict[str, Any]]) -> str:
    lines = [
        "# The run path (issue 24)",
        "",
        "Written by `python -m bench.run_path` on this 2-core machine. Wall seconds; never assertions "
        "in a test.",
        "",
        "## Targets",
        "",
        "| target | measured | limit | met | commit |",
        "|---|---|---|---|---|",
    ]
    for e in entries:
        lines.append(
            f"| {e['target']} | {e['measured']} | {e['limit']} | {'yes' if e['met'] else '**no**'} "
            f"| {e['commit']} |"
        )
    dags = [figures["dag"]] if "dag" in figures else []
    dags += list(figures.get("dag_compared", {}).values())
    if dags:
        lines += [
            "",
            "## DAG runs of the demo pipeline (real scheduler, LocalExecutor, parallelism 2)",
            "",
            "| design | run | state | Airflow's run time, s | wall from trigger, s | tasks (s) | gate |",
            "|---|---|---|---|---|---|---|",
        ]
        for dag in dags:
            for run in dag["runs"]:
                tasks = ", ".join(f"{k} {v['seconds']:.1f} ({v['state']})" for k, v in run["tasks"].items())
                gate = "exact" if not run["gate"] else "**differs: " + ", ".join(run["gate"]) + "**"
                lines.append(
                    f"| {dag['label']} ({dag['commit']}) | {run['name']} | {run['state']} | "
                    f"{run['seconds']:.1f} | {run['wall']:.1f} | {tasks} | {gate} |"
                )
    if "ci" in figures:
        ci = figures["ci"]
        phases = ", ".join(f"{k} {v:.0f} s" for k, v in ci["phases"].items())
        lines += [
            "",
            "## .ci/run on a fresh clone",
            "",
            f"{ci['seconds'] / 60:.1f} min at {ci['commit']} (exit {ci['exit']}): {phases}; "
            f"tests: {ci['tests']}",
        ]
    for record in figures.get("views", {}).values():
        lines += _views_markdown(record)
    if "demo" in figures:
        lines += [
            "",
            "## make demo",
            "",
            f"{figures['demo']['seconds']:.0f} s at {figures['demo']['commit']}",
        ]
    return "\n".join(lines) + "\n"


def _views_markdown(record: dict[str, Any]) -> list[str]:
    """The views' small batches of one record: a run's seconds, then each view's."""
    lines = [
        "",
        f"## Each view's batches on the demo lakehouse: {record['label']} ({record['commit']})",
        "",
        "| run | s | view | state | keys | jobs | s | phases (s) | gate |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in record["rounds"]:
        gate = "exact" if not run["gate"] else "**differs: " + ", ".join(run["gate"]) + "**"
        for i, v in enumerate(run["views"]):
            phases = ", ".join(f"{k} {t:.2f}" for k, t in v["phases"].items() if t >= 0.05)
            state = v["state"] + (f" ({v['strategy']})" if v["strategy"] else "")
            head = f"| {run['name']} | {run['seconds']}" if i == 0 else "| |"
            lines.append(
                f"{head} | {v['view']} | {state} | {v['keys']} | {v['jobs']} | {v['seconds']:.2f} | {phases} "
                f"| {gate if i == 0 else ''} |"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run_path", description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("dag", "demo", "ci", "views"))
    parser.add_argument("--source", type=Path, default=REPO, help="the work tree whose lakejoin runs (views)")
    parser.add_argument("--dags", type=Path, default=REPO / "dags", help="the DAG folder to measure (dag)")
    parser.add_argument("--label", default=None, help="the design's name in the figures (dag, views)")
    parser.add_argument("--out", type=Path, default=REPO / "docs")
    args = parser.parse_args(argv)
    from bench.measure import lakejoin_commit

    commit = lakejoin_commit()
    if args.kind == "dag":
        record = measure_dag(args.dags.resolve(), args.label or "one Spark per DAG run")
        bad = [r for r in record["runs"] if r["gate"] or r["state"] != "success"]
    elif args.kind == "views":
        record = measure_views(args.source.resolve(), args.label or "HEAD")
        bad = [r for r in record["rounds"] if r["gate"]]
    elif args.kind == "demo":
        record, bad = measure_demo(), []
    else:
        record = measure_ci()
        bad = [record] if record["exit"] else []
    write(args.out, args.kind, record, commit)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
