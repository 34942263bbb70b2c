"""`python -m bench.state_choice`: does each view kind's state table pay for itself? (issue 23)

lakejoin kept state per view: fk_join and enrich a routing index (right key -> left keys),
list_join composite rows (left key, position, element), rekey an index of every master row's
derived key and last-change version; rekey alone keeps it now (docs/decisions.md), and the bench
builds the others itself to measure them. The alternative the issue names: the pinned left table is
itself a right-key -> left-key index (a narrow scan of its key and fk columns finds the rows a
right change reaches), and rekey's old derived keys are in the change feed's pre-images.

On the benchmark's tables, after a first batch of every view (which fills the state), this times
the lookup a batch makes both ways, for a tiny set of changed right keys (2) and for 1 % of the
right table, each the best of three runs on a warm JVM; and, for rekey, reading the old derived
keys of changed masters from the index against reading the change feed's pre-images. Every pair
is checked to find the same keys. Figures go to `<out>/bench/state_choice.json` and `.md`.

    python -m bench.state_choice --orders 1500000 --orders 15000000 --out docs
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RUNS = 3
Reads = Callable[[bool], "DataFrame"]  # a kind's routes, from its state table (True) or not
DriverReads = Callable[[bool, list[Any]], set[Any]]  # the same lookup on the driver


def best_of(lookup: Callable[[], DataFrame]) -> tuple[float, int]:
    """The fastest of RUNS counts of `lookup()`'s rows, and the count."""
    times, count = [], 0
    for _ in range(RUNS):
        started = time.perf_counter()
        count = lookup().count()
        times.append(time.perf_counter() - started)
    return round(min(times), 3), count


def changed_keys(spark: SparkSession, n: int, share: float, column: str, seed: int) -> DataFrame:
    """Right keys a batch changed: 2 of the highest ids (a tiny batch; the low ids are the
    popular ones), or a seeded random `share` of [0, n)."""
    from pyspark.sql import functions as F

    if share == 0:
        return spark.range(n - 2, n).select(F.col("id").alias(column))
    picked = spark.range(0, n).where(F.rand(seed) < share)
    return picked.select(F.col("id").alias(column)).localCheckpoint()


def compare(
    name: str,
    kept: Callable[[], DataFrame],
    derived: Callable[[], DataFrame],
    on_driver: tuple[Callable[[], set[Any]], Callable[[], set[Any]]] | None = None,
) -> dict[str, Any]:
    """Time both lookups and check they find the same keys; with `on_driver`, the same two
    lookups made on the driver with delta-rs (lookups.py: lakejoin's read of a batch of at most
    `spark.lakejoin.lookups.maxKeys` keys), each giving the set of keys it found."""
    kept_s, kept_n = best_of(kept)
    derived_s, derived_n = best_of(derived)
    same = kept().exceptAll(derived()).isEmpty() and derived().exceptAll(kept()).isEmpty()
    row = {"lookup": name, "state_s": kept_s, "without_state_s": derived_s, "keys": kept_n, "same": same}
    if on_driver is not None:
        expected = {r[0] for r in kept().collect()}
        for column, lookup in zip(("state_driver_s", "without_state_driver_s"), on_driver, strict=True):
            row[column], found = driver_best_of(lookup)
            if found != expected:
                raise SystemExit(f"{name}: {column} found {len(found)} keys, Spark {len(expected)}")
    print(row, flush=True)
    if kept_n != derived_n or not same:
        raise SystemExit(f"{name}: the two lookups disagree ({kept_n} against {derived_n} keys)")
    return row


def driver_best_of(lookup: Callable[[], set[Any]]) -> tuple[float, set[Any]]:
    """The fastest of RUNS calls of `lookup()`, and what it found."""
    times, found = [], set()
    for _ in range(RUNS):
        started = time.perf_counter()
        found = lookup()
        times.append(time.perf_counter() - started)
    return round(min(times), 3), found


def driver_keys(path: str, column: str, values: list[Any], wanted: str) -> set[Any]:
    """The distinct `wanted` of the rows of the table at `path` whose `column` is in `values`."""
    from deltalake import DeltaTable

    from lakejoin.delta import lookups

    keys = [(v,) for v in values]
    rows = lookups.read_keys(path, int(DeltaTable(path).version()), (column,), keys, [wanted])
    assert rows is not None
    return set(rows.column(wanted).to_pylist())


