"""A tiny lakehouse for tests: source tables with CDF, a spec, batches, and the oracle."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lakejoin.delta.markers import FAILPOINT
from lakejoin.engine.batch import BatchSummary, batch_log, run_view
from lakejoin.spec.model import JoinHow, PipelineSpec
from lakejoin.spec.parse import load_spec
from tests.content import Key, changed_keys, key_of, last_changes, null_key

PRODUCTS = "product_id STRING, name STRING, price DOUBLE, merchant_id STRING"
MERCHANTS = "merchant_id STRING, display_name STRING, photo_url STRING"


class Lakehouse:
    def __init__(self, spark, root: Path) -> None:
        self.spark = spark
        self.root = root

    def path(self, table: str) -> str:
        return str(self.root / table)

    # --- sources ------------------------------------------------------------------------
    def create(self, table: str, schema: Any, rows: list[tuple], *, cdf: bool = True) -> None:
        from delta.tables import DeltaTable

        builder = (
            DeltaTable.create(self.spark)
            .location(self.path(table))
            .addColumns(self.spark.createDataFrame([], schema).schema)
            .property("delta.enableChangeDataFeed", "true" if cdf else "false")
        )
        builder.execute()
        if rows:
            self.spark.createDataFrame(rows, schema).write.format("delta").mode("append").save(
                self.path(table)
            )

    def upsert(self, table: str, key: Key, rows: list[tuple]) -> None:
        from delta.tables import DeltaTable

        target = DeltaTable.forPath(self.spark, self.path(table))
        schema = self.spark.read.format("delta").load(self.path(table)).schema
        source = self.spark.createDataFrame(rows, schema)
        (
            target.alias("t")
            .merge(source.alias("s"), _same(key, "t", "s"))
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )

    def delete(self, table: str, key: Key, keys: list[Any]) -> None:
        """Delete the rows of `keys` (values of a one-column key, tuples of a key of several)."""
        from delta.tables import DeltaTable

        DeltaTable.forPath(self.spark, self.path(table)).delete(_among(key, keys))

    def rewrite(self, table: str, key: Key, keys: list[Any] | None = None, *, writer: str = "spark") -> bool:
        """Write rows of `table` back exactly as they are, a change of no row's content (issue
        36): those of `keys` (the ones that exist), or every row (a reload). `writer`: a MERGE
        `whenMatchedUpdateAll` by Spark ("spark") or by delta-rs ("delta-rs"), both of which
        record an update pre- and an equal post-image per row; or ("overwrite", every row only)
        Spark's overwrite of the table with its own rows, a delete and an equal insert per row
        in one commit. False, and no commit, when no such row exists."""

        frame = self.spark.read.format("delta").load(self.path(table))
        if keys is not None:
            frame = frame.where(_among(key, list(keys)))
        rows = frame.collect()
        if not rows:
            return False
        again = self.spark.createDataFrame(rows, frame.schema)
        if writer == "spark":
            self.upsert(table, key, [tuple(r) for r in rows])
        elif writer == "delta-rs":
            from deltalake import DeltaTable as Rs

            (
                Rs(self.path(table))
                .merge(
                    again.toArrow(),
                    " AND ".join(f"t.{c} = s.{c}" for c in _columns(key)),
                    source_alias="s",
                    target_alias="t",
                )
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
        else:
            assert writer == "overwrite" and keys is None, "an overwrite writes back every row"
            again.write.format("delta").mode("overwrite").save(self.path(table))
        return True

    def replace(self, table: str, key: Key) -> None:
        """Drop the table and write it again at its path (a new Delta table: another table id,
        versions from 0 again), its rows without the one of its least key."""
        import shutil

        frame = self.spark.read.format("delta").load(self.path(table))
        rows = sorted(frame.collect(), key=lambda r: tuple(str(r[c]) for c in _columns(key)))[1:]
        shutil.rmtree(self.path(table))
        self.create(table, frame.schema, [tuple(r) for r in rows])

    def append(self, table: str, rows: list[tuple]) -> None:
        schema = self.spark.read.format("delta").load(self.path(table)).schema
        self.spark.createDataFrame(rows, schema).write.format("delta").mode("append").save(self.path(table))

    # --- spec and runs ------------------------------------------------------------------
    def spec(
        self,
        how: str = "left",
        *,
        right_columns: str = "[display_name, photo_url]",
        extra: str = "",
        fanout: float = 1.0,
        audit: str | None = "off",
    ) -> PipelineSpec:
        """The shop's fk_join spec. `fanout` 1.0 (never fall back to a full recompute) keeps the
        tests, whose tables are tiny, on the routing path that most of them are about. `audit`
        is the view's `audit:` (None: the default, a budget). It is off unless a test is about
        it: the first incremental batch would audit, a job per test that proves nothing of its
        own (the property histories and tests/scenarios/test_audit.py run it)."""
        audited = f"    audit: {audit}\n" if audit is not None else ""
        text = f"""\
