"""What a write's commit carries, handed to every writer explicitly: the txn (`app`,
`txn_version`), by which Delta and delta-rs apply it at most once per table, and the batch's
marker in commitInfo's `userMetadata` (delta/markers.py). An output's stamp is its batch commit
(`Stamp.batch`), whose commit check output_counts.py makes; a state table's is the state txn
and marker engine/write.py's write_state makes for each attempt, and checks by its marker.

>>> Stamp("lakejoin.p.v", 4).txn
('lakejoin.p.v', 4)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakejoin.delta.markers import USER_METADATA, OutputCommit, idempotent

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Stamp:
    """A write's txn (`app`, `txn_version`), its commit's `user_metadata` (a marker's JSON), and,
    for an output, the batch commit (`commit`) whose check ends the write."""

    app: str
    txn_version: int
    user_metadata: str | None = None
    commit: OutputCommit | None = None

    @classmethod
    def batch(cls, commit: OutputCommit) -> Stamp:
        """The stamp of an output's batch commit."""
        return cls(commit.app, commit.final.txn_version, commit.final.as_json(), commit)

    @property
    def txn(self) -> tuple[str, int]:
        """(app, version), as delta-rs's and Delta's txn actions take it."""
        return self.app, self.txn_version

    @contextmanager
    def spark(self, spark: SparkSession) -> Iterator[None]:
        """Every Spark write inside this block carries the stamp (Delta reads the txn and the
        commit metadata from the session's conf); the session's own, if any, after it."""
        outer = spark.conf.get(USER_METADATA, None)
        with idempotent(spark, self.app, self.txn_version):
            if self.user_metadata is not None:
                spark.conf.set(USER_METADATA, self.user_metadata)
            try:
                yield
            finally:
                if outer is None:
                    spark.conf.unset(USER_METADATA)
                else:
                    spark.conf.set(USER_METADATA, outer)