def measure(spark: SparkSession, work: Path, orders: int, seed: int) -> list[dict[str, Any]]:
    from deltalake import DeltaTable
    from pyspark.sql import functions as F

    from bench.changes import ChangeMaker
    from bench.tables import Sizes, write_sources
    from bench.variants import spec_for
    from lakejoin.delta import routing
    from lakejoin.delta.change_feed import read_change_feed
    from lakejoin.engine.batch import run_view
    from lakejoin.engine.kinds import view_logic
    from lakejoin.spec.layout import state_path
    from lakejoin.views import list_join

    shutil.rmtree(work, ignore_errors=True)
    sizes = Sizes.at(orders)
    paths = write_sources(spark, work, sizes, seed)
    spec = spec_for("state_choice", work / "lakejoin", paths)
    for view in spec.view_order():
        run_view(spark, spec, view)

    def load(path: str) -> DataFrame:
        return spark.read.format("delta").load(path)

    def routing_index(name: str, rows: DataFrame, by: str = routing.LEFT_KEY) -> str:
        """A routing index as lakejoin kept one for fk_join and enrich until session 33 (one row
        per left key and its routes, laid out by left key), and list_join's composite rows until
        session 34 (laid out by element): they keep none now, so the bench builds them to
        measure that way."""
        from lakejoin.delta.key_ranges import write_laid_out

        path = str(work / "routing" / name)
        write_laid_out(rows, path, [by])
        return path

    orders_index = routing_index(
        "orders_customers",
        load(paths["orders"]).select(
            F.col("order_id").alias(routing.LEFT_KEY), F.col("customer_id").alias(routing.RIGHT_KEY)
        ),
    )
    enriched_index = routing_index(
        "orders_enriched",
        load(spec.views["orders_customers"].path).select(
            F.col("order_id").alias(routing.LEFT_KEY), F.col("customer_nation_id").alias("nation_route")
        ),
    )

    products = load(paths["products"])
    composite_index = routing_index(
        "products_tagged",
        list_join.composite_rows(products, spec.views["products_tagged"].list_join, ("product_id",)),
        list_join.ELEMENT,
    )

    def state(view: str, name: str = "_routing") -> str:
        return view_logic(spec, spec.views[view]).state_tables(state_path(spec, spec.views[view]))[name]

    def reached(routes: DataFrame, changed: DataFrame, on: str, left: str) -> DataFrame:
        """The left keys whose routes hold a changed right key (distinct, as lakejoin's lookup)."""
        return routes.join(F.broadcast(changed), on=on, how="left_semi").select(left).distinct()

    # What each kind's lookup reads: its state table, or the pinned left table's own columns.
    def order_routes(kept: bool) -> DataFrame:
        if kept:
            return load(orders_index)
        orders = load(paths["orders"])
        return orders.select(
            F.col("order_id").alias(routing.LEFT_KEY), F.col("customer_id").alias(routing.RIGHT_KEY)
        )

    def product_elements(kept: bool) -> DataFrame:
        if kept:
            return load(composite_index)
        return products.select(
            F.col("product_id").alias(list_join.LEFT_KEY), F.explode("tag_ids").alias(list_join.ELEMENT)
        )

    # The same lookups on the driver (delta-rs), given the changed right keys as a list.
    def order_routes_on_driver(kept: bool, values: list[Any]) -> set[Any]:
        if kept:
            return driver_keys(orders_index, routing.RIGHT_KEY, values, routing.LEFT_KEY)
        return driver_keys(paths["orders"], "customer_id", values, "order_id")

    def product_elements_on_driver(kept: bool, values: list[Any]) -> set[Any]:
        if kept:
            return driver_keys(composite_index, list_join.ELEMENT, values, list_join.LEFT_KEY)
        version = DeltaTable(paths["products"]).version()
        found = routing.holding_on_driver(
            paths["products"],
            version,
            [(v,) for v in values],
            "tag_ids",
            most=10**9,
            left_key=("product_id",),
        )
        return {k[0] for k in found or ()}

    lookups: list[tuple[str, int, Reads, DriverReads, str, str]] = [
        (
            "fk_join: orders reached by {} of customers",
            sizes.customers,
            order_routes,
            order_routes_on_driver,
            routing.RIGHT_KEY,
            routing.LEFT_KEY,
        ),
        (
            "list_join: products reached by {} of tags",
            sizes.tags,
            product_elements,
            product_elements_on_driver,
            list_join.ELEMENT,
            list_join.LEFT_KEY,
        ),
    ]
    rows = []
    for label, share in (("2 keys", 0.0), ("1 %", 0.01)):
        for title, count, reads, on_driver, on, left in lookups:
            changed = changed_keys(spark, count, share, on, seed)
            values = sorted(r[0] for r in changed.collect())
            kept = partial(reached, reads(True), changed, on, left)
            derived = partial(reached, reads(False), changed, on, left)
            driver = (partial(on_driver, True, values), partial(on_driver, False, values))
            rows.append(compare(title.format(label), kept, derived, driver))
    # enrich: one nation changed (each of the 25 reaches 4 % of the facts).
    nation = spark.createDataFrame([(3,)], "nation int")
    route = "nation_route"
    rows.append(
        compare(
            "enrich: facts reached by 1 nation",
            lambda: (
                load(enriched_index)
                .join(F.broadcast(nation), F.col(route) == F.col("nation"), "left_semi")
                .select(routing.LEFT_KEY)
            ),
            lambda: (
                load(spec.views["orders_customers"].path)
                .join(F.broadcast(nation), F.col("customer_nation_id") == F.col("nation"), "left_semi")
                .select(F.col("order_id").alias(routing.LEFT_KEY))
            ),
        )
    )
    # rekey: the old derived keys (emails) of the customers a batch changes.
    before = sizes.customers - 1
    start = DeltaTable(paths["customers"]).version()
    changed = spark.range(before - 99, before + 1).select(F.col("id").alias("customer_id"))
    maker = ChangeMaker(spark, paths, sizes, seed)
    maker.merge("customers", maker.updates("customers", changed.select(F.col("customer_id").alias("id")), 7))
    end = DeltaTable(paths["customers"]).version()
    rows.append(
        compare(
            "rekey: old emails of 100 changed customers",
            lambda: (
                load(state("customers_by_email"))
                .join(F.broadcast(changed), on="customer_id", how="left_semi")
                .select("customer_id", "email")
            ),
            lambda: (
                read_change_feed(spark, paths["customers"], start + 1, end)
                .where(F.col("_change_type").isin("update_preimage", "delete"))
                .select("customer_id", "email")
            ),
        )
    )
    return rows


