"""`python -m bench.merge`: add another run's figures to the published ones.

    python -m bench --out /tmp/side --orders 1500000 --rates 0.01 --not-judged ...
    python -m bench.merge /tmp/side/bench/results.jsonl --run "python -m bench ... (lakejoin abc123)"

`python -m bench` starts its results afresh, so a run of a few points goes to another folder,
and this appends its finished batches (those the correctness gate checked) to
`docs/bench/results.jsonl`, numbered after the last batch there, then writes the report again.
The report's command line gains `--run`'s text, and its total time gains the run's minutes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from bench.report import load, write_report

COMMAND = re.compile(r"- Command: `(.*)` \((\d+) min in all\)")


def renumbered(published: list[dict[str, Any]], side: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`side`'s records for the batches its gate checked, numbered after `published`'s last batch
    (a batch cut short by a stopped run has no gate record and is left out)."""
    gated = sorted({r["batch"] for r in side if r.get("event") == "gate"})
    after = max((r["batch"] for r in published if "batch" in r), default=0)
    number = {batch: after + i for i, batch in enumerate(gated, start=1)}
    kept = []
    for record in side:
        if "batch" in record:
            if record["batch"] not in number:
                continue
            record = {**record, "batch": number[record["batch"]]}
            if record.get("event") == "gate":
                named = f"batch {record['batch']}"
                record["failures"] = [re.sub(r"^batch \d+", named, failure) for failure in record["failures"]]
        kept.append(record)
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.merge", description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path, help="the other run's results.jsonl")
    parser.add_argument("--run", required=True, help="the run's command and commit, for the report")
    parser.add_argument("--into", type=Path, default=Path("docs"), help="the published figures' folder")
    parser.add_argument("--not-judged", action="store_true", help="mark the run a side run (if it was not)")
    args = parser.parse_args(argv)
    published_path = args.into / "bench" / "results.jsonl"
    report = args.into / "benchmarks.md"
    missing = [p for p in (args.results, published_path, report) if not p.is_file()]
    if missing:
        print(f"nothing merged: {', '.join(map(str, missing))} not found", file=sys.stderr)
        return 2
    found = COMMAND.search(report.read_text(encoding="utf-8"))
    if found is None:
        print(f"nothing merged: {report} has no '- Command:' line to extend", file=sys.stderr)
        return 2
    published, side = load(published_path), load(args.results)
    added = renumbered(published, side)
    if not any("batch" in r for r in added):
        print(f"nothing merged: {args.results} has no batch the correctness gate checked", file=sys.stderr)
        return 2
    if args.not_judged:
        added = [{**r, "judged": False} if r.get("event") == "tables" else r for r in added]
    with published_path.open("a", encoding="utf-8") as out:
        out.writelines(json.dumps(r, default=str) + "\n" for r in added)
    batches = sorted({r["batch"] for r in added if "batch" in r})
    minutes = _minutes(added)
    span = f"batches {batches[0]}-{batches[-1]} here, {minutes:.0f} min measured"
    command = f"{found.group(1)}; {args.run} ({span})"
    total = (int(found.group(2)) + minutes) * 60
    print(write_report(published_path, args.into, command=command, total_seconds=total), f"batches {batches}")
    return 0


def _minutes(records: list[dict[str, Any]]) -> float:
    """The time the records measured: tables, first batches, batches (not the gates or vacuums)."""
    return sum(r.get("seconds", 0.0) for r in records) / 60


if __name__ == "__main__":
    sys.exit(main())