pipeline: shop
storage: {self.root / "store"}
sources:
  products: {{path: {self.path("products")}, key: product_id}}
  merchants: {{path: {self.path("merchants")}, key: merchant_id}}
views:
  display_products:
    fk_join: {{left: products, right: merchants, fk: merchant_id, how: {how},
              right_columns: {right_columns}, fanout_threshold: {fanout},
              fanout_min_rows: 0}}
{audited}{extra}"""
        file = self.root / "shop.yaml"
        file.write_text(text)
        return load_spec(file)

    def run(self, spec: PipelineSpec, view: str = "display_products", **kwargs: Any) -> BatchSummary:
        return run_view(self.spark, spec, view, **kwargs)

    def output(self, spec: PipelineSpec, view: str = "display_products") -> list[dict]:
        rows = self.spark.read.format("delta").load(spec.views[view].path).collect()
        key = spec.sources[spec.views[view].fk_join.left].key
        return sorted((r.asDict() for r in rows), key=lambda r: key_of(r, key))

    def output_changes(self, spec: PipelineSpec, first: int, view: str = "display_products") -> list[dict]:
        frame = (
            self.spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", first)
            .load(spec.views[view].path)
        )
        return [r.asDict() for r in frame.collect()]

    def rows_at(self, table: str, version: int) -> list[dict]:
        frame = self.spark.read.format("delta").option("versionAsOf", version).load(self.path(table))
        return [r.asDict() for r in frame.collect()]

    def expected(self, spec: PipelineSpec, view: str = "display_products") -> list[dict]:
        """The view recomputed from scratch, in plain Python, at the last committed pins."""
        record = batch_log(spec).last_committed(view)
        assert record is not None
        join = spec.views[view].fk_join
        left, right = spec.sources[join.left], spec.sources[join.right]
        left_rows = self.rows_at(left.path.rsplit("/", 1)[-1], record.pinned_versions[left.name])
        right_rows = self.rows_at(right.path.rsplit("/", 1)[-1], record.pinned_versions[right.name])
        return fk_join_oracle(left_rows, right_rows, join=join, left_key=left.key, right_key=right.key)


def fk_join_oracle(
    left_rows: list[dict], right_rows: list[dict], *, join, left_key: Key, right_key: Key
) -> list[dict]:
    by_key = {key_of(r, right_key): r for r in right_rows}
    columns = (
        list(join.right_columns)
        if join.right_columns
        else [c for c in (right_rows[0] if right_rows else {}) if c not in _columns(right_key)]
    )
    out = []
    for row in left_rows:
        fk = key_of(row, join.fk)
        match = None if null_key(fk) else by_key.get(fk)
        if match is None and join.how is JoinHow.INNER:
            continue
        out.append({**row, **{join.right_prefix + c: (match[c] if match else None) for c in columns}})
    return sorted(out, key=lambda r: key_of(r, left_key))


def _columns(key: Key) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


def _same(key: Key, a: str, b: str):  # noqa: ANN202 - a Spark Column
    """`a.k = b.k` for every column of the key."""
    from functools import reduce

    from pyspark.sql import functions as F

    return reduce(lambda x, y: x & y, (F.col(f"{a}.{c}") == F.col(f"{b}.{c}") for c in _columns(key)))


def _among(key: Key, keys: list[Any]):  # noqa: ANN202 - a Spark Column
    """Rows whose key is one of `keys` (values of a one-column key, tuples of a key of several)."""
    from functools import reduce

    from pyspark.sql import functions as F

    columns = _columns(key)
    if len(columns) == 1:
        return F.col(columns[0]).isin(list(keys))
    if not keys:
        return F.lit(False)
    each = (
        reduce(lambda x, y: x & y, (F.col(c) == F.lit(v) for c, v in zip(columns, k, strict=True)))
        for k in keys
    )
    return reduce(lambda x, y: x | y, each)


# --- list_join and rekey ------------------------------------------------------------------

PERSONS = "person_id STRING, name STRING, address_ids ARRAY<STRING>"
ADDRESSES = "address_id STRING, street STRING, city STRING"
MASTERS = "merchant_id STRING, display_name STRING, country STRING, photo_url STRING"


def write_spec(lake: Lakehouse, sources: dict[str, str], views: str) -> PipelineSpec:
    """A spec over the lake's tables: `sources` maps a table to its key; `views` is YAML."""
    lines = [f"  {t}: {{path: {lake.path(t)}, key: {k}}}" for t, k in sources.items()]
    text = (
        f"pipeline: lake\nstorage: {lake.root / 'store'}\nsources:\n"
        + "\n".join(lines)
        + "\nviews:\n"
        + views
    )
    file = lake.root / "lake.yaml"
    file.write_text(text)
    return load_spec(file)


