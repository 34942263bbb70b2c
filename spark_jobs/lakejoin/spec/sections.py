"""The settings of a spec's own sections, declared once (spec/settings.py): the top level, a
source, `spark:`, and a view's settings beside its kind's block. The parser (spec/parse.py) takes
their keys and defaults from here; spec/json_schema.py writes the JSON Schema from them. Each
kind's block is declared in its module (spec/kinds/<kind>.py), `health:` and `audit:` in
spec/trust.py.

>>> sorted(SPARK.names())
['conn_id', 'master', 'remote', 'run']
>>> VIEW["on_input_replaced"].default
<OnInputReplaced.FULL_REFRESH: 'full_refresh'>
"""

from __future__ import annotations

from lakejoin.spec.model import OnDefinitionChange, OnInputReplaced, SparkRun, SparkSettings
from lakejoin.spec.settings import Setting, Settings, Shape
from lakejoin.spec.trust import AUDIT

SOURCE = Settings(
    "a Delta table with its change feed on",
    (
        Setting("path", Shape.TEXT, "the Delta table (relative: to this file's folder)", required=True),
        Setting("key", Shape.KEY, "the column(s) that identify a row, in order", required=True),
    ),
)
SPARK = Settings(
    "how an Airflow task runs Spark",
    (
        Setting(
            "run",
            Shape.CHOICE,
            "local: Spark in the task's own process; submit: spark-submit to a cluster",
            default=SparkRun.LOCAL,
            choices=SparkRun,
        ),
        Setting(
            "conn_id",
            Shape.TEXT,
            "the Airflow Spark connection that 'run: submit' submits through",
            default=SparkSettings.conn_id,
            only_with=("run", SparkRun.SUBMIT.value),
        ),
        Setting(
            "master",
            Shape.TEXT,
            "the Spark master URL of 'run: local' (default: local[*])",
            only_with=("run", SparkRun.LOCAL.value),
        ),
        Setting(
            "remote",
            Shape.TEXT,
            "a Spark Connect URL (sc://host:port) of 'run: local'",
            only_with=("run", SparkRun.LOCAL.value),
        ),
    ),
)
POLICY = "full_refresh: the next batch recomputes every key; fail: stop until a run with --full-refresh"
VIEW = Settings(
    "a view: one kind's block, and these settings beside it",
    (
        Setting("path", Shape.TEXT, "its output Delta table (default: <storage>/views/<view name>)"),
        Setting(
            "on_definition_change",
            Shape.CHOICE,
            f"its definition changed since its last batch: {POLICY}",
            default=OnDefinitionChange.FULL_REFRESH,
            choices=OnDefinitionChange,
        ),
        Setting(
            "on_input_replaced",
            Shape.CHOICE,
            f"an input is not the table its last batch read: {POLICY}",
            default=OnInputReplaced.FULL_REFRESH,
            choices=OnInputReplaced,
        ),
        Setting("health", Shape.HEALTH, "limits on the join's health measures, each with what a breach does"),
        Setting("audit", Shape.SECTION, AUDIT.about, of=AUDIT, also=(False, "off")),
    ),
)
PIPELINE = Settings(
    "a lakejoin pipeline: source tables, and the views kept from them",
    (
        Setting(
            "pipeline", Shape.NAME, "the pipeline's name (its Airflow DAG is lakejoin_<name>)", required=True
        ),
        Setting("schedule", Shape.TEXT, "when Airflow runs its batches (cron, or a preset such as @hourly)"),
        Setting(
            "storage", Shape.TEXT, "the folder of its views' outputs and lakejoin's own state", required=True
        ),
        Setting("sources", Shape.NAMED, "the source tables, by name", required=True, of=SOURCE),
        Setting(
            "views", Shape.VIEWS, "the views, by name; a view may read another view", required=True, of=VIEW
        ),
        Setting("spark", Shape.SECTION, SPARK.about, of=SPARK),
    ),
)
