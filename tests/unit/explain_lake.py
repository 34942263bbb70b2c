"""Tiny lakes for `lakejoin explain`'s tests, written with delta-rs (no JVM) as lakejoin's batches
write them: sources with a change data feed, each view's output whose batch commits carry their
marker (delta/markers.py) in commitInfo's userMetadata, with the identity of each table it pins
as a plan records it (delta/identity.py), the state tables a kind keeps, and the batch log. A
`Lake` is a spec file (its text formatted with the lake's folder) and its tables.

>>> lake = Lake(tmp_path, SPEC)  # doctest: +SKIP
>>> lake.table("products", PRODUCTS, [("p1", "pen", "m1")])  # doctest: +SKIP
1
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake

from lakejoin.cli.main import main
from lakejoin.delta.identity import TableIdentity, TableLog
from lakejoin.delta.log import BatchLog
from lakejoin.delta.markers import FINAL, BatchMarker
from lakejoin.delta.records import BatchMode, BatchRecord, BatchStatus
from lakejoin.spec.definition import output_key
from lakejoin.spec.layout import state_path
from lakejoin.spec.parse import load_spec
from lakejoin.views.context import STATE

CDF = {"delta.enableChangeDataFeed": "true"}
DROP = "_lj_test_drop"  # a merge source's flag: delete the target row of this key


def stamp(
    batch: int,
    mode: BatchMode,
    start: Mapping[str, int],
    pins: Mapping[str, int],
    *,
    ends: Mapping[str, int] | None = None,
    identities: Mapping[str, TableIdentity] | None = None,
) -> CommitProperties:
    """A batch commit's properties: its marker as userMetadata (`ends`: a repair's range ends,
    the marker's `ends` field; `identities`: which table each pin is of)."""
    marker = BatchMarker(batch, FINAL, mode, dict(start), dict(pins), identities=dict(identities or {}))
    meta = json.loads(marker.as_json())
    if ends:
        meta["ends"] = dict(ends)  # by hand: the same JSON whether or not BatchMarker writes it
    return CommitProperties(custom_metadata={"userMetadata": json.dumps(meta, sort_keys=True)})


