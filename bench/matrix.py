"""One benchmark run at one size: generate the tables, set up every variant, then for each
(rate, scenario) apply a change batch and bring every variant up to date, measuring each, and
gate INC and NAIVE against FULL after every batch."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.changes import ChangeMaker, Scenario
from bench.measure import fingerprint, lakejoin_commit, peak_memory, table_versions, writes_since
from bench.per_record import PerRecord
from bench.tables import Sizes, write_sources
from bench.variants import Floor, Full, Incremental, Layout, Naive, Run, Variant, spec_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# lakejoin creates its tables with deletion vectors on and lays them out by key; the _nodv variants
# turn deletion vectors off, inc_noranges the key ranges (lakejoin before they came), inc_merge
# the one-commit upsert (the write before issue 37, measured the same day as the upsert).
INC_LAYOUTS = {
    "inc": Layout(),
    "inc_nodv": Layout(deletion_vectors=False),
    "inc_clustered": Layout(clustered=True),
    "inc_nodv_clustered": Layout(deletion_vectors=False, clustered=True),
    "inc_noranges": Layout(key_ranges=False),
    "inc_merge": Layout(key_upsert=False),  # lakejoin's write before issue 37: Delta's MERGE
}
# inc_nofallback and inc_alwaysfull pin the fan-out choice (threshold 1 and 0), to judge the default's.
VARIANTS = ("full", "naive", *INC_LAYOUTS, "inc_nofallback", "inc_alwaysfull", "floor", "per_record")


@dataclass(frozen=True)
class Matrix:
    orders: int
    rates: tuple[float, ...]
    scenarios: tuple[Scenario, ...]
    variants: tuple[str, ...]
    seed: int = 42
    vacuum: bool = True
    # False: a side run (say, every layout side by side on a day the machine ran slow); its
    # batches go in the tables, but the targets, which pair batches across runs, skip them.
    judged: bool = True

    @property
    def batches(self) -> list[tuple[float, Scenario]]:
        return [(rate, scenario) for rate in self.rates for scenario in self.scenarios]


@dataclass
class Outcome:
    """The figures of one variant bringing the views up to date after one change batch."""

    orders: int
    batch: int
    scenario: str
    rate: float
    variant: str
    seconds: float
    phases: dict[str, float]
    views: dict[str, dict[str, Any]]
    changed_rows: dict[str, int]
    peak_rss_mb: float = 0.0
    peak_heap_mb: float = 0.0
    peak_python_mb: float = 0.0
    writes: dict[str, Any] = field(default_factory=dict)
    cdf_rows: int = 0
    gate: str = ""


Progress = Callable[[str], None]


def run_matrix(
    spark: SparkSession, matrix: Matrix, work: Path, results: Path, progress: Progress
) -> list[str]:
    """Run the whole matrix at one size; each outcome is appended to `results` (JSON lines) as
    soon as it is measured. Returns the correctness-gate failures."""
    root = work / f"orders_{matrix.orders}"
    shutil.rmtree(root, ignore_errors=True)
    sizes = Sizes.at(matrix.orders)
    progress(f"writing the tables ({sizes.orders:,} orders)")
    started = time.perf_counter()
    sources = write_sources(spark, root, sizes, matrix.seed)
    _log(
        results,
        {
            "orders": matrix.orders,
            "event": "tables",
            "commit": lakejoin_commit(),
            "judged": matrix.judged,
            "seconds": time.perf_counter() - started,
            "sizes": asdict(sizes),
        },
    )
    variants = _variants(matrix.variants, root, sources)
    per_record = PerRecord(root / "per_record", sources) if "per_record" in matrix.variants else None
    for variant in variants.values():
        progress(f"first batch of {variant.name}")
        started = time.perf_counter()
        variant.setup(spark)
        _log(
            results,
            {
                "orders": matrix.orders,
                "event": "setup",
                "variant": variant.name,
                "seconds": time.perf_counter() - started,
            },
        )
    if per_record is not None:
        progress("restoring the per-record state stores")
        per_record.setup(spark)
        _log(
            results,
            {
                "orders": matrix.orders,
                "event": "setup",
                "variant": "per_record",
                "seconds": per_record.restore_seconds,
            },
        )
    changes = ChangeMaker(spark, sources, sizes, matrix.seed)
    failures: list[str] = []
    for number, (rate, scenario) in enumerate(matrix.batches, start=1):
        progress(f"batch {number}: {scenario.value} at {rate:.1%}: changing the sources")
        changed = changes.apply(scenario, rate, number)
        head = dict(
            orders=matrix.orders, batch=number, scenario=scenario.value, rate=rate, changed_rows=changed
        )
        runs: dict[str, Run] = {}
        for name, variant in variants.items():
            if isinstance(variant, Floor):
                continue
            progress(f"batch {number}: {scenario.value} at {rate:.1%}: {name}")
            with _measured(spark, variant.storage) as measured:
                runs[name] = variant.run(spark)
            _log(results, asdict(_outcome(head, name, runs[name], measured)))
        floor = variants.get("floor")
        if isinstance(floor, Floor) and "inc" in runs:
            progress(f"batch {number}: {scenario.value} at {rate:.1%}: floor")
            precomputed = floor.prepare(spark, runs["inc"])
            with _measured(spark, floor.storage) as measured:
                run, cdf_rows = floor.run_floor(spark, runs["inc"], precomputed)
            outcome = _outcome(head, "floor", run, measured)
            outcome.cdf_rows = cdf_rows
            _log(results, asdict(outcome))
        if per_record is not None:
            progress(f"batch {number}: {scenario.value} at {rate:.1%}: per_record")
            with _measured(spark, per_record.storage) as measured:
                run = per_record.run(spark)
            _log(results, asdict(_outcome(head, "per_record", run, measured)))
        progress(f"batch {number}: correctness gate")
        failures += _gate(spark, variants, per_record, head, results)
        if matrix.vacuum and number < len(matrix.batches):  # no batch reads them after the last
            _vacuum(spark, root)
    return failures


def _variants(names: tuple[str, ...], root: Path, sources: dict[str, str]) -> dict[str, Variant]:
    variants: dict[str, Variant] = {}
    for name in names:
        storage = root / name
        if name == "full":
            variants[name] = Full(name, storage, spec_for(name, storage, sources))
        elif name == "naive":
            variants[name] = Naive(name, storage, spec_for(name, storage, sources))
        elif name in INC_LAYOUTS:
            variants[name] = Incremental(name, storage, spec_for(name, storage, sources), INC_LAYOUTS[name])
        elif name in ("inc_nofallback", "inc_alwaysfull"):
            threshold = 1.0 if name == "inc_nofallback" else 0.0
            variants[name] = Incremental(name, storage, spec_for(name, storage, sources, threshold=threshold))
        elif name == "floor":
            variants[name] = Floor(name, storage, spec_for(name, storage, sources))
    return variants


@contextmanager
def _measured(spark: SparkSession, storage: Path) -> Iterator[dict[str, Any]]:
    before = table_versions(spark, storage) if storage.exists() else {}
    measured: dict[str, Any] = {}
    started = time.perf_counter()
    with peak_memory(spark) as peak:
        yield measured
    measured["wall"] = time.perf_counter() - started
    measured["peak"] = peak
    measured["writes"] = asdict(writes_since(spark, storage, before)) if storage.exists() else {}


def _outcome(head: dict[str, Any], name: str, run: Run, measured: dict[str, Any]) -> Outcome:
    peak = measured["peak"]
    views = {view: asdict(v) for view, v in run.views.items()}
    for view in views.values():
        view.pop("reads", None)
    return Outcome(
        **head,
        variant=name,
        seconds=run.seconds,
        phases=run.phases,
        views=views,
        peak_rss_mb=peak.rss_mb,
        peak_heap_mb=peak.heap_mb,
        peak_python_mb=peak.python_mb,
        writes=measured["writes"],
    )


def _gate(
    spark: SparkSession,
    variants: dict[str, Variant],
    per_record: PerRecord | None,
    head: dict[str, Any],
    results: Path,
) -> list[str]:
    """INC and NAIVE output == FULL output, view by view, by count and whole-table hash."""
    full = variants.get("full")
    if full is None:
        return []
    failures = []
    for view in full.spec.view_order():
        expected = fingerprint(spark, full.view_path(view))
        for name, variant in variants.items():
            if name in ("full", "floor"):
                continue
            got = fingerprint(spark, variant.view_path(view))
            if got != expected:
                failures.append(
                    f"batch {head['batch']} ({head['scenario']} at {head['rate']:.1%}): {name}.{view} has "
                    f"{got[0]} rows (hash {got[1]}), FULL has {expected[0]} rows (hash {expected[1]})"
                )
        if view == "orders_enriched" and per_record is not None and per_record.live_orders() != expected[0]:
            failures.append(
                f"batch {head['batch']}: per_record holds {per_record.live_orders()} orders, "
                f"FULL orders_enriched has {expected[0]}"
            )
    _log(results, {**head, "event": "gate", "failures": failures})
    return failures


def _vacuum(spark: SparkSession, root: Path) -> None:
    """Drop the files no later batch reads (untimed): the disk would otherwise fill at 15 M rows."""
    from delta.tables import DeltaTable

    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    for log in root.rglob("_delta_log"):
        DeltaTable.forPath(spark, str(log.parent)).vacuum(0)


def _log(results: Path, record: dict[str, Any]) -> None:
    with results.open("a", encoding="utf-8") as out:
        out.write(json.dumps(record, default=str) + "\n")