def main(argv: list[str] | None = None) -> int:
    from bench.measure import lakejoin_commit
    from lakejoin.delta.session import spark_session

    parser = argparse.ArgumentParser(prog="python -m bench.state_choice", description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, action="append", help="order counts (repeat the flag)")
    parser.add_argument("--out", default="build/state-choice")
    parser.add_argument("--work", default="build/state-choice-lake")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--driver-memory", default="10g")
    args = parser.parse_args(argv)
    spark = spark_session(app_name="lakejoin-state-choice", extra={"spark.driver.memory": args.driver_memory})
    record: dict[str, Any] = {"commit": lakejoin_commit(), "sizes": {}}
    for orders in args.orders or [1_500_000]:
        record["sizes"][str(orders)] = measure(spark, Path(args.work), orders, args.seed)
    spark.stop()
    out = Path(args.out) / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "state_choice.json").write_text(json.dumps(record, indent=2) + "\n")
    lines = [
        "# Does a state table pay for itself? (issue 23)",
        "",
        f"Written by `python -m bench.state_choice` at lakejoin {record['commit']}. Seconds: the best "
        f"of {RUNS} runs of each lookup on a warm JVM, this 2-core machine; every pair found the same keys.",
        "",
        "Spark: the lookup as a Spark job; driver: the same read with delta-rs (lookups.py), which "
        "lakejoin makes for a batch of at most `spark.lakejoin.lookups.maxKeys` keys.",
        "",
        "| orders | lookup | state table, Spark | without (left table / change feed), Spark "
        "| state table, driver | left table, driver | keys |",
        "|---|---|---|---|---|---|---|",
    ]

    def seconds(row: dict[str, Any], column: str) -> str:
        return f"{row[column]:.2f}" if column in row else "-"

    for orders, rows in record["sizes"].items():
        for row in rows:
            lines.append(
                f"| {int(orders):,} | {row['lookup']} | {seconds(row, 'state_s')} "
                f"| {seconds(row, 'without_state_s')} | {seconds(row, 'state_driver_s')} "
                f"| {seconds(row, 'without_state_driver_s')} | {row['keys']} |"
            )
    (out / "state_choice.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
