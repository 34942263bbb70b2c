"""A tiny lakehouse for tests: source tables with CDF, a spec, batches, and the oracle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lakejoin.batches import BatchStatus
from lakejoin.runner import BatchSummary, batch_store, run_view
from lakejoin.spec import JoinHow, PipelineSpec, load_spec

PRODUCTS = "product_id STRING, name STRING, price DOUBLE, merchant_id STRING"
MERCHANTS = "merchant_id STRING, display_name STRING, photo_url STRING"


class Lakehouse:
    def __init__(self, spark, root: Path) -> None:
        self.spark = spark
        self.root = root

    def path(self, table: str) -> str:
        return str(self.root / table)

    # --- sources ------------------------------------------------------------------------
    def create(self, table: str, schema: str, rows: list[tuple], *, cdf: bool = True) -> None:
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

    def upsert(self, table: str, key: str, rows: list[tuple]) -> None:
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        target = DeltaTable.forPath(self.spark, self.path(table))
        schema = self.spark.read.format("delta").load(self.path(table)).schema
        source = self.spark.createDataFrame(rows, schema)
        (
            target.alias("t")
            .merge(source.alias("s"), F.col(f"t.{key}") == F.col(f"s.{key}"))
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )

    def delete(self, table: str, key: str, keys: list[Any]) -> None:
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        DeltaTable.forPath(self.spark, self.path(table)).delete(F.col(key).isin(keys))

    def append(self, table: str, rows: list[tuple]) -> None:
        schema = self.spark.read.format("delta").load(self.path(table)).schema
        self.spark.createDataFrame(rows, schema).write.format("delta").mode("append").save(self.path(table))

    # --- spec and runs ------------------------------------------------------------------
    def spec(
        self, how: str = "left", *, right_columns: str = "[display_name, photo_url]", extra: str = ""
    ) -> PipelineSpec:
        text = f"""\
pipeline: shop
storage: {self.root / "store"}
sources:
  products: {{path: {self.path("products")}, key: product_id}}
  merchants: {{path: {self.path("merchants")}, key: merchant_id}}
views:
  display_products:
    fk_join: {{left: products, right: merchants, fk: merchant_id, how: {how},
              right_columns: {right_columns}}}
{extra}"""
        file = self.root / "shop.yaml"
        file.write_text(text)
        return load_spec(file)

    def run(self, spec: PipelineSpec, view: str = "display_products", **kwargs: Any) -> BatchSummary:
        return run_view(self.spark, spec, view, **kwargs)

    def output(self, spec: PipelineSpec, view: str = "display_products") -> list[dict]:
        rows = self.spark.read.format("delta").load(spec.views[view].path).collect()
        key = spec.sources[spec.views[view].fk_join.left].key
        return sorted((r.asDict() for r in rows), key=lambda r: r[key])

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
        record = batch_store(self.spark, spec).last(view)
        assert record is not None and record.status is BatchStatus.COMMITTED
        join = spec.views[view].fk_join
        left, right = spec.sources[join.left], spec.sources[join.right]
        left_rows = self.rows_at(left.path.rsplit("/", 1)[-1], record.pinned_versions[left.name])
        right_rows = self.rows_at(right.path.rsplit("/", 1)[-1], record.pinned_versions[right.name])
        return fk_join_oracle(left_rows, right_rows, join=join, left_key=left.key, right_key=right.key)


def fk_join_oracle(
    left_rows: list[dict], right_rows: list[dict], *, join, left_key: str, right_key: str
) -> list[dict]:
    by_key = {r[right_key]: r for r in right_rows}
    columns = (
        list(join.right_columns)
        if join.right_columns
        else [c for c in (right_rows[0] if right_rows else {}) if c != right_key]
    )
    out = []
    for row in left_rows:
        match = by_key.get(row[join.fk]) if row[join.fk] is not None else None
        if match is None and join.how is JoinHow.INNER:
            continue
        out.append({**row, **{join.right_prefix + c: (match[c] if match else None) for c in columns}})
    return sorted(out, key=lambda r: r[left_key])