def output_rows(lake: Lakehouse, spec: PipelineSpec, view: str) -> list[dict]:
    rows = lake.spark.read.format("delta").load(spec.views[view].path).collect()
    return sorted((r.asDict(recursive=True) for r in rows), key=lambda r: tuple(str(v) for v in r.values()))


def pinned(lake: Lakehouse, spec: PipelineSpec, view: str) -> dict[str, int]:
    """The versions the view's last committed batch pinned (a batch after it that found no change
    of content, `unchanged`, moved no output: the view is still what that batch made it)."""
    record = batch_log(spec).last_committed(view)
    assert record is not None
    return record.pinned_versions


def list_join_oracle(lake: Lakehouse, spec: PipelineSpec, view: str) -> list[dict]:
    """The list_join recomputed in plain Python at the last committed pins."""
    from lakejoin.spec.model import Duplicates

    join = spec.views[view].list_join
    left, right = spec.sources[join.left], spec.sources[join.right]
    versions = pinned(lake, spec, view)
    left_rows = source_rows(lake, spec, left.name, versions[left.name])
    right_rows = source_rows(lake, spec, right.name, versions[right.name])
    columns = list(join.right_columns or ()) or [
        f.name for f in lake.spark.read.format("delta").load(right.path).schema if f.name not in right.key
    ]
    by_key = {key_of(r, right.key): r for r in right_rows}
    out = []
    for row in left_rows:
        elements = list(row[join.list] or [])
        if join.duplicates is Duplicates.DROP:
            seen: list = []
            elements = [e for e in elements if not (e in seen or seen.append(e))]
        joined = []
        for e in elements:
            # An element is the right key's value, or a struct of its columns (a dict here).
            k = key_of(e, right.key) if isinstance(e, dict) else e
            if isinstance(e, dict):
                parts = dict(e)
            elif e is None and len(right.key) > 1:
                parts = {c: None for c in right.key}  # a null struct: every key column null
            else:
                parts = {right.key[0]: e}
            joined.append({**parts, **{c: (by_key[k][c] if k in by_key else None) for c in columns}})
        out.append(
            {(join.into if c == join.list else c): (joined if c == join.list else v) for c, v in row.items()}
        )
    return sorted(out, key=lambda r: tuple(str(v) for v in r.values()))


def change_feed(lake: Lakehouse, table: str, version: int) -> list[dict]:
    """Every change row of a table from version 0 to `version`, as dicts."""
    frame = (
        lake.spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .option("endingVersion", version)
        .load(lake.path(table))
    )
    return [r.asDict(recursive=True) for r in frame.collect()]


def last_change_versions(lake: Lakehouse, table: str, key: Key, version: int) -> dict[Any, int]:
    """Each live key's commit version of its last change of content, from the whole change feed:
    a commit that wrote the row back as it was is none (tests/content.py)."""
    last = last_changes(change_feed(lake, table, version), key)
    return {k: at for k, (at, row) in last.items() if row is not None}