class Lake:
    """A spec and its tables under `root`."""

    def __init__(self, root: Path, spec_text: str, name: str = "lake") -> None:
        self.root = root
        self.file = str(root / f"{name}.yaml")
        Path(self.file).write_text(spec_text.format(root=root), encoding="utf-8")
        self.spec = load_spec(self.file)
        self.schemas: dict[str, pa.Schema] = {}
        self.keys: dict[str, tuple[str, ...]] = {}
        self.paths: dict[str, str] = {}

    # --- tables ---------------------------------------------------------------------------

    def table(self, name: str, schema: pa.Schema, rows: Sequence[Sequence[Any]] = ()) -> int:
        """Create a source (or a view's output: `name` is a view) with its change feed on, and
        append `rows` (tuples in the schema's order) as its version 1; the new version."""
        if name in self.spec.views:
            path, key = self.spec.views[name].path, tuple(output_key(self.spec, self.spec.views[name]))
        else:
            path, key = self.spec.sources[name].path, self.spec.sources[name].key
        self._create(name, path, key, schema)
        if rows:
            write_deltalake(path, self._arrow(name, rows), mode="append")
        return self.version(name)

    def index(self, view: str, schema: pa.Schema, key: tuple[str, ...]) -> None:
        """Create a view's state table (a rekey's index: keyed by the master key)."""
        self._create(f"{view}:state", state_path(self.spec, self.spec.views[view]), key, schema)

    def _create(self, name: str, path: str, key: tuple[str, ...], schema: pa.Schema) -> None:
        DeltaTable.create(path, schema=schema, configuration=CDF)
        self.schemas[name], self.keys[name], self.paths[name] = schema, key, path

    def version(self, name: str) -> int:
        return int(DeltaTable(self.paths[name]).version())

    def identities(self, view: str, pins: Mapping[str, int]) -> dict[str, TableIdentity]:
        """Which table each pin of a batch of `view` is of, as its plan records it
        (engine/plan.py): the table's id and the commit at the pinned version."""
        found = {}
        for pin, version in pins.items():
            path = self.paths.get(f"{view}:state" if pin == STATE else pin)
            log = TableLog.at(path) if path is not None else None
            if log is not None:
                found[pin] = log.identity(version)
        return found

    def _arrow(self, name: str, rows: Sequence[Sequence[Any] | Mapping[str, Any]]) -> pa.Table:
        schema = self.schemas[name]
        dicts = [r if isinstance(r, Mapping) else dict(zip(schema.names, r, strict=True)) for r in rows]
        return pa.Table.from_pylist(dicts, schema=schema)

    def change(
        self,
        name: str,
        upserts: Sequence[Sequence[Any]] = (),
        deletes: Sequence[Sequence[Any]] = (),
        properties: CommitProperties | None = None,
    ) -> int:
        """One MERGE commit: upsert `upserts` (whole rows) and delete the rows keyed by
        `deletes` (key values in the key's order); the new version."""
        schema, key = self.schemas[name], self.keys[name]
        rows = [{**dict(zip(schema.names, r, strict=True)), DROP: False} for r in upserts]
        rows += [
            {**dict.fromkeys(schema.names), **dict(zip(key, k, strict=True)), DROP: True} for k in deletes
        ]
        source = pa.Table.from_pylist(rows, schema=schema.append(pa.field(DROP, pa.bool_())))
        columns = {c: f"s.`{c}`" for c in schema.names}
        (
            DeltaTable(self.paths[name])
            .merge(
                source,
                " AND ".join(f"t.`{c}` = s.`{c}`" for c in key),
                source_alias="s",
                target_alias="t",
                commit_properties=properties,
            )
            .when_matched_delete(predicate=f"s.{DROP}")
            .when_matched_update(columns, predicate=f"NOT s.{DROP}")
            .when_not_matched_insert(columns, predicate=f"NOT s.{DROP}")
            .execute()
        )
        return self.version(name)

    def state(
        self, view: str, upserts: Sequence[Sequence[Any]] = (), deletes: Sequence[Sequence[Any]] = ()
    ) -> int:
        """Write a view's state table as its batch's state step does; its new version (the pin
        the batch commit records under `_routing`)."""
        return self.change(f"{view}:state", upserts, deletes)

    # --- batches ----------------------------------------------------------------------------

    def batch(
        self,
        view: str,
        batch: int,
        mode: BatchMode,
        start: Mapping[str, int],
        pins: Mapping[str, int],
        *,
        upserts: Sequence[Sequence[Any]] = (),
        deletes: Sequence[Sequence[Any]] = (),
        ends: Mapping[str, int] | None = None,
        notes: Mapping[str, str] | None = None,
    ) -> int:
        """Batch `batch` of `view`: one output commit marked with the batch (an append into an
        empty output, else a MERGE), and its committed row in the batch log; the output version."""
        assert upserts or deletes, "a batch that changes no row commits nothing to the output"
        properties = stamp(batch, mode, start, pins, ends=ends, identities=self.identities(view, pins))
        if self.version(view) == 0 and not deletes:
            write_deltalake(
                self.paths[view], self._arrow(view, upserts), mode="append", commit_properties=properties
            )
            version = self.version(view)
        else:
            version = self.change(view, upserts, deletes, properties)
        BatchLog.of(self.spec).append(
            BatchRecord(
                view,
                batch,
                BatchStatus.COMMITTED,
                mode,
                dict(start),
                dict(pins),
                notes=dict(notes or {}),
                output_version=version,
            )
        )
        return version


def explained(capsys: Any, *argv: str) -> dict[str, Any]:
    """`lakejoin explain ARGV --json`'s document (the command must succeed)."""
    assert main(["explain", *argv, "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def feed(change: Mapping[str, Any], column: str) -> list[tuple[int, str, Any]]:
    """A change entry's rows as (commit version, change type, `column`)."""
    return [(r["_commit_version"], r["_change_type"], r[column]) for r in change["rows"]]


def by_source(document: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The document's change entries by input name."""
    return {c["source"]: c for c in document["changes"]}


def ranges(document: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """Each change entry's (first_version, last_version), by input name."""
    return {c["source"]: (c["first_version"], c["last_version"]) for c in document["changes"]}
