"""The plan's type names (delta/type_names.py, no pyspark) are pyspark's `simpleString()` to the
byte: they go into every view's recorded definition, whose fingerprint a changed name would
change. pyspark's types need no JVM; the tables are written by Spark, as users' are."""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable
from pyspark.sql.types import StructType

from lakejoin.delta.type_names import column_types

pytestmark = pytest.mark.delta

COLUMNS = (
    "id BIGINT, n INT, s SMALLINT, t TINYINT, f FLOAT, d DOUBLE, b BOOLEAN, bin BINARY, day DATE, "
    "at TIMESTAMP, local TIMESTAMP_NTZ, price DECIMAL(12,3), whole DECIMAL(10,0), name STRING, "
    "code CHAR(3), label VARCHAR(20), tags ARRAY<STRING>, nested ARRAY<STRUCT<k: INT, v: ARRAY<BIGINT>>>, "
    "attrs MAP<STRING, DECIMAL(5,2)>, odd STRUCT<ab: INT, c: MAP<INT, ARRAY<DATE>>>"
)


def test_the_names_are_pysparks_for_every_type_a_delta_table_holds(spark, tmp_path):
    path = str(tmp_path / "typed")
    spark.sql(f"CREATE TABLE delta.`{path}` ({COLUMNS}) USING delta")
    schema = json.loads(DeltaTable(path).schema().to_json())

    expected = {f.name: f.dataType.simpleString() for f in StructType.fromJson(schema).fields}

    assert column_types(schema) == expected
    assert expected["id"] == "bigint" and expected["price"] == "decimal(12,3)"  # the test reads real names