def rekey_oracle(lake: Lakehouse, spec: PipelineSpec, view: str) -> list[dict]:
    """The rekey recomputed in plain Python at the last committed pins (latest wins on a tie
    of commit versions by the greatest master key)."""
    rekey = spec.views[view].rekey
    master = spec.sources[rekey.source]
    version = pinned(lake, spec, view)[master.name]
    rows = lake.rows_at(rekey.source, version)
    v, k = rekey.key, master.key
    columns = [c for c in (rekey.columns or (rows[0].keys() if rows else ())) if c not in (*v, *k)]
    since = last_change_versions(lake, rekey.source, k, version)
    claims = [r for r in rows if not null_key(key_of(r, v))]
    if rekey.unique:
        best: dict[Any, dict] = {}
        for r in claims:
            held = best.get(key_of(r, v))
            if held is None or (since[key_of(r, k)], key_of(r, k)) > (
                since[key_of(held, k)],
                key_of(held, k),
            ):
                best[key_of(r, v)] = r
        claims = list(best.values())
    leading = list(dict.fromkeys((*v, *k)))
    out = [{**{c: r[c] for c in leading}, **{c: r[c] for c in columns}} for r in claims]
    return sorted(out, key=lambda r: tuple(str(v) for v in r.values()))


def state_table(lake: Lakehouse, spec: PipelineSpec, view: str) -> tuple[int, list[tuple]]:
    """A view's state table (rekey's index): its version and its rows, sorted."""
    from lakejoin.delta.sources import latest_version
    from lakejoin.spec.layout import state_path as routing_index_path

    path = routing_index_path(spec, spec.views[view])
    frame = lake.spark.read.format("delta").load(path)
    rows = sorted(tuple(str(v) for v in r) for r in frame.select(*sorted(frame.columns)).collect())
    return latest_version(lake.spark, path, role=f"state of {view}"), rows


def fanout(summary) -> tuple[int, int, int]:  # noqa: ANN001 - a BatchSummary
    """A batch's fan-out decision: (full recompute 0/1, rows reached, reached per mille)."""
    metrics = summary.metrics()
    return metrics["full_recompute"], metrics["fanout_facts"], metrics["fanout_permille"]


def run_and_watch(
    lake: Lakehouse, spec: PipelineSpec, view: str, **kwargs: Any
) -> tuple[BatchSummary, list[dict]]:
    """Run one batch; return its summary and the change rows it wrote to the output's CDF
    (pre-images left out; none at all when the batch made no commit)."""
    from delta.tables import DeltaTable

    path = spec.views[view].path

    def version() -> int:
        if not DeltaTable.isDeltaTable(lake.spark, path):
            return -1
        return int(DeltaTable.forPath(lake.spark, path).history(1).first()["version"])

    before = version()
    summary = lake.run(spec, view, **kwargs)
    if version() <= before:
        return summary, []
    rows = lake.output_changes(spec, before + 1, view)
    return summary, [r for r in rows if r["_change_type"] != "update_preimage"]


# --- enrich and views that read views -----------------------------------------------------

PURCHASES = "purchase_id STRING, customer_id STRING, product_id STRING, qty INT"
CUSTOMERS = "customer_id STRING, name STRING, country STRING"
ITEMS = "product_id STRING, title STRING, price DOUBLE"


def source_rows(lake: Lakehouse, spec: PipelineSpec, source: str, version: int) -> list[dict]:
    """A source (a table, or another view's output) as it was at `version`."""
    path = spec.sources[source].path
    frame = lake.spark.read.format("delta").option("versionAsOf", version).load(path)
    return [r.asDict(recursive=True) for r in frame.collect()]


def enrich_oracle(lake: Lakehouse, spec: PipelineSpec, view: str) -> list[dict]:
    """A propagate enrich recomputed in plain Python at the last committed pins."""
    enrich = spec.views[view].enrich
    versions = pinned(lake, spec, view)
    facts = source_rows(lake, spec, enrich.fact, versions[enrich.fact])
    return sorted(
        enriched(lake, spec, view, facts, versions), key=lambda r: tuple(str(v) for v in r.values())
    )


