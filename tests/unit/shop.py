"""A spec with one view of each kind, for the unit tests (parsed, no table behind it)."""

from __future__ import annotations

from lakejoin.spec.model import PipelineSpec
from lakejoin.spec.parse import parse_spec

SHOP = """\
pipeline: shop
storage: ./store
sources:
  products:  {path: ./products,  key: product_id}
  merchants: {path: ./merchants, key: merchant_id}
  persons:   {path: ./persons,   key: person_id}
  addresses: {path: ./addresses, key: address_id}
  purchases: {path: ./purchases, key: purchase_id}
  customers: {path: ./customers, key: customer_id}
views:
  display_products:
    fk_join: {left: products, right: merchants, fk: merchant_id, right_prefix: merchant_}
  logos:
    fk_join: {left: products, right: merchants, fk: merchant_id, right_columns: [logo], how: inner}
  person_addresses:
    list_join: {left: persons, list: address_ids, right: addresses, into: addresses}
  merchants_by_name:
    rekey: {source: merchants, key: display_name, columns: [country, display_name, merchant_id]}
  merchants_named:
    rekey: {source: merchants, key: display_name, unique: false}
  looked_up:
    enrich:
      fact: purchases
      dimensions:
        - {table: customers, fk: customer_id, prefix: customer_}
        - {table: display_products, fk: product_id, prefix: product_, columns: [title]}
  propagated:
    enrich:
      fact: purchases
      mode: propagate
      dimensions: [{table: customers, fk: customer_id, prefix: customer_}]
"""


def shop() -> PipelineSpec:
    return parse_spec(SHOP, "shop.yaml")
