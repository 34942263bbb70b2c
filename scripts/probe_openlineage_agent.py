"""Does OpenLineage's Spark agent work on lakejoin's Spark and Delta (issue 39)?

Starts a local Spark session with Delta's jars and the agent (`io.openlineage:openlineage-spark_2.13`,
resolved by Spark's Ivy into a folder of its own), its events written to a file, and runs the
three kinds of work a lakejoin batch does:
1. a plain read of a Delta table written to another (a full refresh);
2. a read of a change data feed (`readChangeFeed`) written to another table (the incremental
   read);
3. a MERGE into a Delta table (the public write path).
Then prints, for each COMPLETE event of the agent, its job, its inputs and its outputs, and the
agent's errors from the driver's log. Not a test (it needs a registry to fetch the agent):

    .venv/bin/python scripts/probe_openlineage_agent.py [--version 1.53.0]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", default="1.53.0", help="openlineage-spark's version")
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession

    from lakejoin.delta.jars import delta_package, jar_files

    work = Path(tempfile.mkdtemp(prefix="ol-agent-"))
    events = work / "events.jsonl"
    packages = [f"io.openlineage:openlineage-spark_2.13:{args.version}"]
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("probe-openlineage-agent")
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.jars.ivy", str(work / "ivy"))
        .config("spark.extraListeners", "io.openlineage.spark.agent.OpenLineageSparkListener")
        .config("spark.openlineage.transport.type", "file")
        .config("spark.openlineage.transport.location", str(events))
        .config("spark.openlineage.namespace", "probe")
    )
    files = jar_files()
    if files:
        builder = builder.config("spark.jars", ",".join(files))
    else:
        packages.append(delta_package())
    spark = builder.config("spark.jars.packages", ",".join(packages)).getOrCreate()
    print(f"Spark {spark.version}; agent {args.version}; events in {events}", flush=True)

    source, full, changes, merged = (str(work / n) for n in ("source", "full", "changes", "merged"))
    spark.sql(
        f"CREATE TABLE delta.`{source}` (id BIGINT, name STRING) USING delta "
        "TBLPROPERTIES (delta.enableChangeDataFeed = true)"
    )
    spark.sql(f"INSERT INTO delta.`{source}` VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql(f"UPDATE delta.`{source}` SET name = 'B' WHERE id = 2")
    steps = {}
    spark.sparkContext.setJobGroup("full", "full")
    spark.read.format("delta").load(source).write.format("delta").save(full)
    spark.sparkContext.setJobGroup("changes", "changes")
    feed = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 2)
    feed = feed.load(source)
    feed.write.format("delta").save(changes)
    spark.sparkContext.setJobGroup("merge", "merge")
    spark.read.format("delta").load(full).limit(0).write.format("delta").save(merged)
    spark.sql(
        f"MERGE INTO delta.`{merged}` t USING delta.`{source}` s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    spark.stop()

    if not events.exists():
        print("the agent wrote no event")
        return 1
    for line in events.read_text().splitlines():
        event = json.loads(line)
        if event.get("eventType") != "COMPLETE":
            continue
        name = event["job"]["name"]
        inputs = [i["name"] for i in event.get("inputs", [])]
        outputs = [o["name"] for o in event.get("outputs", [])]
        if inputs or outputs:
            steps.setdefault(name, []).append((inputs, outputs))
            print(f"{name}\n  inputs:  {inputs}\n  outputs: {outputs}")
    for path, label in ((full, "plain read"), (changes, "change feed read"), (merged, "MERGE")):
        read = [i for runs in steps.values() for i, o in runs if any(x.endswith(path) for x in o)]
        print(f"{label}: output seen {bool(read)}; inputs {sorted({x for i in read for x in i}) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
