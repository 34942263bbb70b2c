import pytest

from tests.lakehouse import MERCHANTS, PRODUCTS

pytestmark = pytest.mark.delta


def test_incremental_equals_recompute_over_batches(lake):
    lake.create("merchants", MERCHANTS, [("m1", "Acme", "a.png"), ("m2", "Bolt", "b.png")])
    lake.create("products", PRODUCTS, [("p1", "pen", 1.0, "m1"), ("p2", "cup", 2.0, "m2")])
    spec = lake.spec("left")
    first = lake.run(spec)
    assert first.outcome.value == "committed"
    assert lake.output(spec) == lake.expected(spec)
    lake.upsert("merchants", "merchant_id", [("m1", "Acme Inc", "a.png")])
    lake.upsert("products", "product_id", [("p2", "cup", 2.0, "m1"), ("p3", "lid", 3.0, None)])
    second = lake.run(spec)
    assert second.affected_keys == 3
    assert lake.output(spec) == lake.expected(spec)
    assert lake.run(spec).outcome.value == "skipped"
