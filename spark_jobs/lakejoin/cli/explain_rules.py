"""The command line's rule of `lakejoin explain`: a key's values from the command line, each
converted to its column's type (truth tables in tests/unit/test_explain_rules.py). The rules of
the answer itself (a list's elements, what a commit did to a key, why a key is not in a view,
which master a rekey kept) are spec/explained.py's.

>>> key_values("orders", ("order_id", "day"), {"order_id": "long", "day": "date"}, ["7", "2026-11-02"])
(7, datetime.date(2026, 11, 2))
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from lakejoin.errors import BatchStateError, CommandError
from lakejoin.spec.model import Key, shown

INTEGERS = {"byte", "short", "integer", "long"}


def key_values(view: str, key: Key, types: Mapping[str, str], texts: Sequence[str]) -> tuple[Any, ...]:
    """The values of `texts` for the columns of the view's `key`, each converted to its
    column's type (`types`, as the output's Delta schema names them)."""
    usage = f"lakejoin explain SPEC {view} " + " ".join(f"<{c}>" for c in key)
    if len(texts) != len(key):
        raise CommandError(
            f"view '{view}' is keyed by {shown(key)}: {len(key)} value(s) expected, one per key "
            f"column in that order; got {len(texts)}: {' '.join(repr(t) for t in texts)}",
            where="lakejoin explain",
            fix=f"give one value per key column: {usage}",
        )
    absent = [c for c in key if c not in types]
    if absent:
        raise BatchStateError(
            f"the output of view '{view}' has no column {shown(tuple(absent))} of the key {shown(key)} "
            "the spec gives it: the view's definition changed since that output version was written",
            where=f"view '{view}' output",
            fix=f"run the view (a changed key rebuilds it), or explain an output version written "
            f"under today's key: {usage} --at VERSION",
        )
    return tuple(_converted(view, c, types[c], t, usage) for c, t in zip(key, texts, strict=True))


def _converted(view: str, column: str, kind: str, text: str, usage: str) -> Any:
    where = f"lakejoin explain, view '{view}', key column '{column}' ({kind})"
    try:
        if kind in INTEGERS:
            return int(text)
        if kind == "date":
            return datetime.date.fromisoformat(text)
    except ValueError:
        wanted = "a whole number" if kind in INTEGERS else "a date as YYYY-MM-DD"
        raise CommandError(
            f"{text!r} is not of type {kind}", where=where, fix=f"give {wanted} for {column}: {usage}"
        ) from None
    if kind == "string":
        return text
    raise CommandError(
        f"explain looks keys up by whole numbers, strings and dates; '{column}' is a {kind}",
        where=where,
        fix="read the row with Spark or delta-rs (DeltaTable(path).to_pyarrow_table(filters=...))",
    )
