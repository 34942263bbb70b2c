"""A source's change range read on the driver (delta-rs) or by Spark: the same net changes.

A batch reads a range whose commits' metrics count few change rows on the driver
(engine/changes.py). These tests write one table's history with every writer a source meets
(Spark's append, MERGE, UPDATE, DELETE and overwrite, on deletion vectors; delta-rs's MERGE and
DELETE), and after each commit compare, for the ranges that end there: the net changes of the
driver's read and of Spark's read, and the change rows the commits' metrics count with the rows
Spark's change feed holds.
"""

from __future__ import annotations

import pytest

from lakejoin.delta.change_feed import (
    logged_change_rows,
    net_changes,
    net_frame,
    net_rows,
    read_change_feed,
    read_on_driver,
)
from lakejoin.delta.identity import TableLog

pytestmark = pytest.mark.delta

SCHEMA = "id long, name string, price double, tags array<string>"


def _sorted(rows) -> list[tuple]:
    return sorted((tuple(r) for r in rows), key=repr)


def _history(spark, path: str) -> list:
    """Commits of every writer a source meets, each a function that writes one."""
    from delta.tables import DeltaTable
    from deltalake import DeltaTable as Rs

    def frame(rows):
        return spark.createDataFrame(rows, SCHEMA)

    def merge(rows):
        target = DeltaTable.forPath(spark, path).alias("t")
        target.merge(
            frame(rows).alias("s"), "t.id = s.id"
        ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()

    def rs_merge(rows):
        (
            Rs(path)
            .merge(frame(rows).toArrow(), "t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )

    return [
        lambda: (
            frame([(i, f"n{i}", float(i), ["a"]) for i in range(1, 9)])
            .write.format("delta")
            .mode("append")
            .save(path)
        ),
        lambda: merge([(2, "two", 2.5, ["b", "c"]), (20, "new", 1.0, None)]),
        lambda: DeltaTable.forPath(spark, path).update("id = 3", {"price": "price + 1"}),
        lambda: DeltaTable.forPath(spark, path).delete("id IN (4, 5)"),
        lambda: merge([(6, "n6", 6.0, ["a"])]),  # written back as it was: no change of content
        lambda: rs_merge([(7, "seven", 7.0, []), (30, "rs", 3.0, ["x"])]),
        lambda: Rs(path).delete("id = 8"),
        lambda: frame([(40, "forty", 4.0, None)]).write.format("delta").mode("append").save(path),
        lambda: (
            spark.read.format("delta")
            .load(path)
            .where("id <> 1")
            .write.format("delta")
            .mode("overwrite")
            .save(path)
        ),
    ]


def test_the_driver_and_spark_read_the_same_changes(spark, tmp_path) -> None:
    # Deletion vectors on: Spark's UPDATE, DELETE and MERGE mark rows deleted in place and write
    # the change rows apart (the property histories' tables, without them, cover the rewrites).
    path = str(tmp_path / "t")
    spark.sql(
        f"CREATE TABLE delta.`{path}` ({SCHEMA}) USING delta TBLPROPERTIES "
        "('delta.enableChangeDataFeed' = 'true', 'delta.enableDeletionVectors' = 'true')"
    )
    schema = spark.read.format("delta").load(path).schema
    counted = 0
    for write in _history(spark, path):
        write()
        log = TableLog.at(path)
        assert log is not None
        last = log.version
        # the range of this commit alone, of the last three, and of the whole history
        for first in sorted({last, max(last - 2, 1), 1}):
            spark_feed = read_change_feed(spark, path, first, last)
            driver_feed = read_on_driver(path, first, last)
            assert driver_feed is not None, f"delta-rs declined versions {first}..{last}"
            # delta-rs's read netted on the driver, as a local relation, is Spark's read netted by Spark
            driver_net = net_frame(spark, net_rows(driver_feed, ("id",)), schema)
            assert _sorted(driver_net.collect()) == _sorted(net_changes(spark_feed, ("id",)).collect()), (
                f"versions {first}..{last}"
            )
            commits = [c for c in (log.commits_after(first - 1) or []) if int(c["version"]) <= last]
            logged = logged_change_rows(commits)
            if logged is not None:  # what the metrics count is what the feed holds
                assert logged == spark_feed.count(), f"versions {first}..{last}"
                counted += 1
    # Every range but those that reach the overwrite is counted from the metrics.
    assert counted >= 18


def test_a_schema_change_in_the_range_is_left_to_spark(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id long, v string) USING delta "
        "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')"
    )
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 'a')")
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (w string)")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (2, 'b', 'x')")
    assert read_on_driver(path, 1, 3) is None
    assert read_on_driver(path, 3, 3) is not None