def enriched(
    lake: Lakehouse, spec: PipelineSpec, view: str, facts: list[dict], versions: dict[str, int]
) -> list[dict]:
    """The output rows of `facts`, enriched with the dimensions at `versions`."""
    enrich = spec.views[view].enrich
    out = [dict(f) for f in facts]
    for d in enrich.dimensions:
        key = spec.sources[d.table].key
        rows = source_rows(lake, spec, d.table, versions[d.table])
        path = spec.sources[d.table].path
        columns = list(
            d.columns or [c for c in lake.spark.read.format("delta").load(path).columns if c not in key]
        )
        by_key = {key_of(r, key): r for r in rows}
        kept = []
        for row in out:
            fk = key_of(row, d.fk)
            match = None if null_key(fk) else by_key.get(fk)
            if match is None and d.how is JoinHow.INNER:
                continue
            kept.append({**row, **{d.prefix + c: (match[c] if match else None) for c in columns}})
        out = kept
    return out


def lookup_model(
    lake: Lakehouse, spec: PipelineSpec, view: str, held: dict[Any, dict | None] | None, since: int
) -> dict[Any, dict | None]:
    """A `lookup` enrich in plain Python after a batch: each live fact as the batch that last
    changed its content enriched it (None: an inner dimension left it out). `held` is the model
    after the batch before (None: no batch before, every fact is enriched now) and `since` the
    fact table's version that batch pinned. The facts that a commit after `since` changed the
    content of are enriched with the dimensions at this batch's pins; a fact written back as it
    was is no such change (tests/content.py) and keeps its row; deleted facts leave."""
    enrich = spec.views[view].enrich
    key = spec.sources[enrich.fact].key
    versions = pinned(lake, spec, view)
    facts = source_rows(lake, spec, enrich.fact, versions[enrich.fact])
    if held is None:
        redo = {key_of(f, key) for f in facts}
    else:
        feed = change_feed(lake, enrich.fact, versions[enrich.fact])
        redo = changed_keys(feed, key, since, versions[enrich.fact])
    redone = [f for f in facts if key_of(f, key) in redo]
    fresh = {key_of(r, key): r for r in enriched(lake, spec, view, redone, versions)}
    return {
        key_of(f, key): fresh.get(key_of(f, key)) if key_of(f, key) in redo else (held or {})[key_of(f, key)]
        for f in facts
    }


def model_rows(model: dict[Any, dict | None]) -> list[dict]:
    """A model's output rows, in `output_rows`'s order."""
    rows = [r for r in model.values() if r is not None]
    return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))


# --- crashes ----------------------------------------------------------------------------------

CLI_TIMEOUT = 480  # a cold Spark JVM on a busy 2-core machine


