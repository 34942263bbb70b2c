"""`python -m bench.lineage_cost`: what OpenLineage events add to a batch (issue 39).

The benchmark's five views on its tables (100 k orders by default), a first batch, then tiny
batches of the same shape (`harness.tiny_change`), each run twice per view pair: one batch
with no OpenLineage transport configured, the next with events sent to an HTTP receiver on
127.0.0.1 (a thread of this process). Spark's status tracker counts every job a batch starts
(one job group per view); the events are meant to add none and a few milliseconds. Two
counts: every job the event calls started (they run in a job group of their own: exact, the
judged figure), and each view's jobs with events against the same view's batch before without
(batches of the same shape, but not the same rows: a list's routing varies by a few jobs).

Figures go to `<out>/bench/lineage_cost.json` and an entry of `<out>/bench/targets.json`
("OpenLineage events per batch: added Spark jobs", limit 0).

    python -m bench.lineage_cost --orders 100000 --out docs
"""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.harness import Run

ROUNDS = 3  # pairs of tiny batches: without events, then with them
LINEAGE_GROUP = "lakejoin-lineage-events"
OWNER = "lineage_cost"  # its targets.json entry's `batch`


class _Receiver(BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        _Receiver.received.append(json.loads(body))
        self.send_response(201)
        self.end_headers()

    def log_message(self, *args: Any) -> None:  # quiet
        pass


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.lineage_cost [--orders N] [--out docs] ...`; exit 1 when the gate failed or
    no event arrived."""
    from bench.harness import Session, run

    return run(
        argv,
        program="python -m bench.lineage_cost",
        doc=__doc__ or "",
        session=Session("lakejoin-lineage-cost"),
        work="build/lineage-cost-lake",
        orders=100_000,
        measure=measure,
    )


def measure(run: Run) -> int:
    """ROUNDS pairs of tiny batches, without events then with them; the record and its entry."""
    from bench.measure import lakejoin_commit

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    for name in [n for n in os.environ if n.startswith("OPENLINEAGE")]:
        del os.environ[name]

    lake = run.lake("fixed_cost")
    spark, spec = run.spark, lake.spec
    run.views(spec, "first")

    from lakejoin.engine.lineage import BatchLineage

    emit = BatchLineage._emit
    sc = spark.sparkContext

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        """An event sent inside a job group of its own, then the view's group back."""
        group = sc.getLocalProperty("spark.jobGroup.id")
        sc.setJobGroup(LINEAGE_GROUP, LINEAGE_GROUP)
        try:
            emit(self, *args, **kwargs)
        finally:
            sc.setJobGroup(group or "", group or "")

    BatchLineage._emit = counted  # type: ignore[method-assign]

    rounds = []
    for number in range(1, ROUNDS + 1):
        pair: dict[str, Any] = {}
        for events in (False, True):
            if events:
                os.environ.update(OPENLINEAGE__TRANSPORT__TYPE="http", OPENLINEAGE__TRANSPORT__URL=url)
            _Receiver.received.clear()
            run.tiny_change(lake, 2 * number + events)
            figures = run.views(spec, f"tiny-{number}-{'events' if events else 'none'}")
            for name in ("OPENLINEAGE__TRANSPORT__TYPE", "OPENLINEAGE__TRANSPORT__URL"):
                os.environ.pop(name, None)
            pair["events" if events else "none"] = {
                "views": figures,
                "received": [(e["job"]["name"], e["eventType"]) for e in _Receiver.received],
            }
        rounds.append(pair)
    in_events = len(sc.statusTracker().getJobIdsForGroup(LINEAGE_GROUP))
    wrong = run.gate(spec)
    run.stop_spark()
    server.shutdown()

    added = [
        pair["events"]["views"][view]["jobs"] - pair["none"]["views"][view]["jobs"]
        for pair in rounds
        for view in pair["none"]["views"]
        if pair["none"]["views"][view]["outcome"] == pair["events"]["views"][view]["outcome"] == "committed"
    ]
    record = {
        "orders": run.args.orders,
        "commit": lakejoin_commit(),
        "command": run.command,
        "rounds": rounds,
        "jobs_in_event_calls": in_events,
        "added_jobs_batch_against_batch": added,
        "gate": wrong,
    }
    (run.out / "lineage_cost.json").write_text(json.dumps(record, indent=2) + "\n")
    run.replace_targets(OWNER, targets(record))
    received = sum(len(p["events"]["received"]) for p in rounds)
    print(
        f"jobs inside event calls: {in_events}; batch against batch: {added}; events received: {received}; "
        f"gate: {wrong or 'exact'}"
    )
    return 1 if wrong or not received else 0


def targets(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's targets.json entry (pure: `python -m bench judge` re-derives it)."""
    received = sum(len(p["events"]["received"]) for p in record["rounds"])
    in_events = record["jobs_in_event_calls"]
    return [
        {
            "target": "OpenLineage events per batch: added Spark jobs "
            f"({record['orders'] / 1e6:g} M orders, tiny batches: jobs started inside the event calls of "
            f"{received} events)",
            "measured": in_events,
            "limit": 0,
            "met": in_events == 0,
            "batch": OWNER,
            "commit": record["commit"],
        }
    ]


if __name__ == "__main__":
    raise SystemExit(main())
