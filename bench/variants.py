"""The ways of bringing the views up to date that the benchmark runs side by side, each on its
own copy of the outputs over the same shared sources:

- FULL: recompute every view and overwrite its output;
- NAIVE: recompute every view and MERGE all of it (lakejoin's --full-refresh);
- INC: lakejoin's incremental batch, with a given layout of its tables (deletion vectors on or
  off, the output clustered by its key or not) and fan-out threshold;
- FLOOR: read the batch's Change Data Feed ranges and append the rows INC produced, nothing
  else: what any incremental method must at least do.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bench.measure import Stopwatch

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakejoin.engine.batch import BatchSummary
    from lakejoin.spec.model import PipelineSpec

# lakejoin's phases, and the names the benchmark reports them under.
PHASES = {
    "plan": "plan",
    "changes": "changes",
    "affected keys": "affected keys",
    "recompute": "recompute",
    "write": "merge",
    "check": "checks",
    "commit": "commit",
}


@dataclass
class ViewRun:
    seconds: float
    affected: int = 0
    strategy: str = ""  # a view with a fan-out fallback: "incremental" or "full"
    output: tuple[str, int, int] | None = None  # (path, version before, version after)
    reads: dict[str, tuple[str, int, int]] = field(default_factory=dict)  # source -> (path, first, last)
    phases: dict[str, float] = field(default_factory=dict)  # INC: the view's seconds by phase


@dataclass
class Run:
    phases: dict[str, float]
    views: dict[str, ViewRun]

    @property
    def seconds(self) -> float:
        return sum(self.phases.values())


@dataclass(frozen=True)
class Layout:
    deletion_vectors: bool = True  # lakejoin's default for the tables it creates
    clustered: bool = False  # OPTIMIZE (liquid clustering by the key) after the first batch
    key_ranges: bool = True  # lakejoin's default: tables laid out by key, batches read by key range
    key_upsert: bool = True  # lakejoin's default: the one-commit upsert writes what it can (issue 37)


@dataclass
class Variant:
    name: str
    storage: Path
    spec: PipelineSpec

    def view_path(self, view: str) -> str:
        return self.spec.views[view].path

    def setup(self, spark: SparkSession) -> None:
        """The first batch, before any change is measured."""
        self.run(spark)

    def run(self, spark: SparkSession) -> Run:
        raise NotImplementedError


class Full(Variant):
    def run(self, spark: SparkSession) -> Run:
        from lakejoin.engine.batch import recompute_view

        watch, views = Stopwatch(), {}
        for view in self.spec.view_order():
            start = dict(watch.seconds)
            with watch.phase("plan"):
                rows = recompute_view(spark, self.spec, view)
            with watch.phase("recompute"):
                rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(
                    self.view_path(view)
                )
            views[view] = ViewRun(sum(watch.seconds.values()) - sum(start.values()))
        return Run(watch.seconds, views)


class Naive(Variant):
    def setup(self, spark: SparkSession) -> None:
        from lakejoin.engine.batch import run_view

        for view in self.spec.view_order():
            run_view(spark, self.spec, view, full_refresh=True, checks=False)

    def run(self, spark: SparkSession) -> Run:
        from pyspark.sql import functions as F

        from lakejoin.engine.batch import recompute_view
        from lakejoin.engine.kinds import view_logic
        from lakejoin.sink.entry import StateWrite, write_state
        from lakejoin.sink.merge_terms import KEEP

        watch, views = Stopwatch(), {}
        for view in self.spec.view_order():
            start = sum(watch.seconds.values())
            with watch.phase("plan"):
                rows = recompute_view(spark, self.spec, view)
                keys = list(view_logic(self.spec, self.spec.views[view]).output_key)
            with watch.phase("merge"):
                # The whole recompute by the sink's MERGEs (its differences only), unstamped.
                source = rows.withColumn(KEEP, F.lit(True))
                asked = StateWrite(
                    self.view_path(view), tuple(keys), tuple(rows.columns), source, True, rows.schema
                )
                write_state(spark, asked, None)
            views[view] = ViewRun(sum(watch.seconds.values()) - start)
        return Run(watch.seconds, views)


@dataclass
class Incremental(Variant):
    layout: Layout = field(default_factory=Layout)

    def setup(self, spark: SparkSession) -> None:
        from lakejoin.engine.batch import run_view

        with self.key_ranges(spark):
            for view in self.spec.view_order():
                run_view(spark, self.spec, view, checks=False)
        from lakejoin.engine.kinds import view_logic

        # lakejoin creates its tables unclustered (keyed_tables.ensure_keyed_table); this layout clusters
        # each output by its key, after which its batches take Spark's MERGE (driver_merge.py).
        keys = {
            str(Path(self.view_path(v)).resolve()): view_logic(self.spec, self.spec.views[v]).output_key
            for v in self.spec.view_order()
        }
        for log in self.storage.rglob("_delta_log"):
            table = f"delta.`{log.parent}`"
            if not self.layout.deletion_vectors and log.parent.name != "batch_log":
                spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')")
            if self.layout.clustered:
                key = keys.get(str(log.parent.resolve()))
                if key:
                    spark.sql(f"ALTER TABLE {table} CLUSTER BY ({', '.join(f'`{c}`' for c in key)})")
                spark.sql(f"OPTIMIZE {table}")

    def run(self, spark: SparkSession) -> Run:
        from lakejoin.engine.batch import run_view

        phases: dict[str, float] = {}
        views = {}
        for view in self.spec.view_order():
            before = _output_version(spark, self.view_path(view))
            started = time.perf_counter()
            with self.key_ranges(spark):
                summary = run_view(spark, self.spec, view)
            wall = time.perf_counter() - started
            for phase, seconds in summary.phase_seconds.items():
                name = PHASES.get(phase, phase)
                phases[name] = phases.get(name, 0.0) + seconds
            # A view with nothing to do still planned (its phase times are not recorded then).
            phases["plan"] = phases.get("plan", 0.0) + wall - sum(summary.phase_seconds.values())
            views[view] = self.view_run(view, summary, wall, before)
        return Run(phases, views)

    @contextmanager
    def key_ranges(self, spark: SparkSession) -> Iterator[None]:
        """lakejoin's key ranges and its write as the layout says (the session's settings are
        put back after)."""
        from lakejoin.delta import key_ranges
        from lakejoin.sink import key_upsert

        off = [key_ranges.ENABLED] if not self.layout.key_ranges else []
        off += [key_upsert.ENABLED] if not self.layout.key_upsert else []
        for name in off:
            spark.conf.set(name, "false")
        try:
            yield
        finally:
            for name in off:
                spark.conf.unset(name)

    def view_run(self, view: str, summary: BatchSummary, wall: float, before: int) -> ViewRun:
        metrics = summary.kind_metrics
        strategy = ""
        if "full_recompute" in metrics:
            strategy = "full" if metrics["full_recompute"] else "incremental"
        spec_view = self.spec.views[view]
        reads = {
            name: (self.spec.sources[name].path, summary.start_versions.get(name, -1) + 1, last)
            for name, last in summary.pinned_versions.items()
            if name in self.spec.sources and name in spec_view.inputs
        }
        phases = {PHASES.get(p, p): round(s, 3) for p, s in summary.phase_seconds.items()}
        run = ViewRun(wall, summary.affected_keys, strategy, reads=reads, phases=phases)
        if summary.output_version is not None and summary.output_applied:
            run.output = (spec_view.path, before, summary.output_version)
        return run


def _output_version(spark: SparkSession, path: str) -> int:
    """The output's version before a batch (-1: none yet). A batch writes one or two commits
    (an update, then an append of new keys), so the range is read from the table, not guessed."""
    from delta.tables import DeltaTable

    from lakejoin.delta.sources import latest_version

    return latest_version(spark, path, role="bench output") if DeltaTable.isDeltaTable(spark, path) else -1


@dataclass
class Floor(Variant):
    """Reads what INC read and appends what INC wrote: the cost no incremental method avoids."""

    def setup(self, spark: SparkSession) -> None:
        self.storage.mkdir(parents=True, exist_ok=True)

    def prepare(self, spark: SparkSession, inc: Run) -> dict[str, DataFrame]:
        """The rows INC wrote in this batch, by view, materialised before the clock starts."""
        from lakejoin.delta.change_feed import CDF_COLUMNS, read_change_feed

        rows = {}
        for view, run in inc.views.items():
            if run.output is None or run.output[2] <= run.output[1]:
                continue
            path, before, after = run.output
            feed = read_change_feed(spark, path, before + 1, after).where("_change_type != 'update_preimage'")
            # A table with its own Change Data Feed refuses columns named like the feed's.
            feed = feed.toDF(*[c.lstrip("_") if c in CDF_COLUMNS else c for c in feed.columns])
            rows[view] = feed.localCheckpoint()
            rows[view].count()
        return rows

    def run_floor(self, spark: SparkSession, inc: Run, precomputed: dict[str, DataFrame]) -> tuple[Run, int]:
        from lakejoin.delta.change_feed import read_change_feed

        watch, cdf_rows = Stopwatch(), 0
        with watch.phase("changes"):
            for run in inc.views.values():
                for path, first, last in run.reads.values():
                    if first <= last:
                        cdf_rows += read_change_feed(spark, path, first, last).count()
        with watch.phase("merge"):
            for view, rows in precomputed.items():
                rows.write.format("delta").mode("append").option("mergeSchema", "true").save(
                    str(self.storage / view)
                )
        return Run(watch.seconds, {}), cdf_rows


def spec_for(name: str, storage: Path, sources: dict[str, str], threshold: float = 0.2) -> PipelineSpec:
    from bench.tables import spec_text
    from lakejoin.spec.parse import parse_spec

    return parse_spec(spec_text(name, storage, sources, threshold), file=f"<bench {name}>")
