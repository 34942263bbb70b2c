"""Pipeline specs: YAML in, a typed model out, every mistake reported with file and line.

This module is the model; `spec/parse.py` builds it (`load_spec`, `parse_spec`) from YAML read by
`spec/yaml_lines.py`. The model imports neither: the parser depends on the model, never the reverse. All
three stay importable without Spark: Airflow's DAG files parse specs at parse time.

>>> from lakejoin.spec.parse import load_spec
>>> spec = load_spec("pipelines/marketplace.yaml")
>>> spec.views["display_products"].fk_join.how
<JoinHow.LEFT: 'left'>
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lakejoin.errors import SpecError


class ViewKind(enum.Enum):
    FK_JOIN = "fk_join"
    LIST_JOIN = "list_join"
    REKEY = "rekey"
    ENRICH = "enrich"


class JoinHow(enum.Enum):
    INNER = "inner"
    LEFT = "left"


class Duplicates(enum.Enum):
    """What a list_join does with an element key that appears more than once in one list."""

    KEEP = "keep"  # every occurrence, each joined on its own
    DROP = "drop"  # the first occurrence wins


class EnrichMode(enum.Enum):
    """How an enrich view treats a dimension change."""

    LOOKUP = "lookup"  # a fact keeps the dimensions as they were when its batch ran (KIP-99)
    PROPAGATE = "propagate"  # a dimension change rewrites every fact that references it (KIP-314)


class OnConflict(enum.Enum):
    """What a unique rekey does when two master keys claim one derived key."""

    FAIL = "fail"  # stop the batch before its commit, listing the conflicting keys
    LATEST = "latest"  # the master changed most recently wins; the conflict is reported


class Resolution(enum.Enum):
    """How a rekey resolves the masters claiming one derived key (`resolution`)."""

    EVERY_CLAIM = "every claim"  # unique: false: one row per (derived key, master), no conflict
    LATEST = "latest"  # the master changed last wins; a conflict is counted and noted
    FAIL = "fail"  # a conflict stops the batch before it writes anything


def resolution(unique: bool, on_conflict: OnConflict) -> Resolution:
    """The resolution of a rekey declared `unique` with `on_conflict` (which only a unique rekey
    reads). Only `LATEST` needs the versions of the masters' last changes; every resolution but
    `EVERY_CLAIM` recomputes a derived key from all the masters claiming it."""
    if not unique:
        return Resolution.EVERY_CLAIM
    return Resolution.LATEST if on_conflict is OnConflict.LATEST else Resolution.FAIL


class OnDefinitionChange(enum.Enum):
    """What the next batch does when a view's definition changed since its last batch
    (spec/definition.py): a setting that changes its rows, an input's path or key, or the
    columns it takes from an input."""

    FULL_REFRESH = "full_refresh"  # recompute every key under the new definition, write what differs
    FAIL = "fail"  # stop at the plan, naming what changed, until someone runs --full-refresh


class OnInputReplaced(enum.Enum):
    """What the next batch does when an input is not the table its last batch read
    (delta/identity.py): a source, an upstream view's output or a state table dropped and
    written again, gone back below its pin, or with its log rewritten; or the view's own output
    changed by a commit lakejoin did not make (a RESTORE, someone's DELETE or UPDATE)."""

    FULL_REFRESH = "full_refresh"  # recompute every key at the new versions, write what differs
    FAIL = "fail"  # stop at the plan, naming the table, until someone runs --full-refresh


# A key: the column(s) that identify a row, in order. `key: a` in a spec is ("a",), `key: [a, b]`
# is ("a", "b"); a row whose key has a null in any column has a null key.
Key = tuple[str, ...]
# What functions that take a key's columns accept: a key, or a list of column names (never a
# bare string, which is a sequence of its characters).
Columns = tuple[str, ...] | list[str]


def shown(key: Key) -> str:
    """A key as messages and records show it: `a` for one column, `(a, b)` for several."""
    return key[0] if len(key) == 1 else f"({', '.join(key)})"


def quoted(key: Key) -> str:
    """A key as a message names it on its own: `'a'` for one column (as before composite
    keys), `(a, b)` for several."""
    return f"'{key[0]}'" if len(key) == 1 else shown(key)


@dataclass(frozen=True)
class Source:
    name: str
    path: str
    key: Key
    line: int | None
    upstream: str | None = None  # the view whose output this is, when a view reads another view


# fk_join, list_join and enrich (propagate): above this share of the left rows (the facts) that
# a batch's right-side changes reach, the batch recomputes the whole view (views/fanout.fans_out).
FANOUT_THRESHOLD = 0.2
# ... unless they reach at most this many rows: a reach this small is routed whatever its share,
# since routing it costs about what its keys cost (driver lookups: 1,000 keys in about 0.5 s)
# and a full recompute costs at least a scan of every input (seconds on a table of 20 rows).
FANOUT_MIN_ROWS = 1000


@dataclass(frozen=True)
class Input:
    """One input of a view, as its definition names it: the source, the part its rows play
    (left, right, fact, dimension, master), the setting that names it, and the setting that lists
    the columns the view takes of it with those columns (None: all of them; a left or fact table
    has no such setting).

    Each definition says its inputs (`inputs()`, the driving one first) and its output key
    (`output_key(key_of)`, given each source's key) as methods, never fields: a field would be
    part of every recorded definition (spec/definition.py), and changing it would refresh every
    view."""

    source: str
    role: str
    setting: str
    listing: str | None = None
    listed: tuple[str, ...] | None = None


KeyOf = Callable[[str], Key]  # a source's name -> its key


class _Joined:
    """What fk_join and list_join say alike: a left table joined with a right one."""

    left: str
    right: str
    right_columns: tuple[str, ...] | None

    def inputs(self) -> tuple[Input, ...]:
        """The left table, then the right one."""
        right = Input(self.right, "right", "right", "right_columns", self.right_columns)
        return (Input(self.left, "left", "left"), right)

    def output_key(self, key_of: KeyOf) -> Key:
        """The left key: one output row per left row."""
        return key_of(self.left)


@dataclass(frozen=True)
class FkJoin(_Joined):
    left: str
    right: str
    fk: Key  # the left columns naming the right key's columns, in its order
    how: JoinHow
    right_columns: tuple[str, ...] | None
    right_prefix: str
    fanout_threshold: float = FANOUT_THRESHOLD
    fanout_min_rows: int = FANOUT_MIN_ROWS


@dataclass(frozen=True)
class ListJoin(_Joined):
    left: str
    list: str
    right: str
    into: str
    duplicates: Duplicates
    right_columns: tuple[str, ...] | None
    fanout_threshold: float = FANOUT_THRESHOLD
    fanout_min_rows: int = FANOUT_MIN_ROWS


@dataclass(frozen=True)
class Rekey:
    source: str
    key: Key  # the derived key
    columns: tuple[str, ...] | None
    unique: bool
    on_conflict: OnConflict

    def inputs(self) -> tuple[Input, ...]:
        """The master table, whose listed columns include the derived key."""
        listed = (*self.key, *self.columns) if self.columns else None
        return (Input(self.source, "master", "source", "columns", listed),)

    def output_key(self, key_of: KeyOf) -> Key:
        """The derived key; with `unique: false`, a row per (derived key, master key), keyed by
        both in that order."""
        return self.key if self.unique else (*self.key, *key_of(self.source))


@dataclass(frozen=True)
class Dimension:
    table: str
    fk: Key  # the fact's columns naming the dimension key's columns, in its order
    how: JoinHow
    prefix: str
    columns: tuple[str, ...] | None

    @property
    def id(self) -> str:
        """A stable name for the dimension's routing index (reordering the spec keeps it)."""
        return (
            f"{self.table}_by_{self.fk[0]}" if len(self.fk) == 1 else f"{self.table}_by_{'__'.join(self.fk)}"
        )


@dataclass(frozen=True)
class Enrich:
    fact: str
    mode: EnrichMode
    dimensions: tuple[Dimension, ...]
    fanout_threshold: float  # propagate: above this share of the facts, recompute in full
    broadcast_limit_mb: float  # a dimension larger than this on disk is shuffled, not broadcast
    fanout_min_rows: int = FANOUT_MIN_ROWS  # propagate: a reach of at most this many facts is routed

    def inputs(self) -> tuple[Input, ...]:
        """The fact table, then each dimension in the spec's order."""
        dimensions = (
            Input(d.table, "dimension", f"dimensions[{i}]", f"dimensions[{i}].columns", d.columns)
            for i, d in enumerate(self.dimensions)
        )
        return (Input(self.fact, "fact", "fact"), *dimensions)

    def output_key(self, key_of: KeyOf) -> Key:
        """The fact key: one output row per fact."""
        return key_of(self.fact)


Definition = FkJoin | ListJoin | Rekey | Enrich


SLICES = 64  # the audit's default number of key slices: every key checked within 64 audits
BUDGET = 0.1  # the audit's default share of a view's batch time


class OnBreach(enum.Enum):
    FAIL = "fail"  # stop the batch before its output commit, naming the counts and a few keys
    WARN = "warn"  # report it: the summary, the report, the batch log


@dataclass(frozen=True)
class Limit:
    """A bound on one measure of a view's health, and what a breach does."""

    measure: str
    max_share: float | None = None  # of the kind's first input's rows (left rows, facts, masters)
    max_rows: int | None = None
    max_batches: int | None = None  # `waiting`: the oldest waiting row's age in batches
    max_hours: float | None = None  # ... and in hours
    on_breach: OnBreach = OnBreach.WARN


@dataclass(frozen=True)
class Audit:
    """Audit batches re-derive one of `slices` slices of the view's keys (ranges of the key
    cut at the output's files, or a hash of it; the next slice each time; every key of a small
    output, on the driver: engine/audit.py) and compare it with the output. Which batches:
    every `every`-th one when set; else (the default) a batch whenever the view's batches since
    the last audit took `1 / budget` times that audit's time, so the audit costs about `budget`
    of the view's batch time whatever the view's size."""

    slices: int = SLICES
    every: int | None = None
    budget: float = BUDGET
    enabled: bool = True


@dataclass(frozen=True)
class View:
    name: str
    kind: ViewKind
    definition: Definition
    path: str
    line: int | None
    lines: Mapping[str, int] = field(default_factory=dict, repr=False, compare=False)
    on_definition_change: OnDefinitionChange = OnDefinitionChange.FULL_REFRESH
    on_input_replaced: OnInputReplaced = OnInputReplaced.FULL_REFRESH
    # Trust (spec/trust.py): limits on the join's health, and the continuous audit.
    health: tuple[Limit, ...] = ()
    audit: Audit = field(default_factory=lambda: Audit())

    @property
    def inputs(self) -> tuple[str, ...]:
        """The sources the view reads, the driving one first: each once per part it plays (an
        fk_join of a table with itself lists it as its left and its right)."""
        return tuple(
            source for source, _ in dict.fromkeys((i.source, i.role) for i in self.definition.inputs())
        )

    @property
    def fk_join(self) -> FkJoin:
        assert isinstance(self.definition, FkJoin), f"view '{self.name}' is a {self.kind.value}"
        return self.definition

    @property
    def list_join(self) -> ListJoin:
        assert isinstance(self.definition, ListJoin), f"view '{self.name}' is a {self.kind.value}"
        return self.definition

    @property
    def rekey(self) -> Rekey:
        assert isinstance(self.definition, Rekey), f"view '{self.name}' is a {self.kind.value}"
        return self.definition

    @property
    def enrich(self) -> Enrich:
        assert isinstance(self.definition, Enrich), f"view '{self.name}' is a {self.kind.value}"
        return self.definition


class SparkRun(enum.Enum):
    """How an Airflow task runs a view's batch."""

    LOCAL = "local"  # Spark inside the task's own process (the master or remote below, or local[*])
    SUBMIT = "submit"  # spark-submit to the cluster of an Airflow Spark connection


@dataclass(frozen=True)
class SparkSettings:
    master: str | None = None
    remote: str | None = None
    run: SparkRun = SparkRun.LOCAL
    conn_id: str = "spark_default"  # the Airflow connection `run: submit` submits through


@dataclass(frozen=True)
class PipelineSpec:
    name: str
    file: str
    schedule: str | None
    storage: str
    sources: Mapping[str, Source]
    views: Mapping[str, View]
    spark: SparkSettings
    lines: Mapping[str, int] = field(default_factory=dict, repr=False, compare=False)
    order: tuple[str, ...] = ()

    def error(self, key: str, what: str, fix: str = "") -> SpecError:
        return SpecError(what, file=self.file, line=self.lines.get(key), key=key, fix=fix)

    def view_order(self) -> list[str]:
        """Views in dependency order (a view after every view it reads)."""
        return list(self.order or self.views)

    def upstream_views(self, view: str) -> list[str]:
        """The views that `view` reads as sources."""
        return [n for n in self.views[view].inputs if self.sources[n].upstream is not None]


def find_specs(folder: str | Path) -> list[Path]:
    """The pipeline specs in a folder, in a stable order."""
    root = Path(folder)
    return sorted([*root.glob("*.yaml"), *root.glob("*.yml")])
