"""The continuous audit (issue 40): each batch re-derives one slice of the view's keys from the
inputs at its pins and compares it with the output it committed. An output row edited behind
lakejoin's back (by delta-rs) is found at once by `lakejoin audit --full` and within one round of
slices by the batches, named, and mended by a full refresh."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest

from lakejoin.delta.log import BatchLog
from lakejoin.errors import AuditDifferenceError
from lakejoin.quality.audit_plan import CUTS, DIFFERENCES, EVERY_KEY, SLICE
from lakejoin.spec.parse import load_spec
from tests import scans
from tests.delta.test_key_ranges import moved_away
from tests.lakehouse import MERCHANTS, PRODUCTS, Lakehouse, drift

pytestmark = pytest.mark.scenario

VIEW = "display_products"
AUDITED = """\
  {view}:
    fk_join: {{left: products, right: merchants, fk: merchant_id, how: left,
              right_columns: [display_name], fanout_threshold: 1.0}}
    audit: {{slices: 4, every: 1}}
"""


def audited(lake: Lakehouse):  # noqa: ANN201
    """The shop's fk_join, audited in 4 slices, one each batch."""
    spec_file = Path(lake.spec("left").file)
    text = spec_file.read_text(encoding="utf-8")
    spec_file.write_text(text[: text.index(f"  {VIEW}:")] + AUDITED.format(view=VIEW), encoding="utf-8")
    return load_spec(spec_file)


def test_a_wrong_output_row_its_log_cannot_explain_is_found_within_one_round_of_slices(
    lake, capsys, monkeypatch, request
):
    """A row edited under lakejoin's own marker, as a faulty batch would write it (an edit the
    log shows recomputes the view instead: tests/scenarios/test_replaced_inputs.py). The view's
    first build lays its output out in files of 3 keys, so a round cuts the keys by ranges of
    product_id read from those files (engine/audit.py). The output is small, so it is audited by
    slices only while the whole-output audit on the driver is off; with it on (the default), the
    next batch checks every key, on the driver."""
    from deltalake import DeltaTable

    from lakejoin.cli.main import main
    from lakejoin.delta import key_ranges
    from lakejoin.engine.audit import WHOLE_MAX_ROWS

    monkeypatch.setattr(key_ranges, "ROWS_PER_FILE", 3)
    lake.spark.conf.set(WHOLE_MAX_ROWS, "0")
    request.addfinalizer(lambda: lake.spark.conf.unset(WHOLE_MAX_ROWS))

    lake.create("merchants", MERCHANTS, [("m1", "Acme", "a.png"), ("m2", "Bolt", "b.png")])
    products = [(f"p{i}", f"item {i}", float(i), "m1" if i % 2 else "m2") for i in range(1, 13)]
    ordered = sorted(products)  # p1, p10, p11, p12, p2...: four writes of three keys, in key order
    lake.create("products", PRODUCTS, ordered[:3])
    for first in range(3, 12, 3):
        lake.append("products", ordered[first : first + 3])
    spec = audited(lake)
    assert spec.views[VIEW].audit.slices == 4
    assert lake.run(spec, VIEW).outcome.value == "committed"  # batch 1: a full refresh, no audit

    assert main(["audit", str(spec.file), "--full"]) == 0
    assert f"{VIEW}: every key matches a recompute" in capsys.readouterr().out

    drift(spec.views[VIEW].path, "product_id = 'p3'", {"display_name": "'Forged'"})
    assert main(["audit", str(spec.file), "--view", VIEW, "--full"]) == 1
    shown = " ".join(capsys.readouterr().out.split())
    assert "lakejoin audit --full checked every key and found 1 key(s)" in shown and "'p3'" in shown
    assert f"--view {VIEW} --full-refresh" in shown

    found = None
    audited_slices = []
    for n in range(4):  # batches 2-5 audit slices 0, 1, 2, 3: one round
        lake.upsert("products", "product_id", [(f"q{n}", "new", 1.0, "m1")])
        try:
            summary = lake.run(spec, VIEW)
        except AuditDifferenceError as error:
            found = error
            break
        audited_slices.append(summary.kind_metrics[SLICE])
        assert summary.kind_metrics[DIFFERENCES] == 0
        assert summary.notes["audit"].startswith(f"slice {audited_slices[-1]} of 4 (product_id ")
    assert found is not None, f"4 audit batches (slices {audited_slices}) did not find p3"
    assert "'p3'" in found.what and "1 key(s)" in found.what
    assert f"checked slice {len(audited_slices)} of 4 (product_id " in found.what  # a range with p3 in it
    assert f"--view {VIEW} --full-refresh" in found.fix

    assert main(["status", str(spec.file)]) == 0
    last = f"last difference: batch {2 + len(audited_slices)} (1 keys)"
    assert last in " ".join(capsys.readouterr().out.split())

    lake.run(spec, VIEW, full_refresh=True)
    assert lake.output(spec, VIEW) == lake.expected(spec, VIEW)
    assert main(["audit", str(spec.file), "--full"]) == 0
    assert main(["audit", str(spec.file)]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert f"{VIEW}: every key checked within the last 1 batches; {last}" in shown

    # A slice reads only the files of the output and of the driving table that its range
    # reaches: the others are moved away, and the audit of that slice still finds every key.
    import pyarrow as pa

    from lakejoin.engine.audit import audit, last_batch, slicing

    path = spec.views[VIEW].path
    version = DeltaTable(path).version()
    cut = slicing(path, version, ("product_id",), 4)
    assert cut.ranges, cut
    lo, hi = cut.cuts[0], cut.cuts[1]  # slice 1

    def outside(table: str) -> list[str]:
        """The table's files whose statistics put every key outside slice 1 (Delta skips them)."""
        files = pa.table(DeltaTable(table).get_add_actions(flatten=True)).to_pydict()
        ranges = zip(files["path"], files["min.product_id"], files["max.product_id"], strict=True)
        return [f"{table}/{name}" for name, least, greatest in ranges if greatest < lo or least >= hi]

    away = outside(path) + outside(lake.path("products"))
    assert outside(path) and outside(lake.path("products")), away
    found = last_batch(lake.spark, spec, spec.views[VIEW])
    assert found is not None
    with ExitStack() as stack:
        for file in away:
            stack.enter_context(moved_away(file, Path(lake.path("products")).parent))
        checked = audit(*found, version, 1, cut)
    assert (checked.differences, checked.scope) == (0, cut.text(1))

    # A small output is audited whole, on the driver (the default): the next batch finds a row
    # edited behind lakejoin's back whatever slice is due, and Spark reads none of the output.
    lake.spark.conf.unset(WHOLE_MAX_ROWS)
    drift(path, "product_id = 'p5'", {"display_name": "'Forged'"})
    lake.upsert("products", "product_id", [("q9", "new", 1.0, "m1")])
    mark = scans.mark(lake.spark)
    with pytest.raises(AuditDifferenceError) as whole:
        lake.run(spec, VIEW)
    assert "checked every key (a small output, " in whole.value.what, whole.value.what
    assert "compared on the driver) and found 1 key(s)" in whole.value.what and "'p5'" in whole.value.what
    assert not scans.since(lake.spark, mark)[path], "the whole-output audit read the output with Spark"
    logged = BatchLog.of(spec).last_committed(VIEW)
    assert logged is not None and logged.metrics[CUTS] == EVERY_KEY and logged.metrics[DIFFERENCES] == 1
