"""How a write is stamped (sink/stamp.py): the batch commit's stamp from its marker, and a block
that stamps the session's Spark writes and gives the session back its own stamp after. A dict
stands in for the conf."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lakejoin.delta.markers import (
    FINAL,
    TXN_APP_ID,
    TXN_VERSION,
    USER_METADATA,
    BatchMarker,
    OutputCommit,
)
from lakejoin.delta.records import BatchMode
from lakejoin.sink.stamp import Stamp

pytestmark = pytest.mark.unit

MARK = BatchMarker(3, FINAL, BatchMode.INCREMENTAL, {"s": 1}, {"s": 2})


class _Conf:
    """SparkSession.conf's get, set and unset over a dict."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.values.get(name, default)

    def set(self, name: str, value: str) -> None:
        self.values[name] = value

    def unset(self, name: str) -> None:
        self.values.pop(name, None)


def _spark() -> SimpleNamespace:
    return SimpleNamespace(conf=_Conf())


def test_a_batch_commits_stamp_is_its_txn_and_its_marker():
    commit = OutputCommit("app", MARK)

    stamp = Stamp.batch(commit)

    assert stamp.txn == ("app", MARK.txn_version)
    assert stamp.user_metadata == MARK.as_json() and stamp.commit is commit


def test_a_stamped_block_gives_the_session_its_own_stamp_back():
    spark = _spark()
    outer = Stamp("app.state", 5, "outer")
    inner = Stamp.batch(OutputCommit("app", MARK))

    with outer.spark(spark):  # type: ignore[arg-type]
        with inner.spark(spark):  # type: ignore[arg-type]
            assert spark.conf.values == {
                TXN_APP_ID: "app",
                TXN_VERSION: str(MARK.txn_version),
                USER_METADATA: MARK.as_json(),
            }
        assert spark.conf.values == {TXN_APP_ID: "app.state", TXN_VERSION: "5", USER_METADATA: "outer"}
    assert spark.conf.values == {}


def test_a_batch_commit_names_the_write_that_made_it_and_older_ones_read_none():
    """The marker's optional "write" (FORMAT unchanged): a log row rebuilt from the output's
    commit (engine/plan.py) names the strategy; a commit without it reads None, and a marker
    with none writes the JSON it wrote before."""
    import json
    from dataclasses import replace

    named = replace(MARK, write="driver_merge")

    assert BatchMarker.from_commit({"userMetadata": named.as_json()}) == named
    assert BatchMarker.from_commit({"userMetadata": MARK.as_json()}).write is None  # type: ignore[union-attr]
    assert "write" not in json.loads(MARK.as_json())
    assert Stamp.batch(OutputCommit("app", named)).txn == Stamp.batch(OutputCommit("app", MARK)).txn
