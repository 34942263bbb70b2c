"""The parts several view kinds' spec rules share, below every kind's own module.

>>> carried_columns(None, ["merchant_id", "name", "logo"], ("merchant_id",))
['name', 'logo']
>>> carried_columns(("logo",), ["merchant_id", "name", "logo"], ("merchant_id",))
['logo']
"""

from __future__ import annotations

from collections.abc import Iterable

from lakejoin.spec.model import Key


def carried_columns(declared: tuple[str, ...] | None, columns: Iterable[str], key: Key) -> list[str]:
    """The columns of a joined input (a right table, a dimension) that the output carries: the
    declared ones, or all of `columns` but the input's key."""
    if declared:
        return list(declared)
    return [c for c in columns if c not in key]
