"""A view's trust settings in the spec (issue 40): the limits on its join health per kind, and
its continuous audit; a wrong one says what, where and what to write."""

from __future__ import annotations

import pytest

from lakejoin.errors import SpecError
from lakejoin.spec.model import Audit, Limit, OnBreach
from lakejoin.spec.parse import parse_spec

pytestmark = pytest.mark.unit

SPEC = """\
pipeline: shop
storage: /lake/store
sources:
  orders: {{path: /lake/orders, key: order_id}}
  customers: {{path: /lake/customers, key: customer_id}}
views:
  orders_customers:
    fk_join: {{left: orders, right: customers, fk: customer_id, how: inner}}
{settings}
"""


def view(settings: str):  # noqa: ANN201
    return parse_spec(SPEC.format(settings=settings), "shop.yaml").views["orders_customers"]


def error_of(settings: str) -> SpecError:
    with pytest.raises(SpecError) as error:
        view(settings)
    return error.value


def test_limits_per_measure_with_what_a_breach_does():
    found = view(
        "    health:\n"
        "      missing_right: {max_share: 0.01, on_breach: fail}\n"
        "      null_fk: {max_rows: 100}\n"
        "      waiting: {max_batches: 3, max_hours: 24}\n"
    )
    assert found.health == (
        Limit("missing_right", max_share=0.01, on_breach=OnBreach.FAIL),
        Limit("null_fk", max_rows=100, on_breach=OnBreach.WARN),
        Limit("waiting", max_batches=3, max_hours=24.0),
    )


def test_the_audit_checks_one_of_64_slices_within_a_tenth_of_the_batch_time_unless_told_otherwise():
    assert view("").audit == Audit(slices=64, every=None, budget=0.1, enabled=True)
    assert view("").health == ()
    assert view("    audit: {slices: 8, every: 4}\n").audit == Audit(slices=8, every=4)
    assert view("    audit: {budget: 0.25}\n").audit == Audit(slices=64, budget=0.25)
    assert view("    audit: off\n").audit.enabled is False


@pytest.mark.parametrize(
    ("settings", "where", "said", "fix"),
    [
        (
            "    health:\n      missing_elements: {max_rows: 1}\n",
            "views.orders_customers.health.missing_elements",
            "a fk_join view has no health measure 'missing_elements'",
            "missing_right: left rows whose fk finds no right row",
        ),
        (
            "    health:\n      missing_right: {max_share: 2}\n",
            "views.orders_customers.health.missing_right.max_share",
            "'max_share' must be a share from 0 to 1, found 2",
            "",
        ),
        (
            "    health:\n      missing_right: {on_breach: fail}\n",
            "views.orders_customers.health.missing_right",
            "a limit on 'missing_right' sets none of max_share, max_rows",
            "set one: max_share",
        ),
        (
            "    health:\n      waiting: {max_share: 0.1}\n",
            "views.orders_customers.health.waiting.max_share",
            "unknown setting 'max_share'",
            "max_batches, max_hours, on_breach",
        ),
        (
            "    health:\n      null_fk: {max_rows: 3, on_breach: page}\n",
            "views.orders_customers.health.null_fk.on_breach",
            "unknown on_breach 'page'",
            "use fail or warn",
        ),
        (
            "    audit: {slices: 0}\n",
            "views.orders_customers.audit.slices",
            "'slices' must be a whole number, 1 or more",
            "",
        ),
        (
            "    audit: {budget: 0}\n",
            "views.orders_customers.audit.budget",
            "'budget' must be a share above 0 and at most 1, found 0",
            "",
        ),
        (
            "    audit: {every: 2, budget: 0.2}\n",
            "views.orders_customers.audit",
            "'every' and 'budget' both say which batches audit",
            "keep one",
        ),
    ],
)
def test_a_wrong_setting_says_what_where_and_what_to_write(settings, where, said, fix):
    error = error_of(settings)
    assert error.key == where
    assert said in error.what
    assert fix in error.fix
    assert error.line is not None  # the line of the spec it is on (or its parent's)
