"""What the tests of bad input share: the spec texts and how they check an error's message.

tests/unit/test_spec_errors.py parses the malformed specs, tests/e2e/test_cli.py runs one through
`lakejoin run`, and tests/delta/test_bad_input.py runs specs that do not fit their tables. It
imports no pyspark, so that tests/unit can use it.
"""

from __future__ import annotations

import pytest

VIEW = "display_products"

GOOD = """\
pipeline: shop
storage: ./store
sources:
  products: {path: ./products, key: product_id}
  merchants: {path: ./merchants, key: merchant_id}
views:
  display_products:
    fk_join:
      left: products
      right: merchants
      fk: merchant_id
      how: left
"""
FK_JOIN = "views.display_products.fk_join"

LIST_AND_REKEY = """\
pipeline: lake
storage: {store}
sources:
  persons: {{path: {persons}, key: person_id}}
  addresses: {{path: {addresses}, key: address_id}}
  merchants: {{path: {merchants}, key: merchant_id}}
views:
  person_addresses:
    list_join:
      left: persons
      list: {list}
      right: addresses
      into: addresses
  merchants_by_name:
    rekey:
      source: merchants
      key: {rekey}
"""


def message_of(exc: pytest.ExceptionInfo) -> str:
    return " ".join(str(exc.value).split())


def assert_says(text: str, *phrases: str) -> None:
    missing = [p for p in phrases if p not in text]
    assert not missing, f"{missing} not in: {text}"
