"""engine/health.py's `ChangeCounts`: the join health a kind counts from one source's net
changes (the changed rows that had a null fk before the batch, and those that have one after),
written twice: Spark's aggregates, computed in the job that materialises a range Spark read,
and a plain count over the rows netted on the driver. One truth table holds both."""

from __future__ import annotations

import pytest
from pyspark.sql.types import StringType, StructField, StructType

from lakejoin.delta.change_feed import BEFORE, CHANGE, VERSION, net_frame
from lakejoin.engine.health import ChangeCounts

pytestmark = pytest.mark.steps

SCHEMA = StructType([StructField(c, StringType()) for c in ("id", "merchant_id", "tenant_id", "name")])
NULL_FK = ChangeCounts((("null_fk", ("merchant_id",)),))
NULL_PAIR = ChangeCounts((("null_fk", ("tenant_id", "merchant_id")),))


def change(id_: str, fk, tenant="t", *, kind="upsert", before=None):  # noqa: ANN001, ANN201
    """A net change row as `change_feed.net_rows` gives it; `before`: (fk, tenant), or None
    when the key had no row before the range."""
    was = (
        None if before is None else {"id": id_, "merchant_id": before[0], "tenant_id": before[1], "name": "n"}
    )
    return {
        "id": id_,
        "merchant_id": fk,
        "tenant_id": tenant,
        "name": "n",
        CHANGE: kind,
        VERSION: 3,
        BEFORE: was,
    }


CASES = [
    ([], NULL_FK, (0, 0)),
    ([change("p1", "m1")], NULL_FK, (0, 0)),  # an insert with an fk
    ([change("p1", None)], NULL_FK, (0, 1)),  # an insert with a null fk
    ([change("p1", "m1", before=(None, "t"))], NULL_FK, (1, 0)),  # a null fk filled in
    ([change("p1", None, before=("m1", "t"))], NULL_FK, (0, 1)),  # an fk nulled
    ([change("p1", None, before=(None, "t"))], NULL_FK, (1, 1)),  # null before and after
    ([change("p1", None, kind="delete", before=(None, "t"))], NULL_FK, (1, 0)),  # a delete has no after
    ([change("p1", "m1", tenant=None, before=("m1", None))], NULL_FK, (0, 0)),  # another column's null
    ([change("p1", "m1", tenant=None, before=("m1", None))], NULL_PAIR, (1, 1)),  # a null in any fk column
    ([change("p1", None), change("p2", None, before=(None, "t")), change("p3", "m3")], NULL_FK, (1, 2)),
]


@pytest.mark.parametrize(("net", "counts", "expected"), CASES)
def test_the_driver_counts_what_spark_counts(spark, net, counts, expected):
    on_spark = net_frame(spark, net, SCHEMA).agg(*counts.columns()).first().asDict()
    on_driver = counts.of_rows(net)

    assert on_driver == {k: int(v) for k, v in on_spark.items()}
    assert (on_driver["_lj_had_null_fk"], on_driver["_lj_has_null_fk"]) == expected


def test_a_source_no_measure_counts_from_counts_nothing():
    assert not ChangeCounts() and ChangeCounts().of_rows([change("p1", None)]) == {}
