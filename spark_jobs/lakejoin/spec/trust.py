"""A view's trust settings (issue 40): the limits on its join health, and its continuous audit.

```yaml
views:
  orders_customers:
    fk_join: {left: orders, right: customers, fk: customer_id, how: inner}
    health:
      missing_right: {max_share: 0.01, on_breach: fail}   # left rows whose fk finds no right row
      null_fk: {max_rows: 100}                             # on_breach: warn by default
      waiting: {max_batches: 3, max_hours: 24}            # the oldest row still waiting
    audit: {slices: 64, budget: 0.1}                       # the default; `every: N`; `audit: off`
```

Each kind has its own measures (its registry entry, spec/registry.py: `Kind.limits`); `waiting`
belongs to every kind that has one. A limit is a share of the rows of the kind's first input
(fk_join's and list_join's left rows, enrich's facts, rekey's masters), a count of rows, or (for
`waiting`) an age in batches or hours; `fail` stops the batch before its commit, `warn` reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lakejoin.spec.kind import WAITING
from lakejoin.spec.model import BUDGET, SLICES, Audit, Limit, OnBreach, ViewKind
from lakejoin.spec.settings import Setting, Settings, Shape
from lakejoin.spec.yaml_lines import SpecReader, describe

ON_BREACH = Setting(
    "on_breach",
    Shape.CHOICE,
    "fail: stop the batch before its commit; warn: report it",
    default=OnBreach.WARN,
    choices=OnBreach,
)
# A limit on a count of rows (one of them at least), and on `waiting`'s age.
AMOUNT_LIMIT = Settings(
    "a limit on this measure",
    (
        Setting(
            "max_share", Shape.NUMBER, "at most this share of the kind's first input's rows", least=0, most=1
        ),
        Setting("max_rows", Shape.WHOLE, "at most this many rows", least=0),
        ON_BREACH,
    ),
    one_of=("max_share", "max_rows"),
)
AGE_LIMIT = Settings(
    "a limit on the age of the oldest row still waiting",
    (
        Setting("max_batches", Shape.WHOLE, "at most this many batches old", least=0),
        Setting("max_hours", Shape.NUMBER, "at most this many hours old", least=0),
        ON_BREACH,
    ),
    one_of=("max_batches", "max_hours"),
)

AUDIT = Settings(
    "which batches audit the view, and how much of it (`off`: none)",
    (
        Setting(
            "slices",
            Shape.WHOLE,
            "the view's keys are checked in this many slices, one an audit",
            default=SLICES,
            least=1,
        ),
        Setting(
            "every", Shape.WHOLE, "audit every N-th batch (instead of by budget)", least=1, excludes="budget"
        ),
        Setting(
            "budget",
            Shape.NUMBER,
            "audit whenever it costs about this share of the view's batch time",
            default=BUDGET,
            above=0,
            most=1,
        ),
    ),
)


def limit_settings(measure: str) -> Settings:
    """The settings of a limit on `measure`: an age for `waiting`, a count for the others."""
    return AGE_LIMIT if measure == WAITING else AMOUNT_LIMIT


def parse_health(
    reader: SpecReader, raw: Any, key: str, kind: ViewKind, known: Mapping[str, str]
) -> tuple[Limit, ...]:
    """The limits under a view's `health:`, each naming one of the kind's measures (`known`:
    name -> what it counts, in the order the error lists them)."""
    if raw is None:
        return ()
    raw = reader.mapping(raw, key)
    limits = []
    for measure, body in raw.items():
        where = f"{key}.{measure}"
        if measure not in known:
            said = "; ".join(f"{m}: {what}" for m, what in known.items())
            raise reader.fail(
                where, f"a {kind.value} view has no health measure '{measure}'", f"use one of: {said}"
            )
        body = reader.mapping(body, where)
        settings = limit_settings(measure)
        bounds = settings.one_of
        reader.only(body, where, settings.names())
        if not any(b in body for b in bounds):
            raise reader.fail(
                where,
                f"a limit on '{measure}' sets none of {', '.join(bounds)}",
                f"set one: {bounds[0]}: ...",
            )
        values = {b: _bound(reader, body, where, settings[b]) for b in bounds if b in body}
        text = reader.text(body, where, "on_breach", required=False) or ON_BREACH.default.value
        try:
            on_breach = OnBreach(text)
        except ValueError:
            raise reader.fail(
                f"{where}.on_breach", f"unknown on_breach '{text}'", "use fail or warn"
            ) from None
        whole = {b: int(v) for b, v in values.items() if b in ("max_rows", "max_batches")}
        real = {b: float(v) for b, v in values.items() if b in ("max_share", "max_hours")}
        limits.append(
            Limit(
                measure,
                max_share=real.get("max_share"),
                max_rows=whole.get("max_rows"),
                max_batches=whole.get("max_batches"),
                max_hours=real.get("max_hours"),
                on_breach=on_breach,
            )
        )
    return tuple(limits)


def _bound(reader: SpecReader, body: dict[str, Any], where: str, setting: Setting) -> float | int:
    name, value = setting.name, body[setting.name]
    share = setting.most == 1
    whole = setting.shape is Shape.WHOLE
    ok = not isinstance(value, bool) and isinstance(value, int | float) and value >= (setting.least or 0)
    ok = ok and (not share or value <= 1) and (not whole or float(value).is_integer())
    if not ok:
        wanted = (
            "a share from 0 to 1" if share else "a whole number, 0 or more" if whole else "a number of hours"
        )
        raise reader.fail(f"{where}.{name}", f"'{name}' must be {wanted}, found {describe(value)}")
    return int(value) if whole else float(value)


def parse_audit(reader: SpecReader, raw: Any, key: str) -> Audit:
    """A view's `audit:` (absent: one of 64 slices whenever the budget allows; `off`: none)."""
    if raw is None:
        return Audit()
    if raw is False or raw == "off":
        return Audit(enabled=False)
    raw = reader.mapping(raw, key)
    reader.only(raw, key, AUDIT.names())
    if "every" in raw and "budget" in raw:
        raise reader.fail(
            key,
            "'every' and 'budget' both say which batches audit",
            "keep one: every: N (each N-th batch) or budget: 0.1 (about that share of the batch time)",
        )
    settings: dict[str, Any] = {}
    for name in ("slices", "every"):
        value = raw.get(name, AUDIT[name].default)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise reader.fail(
                f"{key}.{name}", f"'{name}' must be a whole number, 1 or more, found {describe(value)}"
            )
        settings[name] = value
    budget = raw.get("budget", AUDIT["budget"].default)
    if isinstance(budget, bool) or not isinstance(budget, int | float) or not 0 < budget <= 1:
        raise reader.fail(
            f"{key}.budget", f"'budget' must be a share above 0 and at most 1, found {describe(budget)}"
        )
    return Audit(slices=settings["slices"], every=settings["every"], budget=float(budget))