def run_cli_with_failpoint(
    spec_file: str, failpoint: str = "after_output_merge", conf: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`lakejoin run --no-checks` in its own JVM, SIGKILLed at the failpoint (by default right
    after a batch's output write), with Spark settings `conf` (Spark's own `--conf`, through
    PYSPARK_SUBMIT_ARGS). Checks run before the output commit and are other tests' subject;
    without them the cold process does not import Great Expectations (about 15 s)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY")}
    env.update({FAILPOINT: failpoint, "GX_ANALYTICS_ENABLED": "False"})
    if conf:
        settings = " ".join(f"--conf {key}={value}" for key, value in conf.items())
        env["PYSPARK_SUBMIT_ARGS"] = f"{settings} pyspark-shell"
    return subprocess.run(
        [sys.executable, "-m", "lakejoin.cli", "run", spec_file, "--no-checks"],
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
        check=False,
    )


def status_blocks(output: str) -> dict[str, dict[str, str]]:
    """`lakejoin status` as {view: {"head": "batch 1, committed, full_refresh", "behind": ...}}:
    a block per view, its first line `view: head`, then a line per fact, its label right-aligned
    in the first 11 columns (a fact wrapped onto more lines has a blank label)."""
    blocks: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    label = ""
    for line in output.splitlines():
        if line.startswith(" ") and current is not None and line.strip():
            if line[:11].strip():
                label = line[:11].strip()
                current[label] = line[12:].strip()
            else:
                current[label] += line[12:].strip()
        elif ": " in line and not line.startswith(" "):
            name, _, head = line.partition(": ")
            current = blocks.setdefault(name, {"head": head.strip()})
    return blocks


def health_recount(lake: Lakehouse, spec: PipelineSpec, view: str) -> dict[str, dict[str, int | None]]:
    """A view's join health recounted in plain Python at the last committed pins (an enrich's
    as `propagate` keeps it), and what that batch logged (`health.*` metrics), side by side:
    `{"counted": ..., "logged": ...}`."""
    from lakejoin.spec.model import Duplicates, ViewKind

    record = batch_log(spec).last_committed(view)
    assert record is not None
    versions, definition = record.pinned_versions, spec.views[view]
    if definition.kind is ViewKind.FK_JOIN:
        join = definition.fk_join
        right = spec.sources[join.right]
        left_rows = source_rows(lake, spec, join.left, versions[join.left])
        keys = {key_of(r, right.key) for r in source_rows(lake, spec, join.right, versions[join.right])}
        fks = [key_of(r, join.fk) for r in left_rows]
        counted = {
            "health.missing_right": sum(not null_key(fk) and fk not in keys for fk in fks),
            "health.null_fk": sum(null_key(fk) for fk in fks),
            "health.rows": len(left_rows),
        }
    elif definition.kind is ViewKind.LIST_JOIN:
        join = definition.list_join
        right = spec.sources[join.right]
        lists = source_rows(lake, spec, join.left, versions[join.left])
        keys = {key_of(r, right.key) for r in source_rows(lake, spec, join.right, versions[join.right])}
        missing = []
        for row in lists:
            elements = list(row[join.list] or [])
            if join.duplicates is Duplicates.DROP:
                elements = list({repr(e): e for e in elements}.values())  # one of each
            found = [key_of(e, right.key) if isinstance(e, dict) else e for e in elements if e is not None]
            missing.append(sum(k not in keys for k in found))
        counted = {
            "health.missing_elements": sum(missing),
            "health.lists_with_missing": sum(n > 0 for n in missing),
            "health.rows": len(lists),
        }
    elif definition.kind is ViewKind.REKEY:
        rekey = definition.rekey
        masters = lake.rows_at(rekey.source, versions[rekey.source])
        claims: dict[Any, int] = {}
        for r in masters:
            if not null_key(key_of(r, rekey.key)):
                claims[key_of(r, rekey.key)] = claims.get(key_of(r, rekey.key), 0) + 1
        counted = {
            "health.conflicts": sum(n > 1 for n in claims.values()) if rekey.unique else 0,
            "health.null_keys": sum(null_key(key_of(r, rekey.key)) for r in masters),
            "health.rows": len(masters),
        }
    else:
        enrich = definition.enrich
        facts = source_rows(lake, spec, enrich.fact, versions[enrich.fact])
        missing_any = [False] * len(facts)
        for d in enrich.dimensions:
            key = spec.sources[d.table].key
            found = {key_of(r, key) for r in source_rows(lake, spec, d.table, versions[d.table])}
            for i, f in enumerate(facts):
                fk = key_of(f, d.fk)
                missing_any[i] |= not null_key(fk) and fk not in found
        counted = {"health.missing_dimension": sum(missing_any), "health.rows": len(facts)}
    return {"counted": counted, "logged": {k: record.metrics.get(k) for k in counted}}


def drift(path: str, predicate: str, updates: dict[str, str] | None = None) -> None:
    """Make the output at `path` wrong in a way its log cannot explain: an UPDATE (or, with no
    `updates`, a DELETE) committed under the marker of its newest lakejoin batch commit (of
    another part, so that commit stays the batch commit), as a faulty lakejoin write would be.
    Someone's plain edit shows in the log and recomputes the view (engine/plan.replaced_inputs);
    this one only the audit, or the upsert's check of the rows it replaces, can find."""
    from dataclasses import replace

    from deltalake import CommitProperties, DeltaTable

    from lakejoin.delta.markers import BatchMarker

    table = DeltaTable(path)
    marker = next(m for c in table.history() if (m := BatchMarker.from_commit(c)) is not None)
    stamp = CommitProperties(custom_metadata={"userMetadata": replace(marker, part="drift").as_json()})
    if updates is None:
        table.delete(predicate, commit_properties=stamp)
    else:
        table.update(predicate=predicate, updates=updates, commit_properties=stamp)


@contextmanager
def found_by_spark(spark) -> Iterator[None]:  # noqa: ANN001 - a SparkSession
    """Batches whose keys and rows Spark finds, as in a batch of many keys: the driver's lookups
    are off (a list_join carries unchanged lists from the output only there)."""
    from lakejoin.delta import lookups

    spark.conf.set(lookups.ENABLED, "false")
    try:
        yield
    finally:
        spark.conf.unset(lookups.ENABLED)
