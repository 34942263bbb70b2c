"""`lakejoin status` and `lakejoin report` need no JVM: they read the batch log, the tables' Delta
logs and the JSON reports with delta-rs and plain Python, so they run where pyspark cannot even
be imported (an operator's laptop, Airflow's api-server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lakejoin.engine.batch import BatchOutcome
from lakejoin.spec.layout import reports_root
from tests.lakehouse import MERCHANTS, PRODUCTS, status_blocks

pytestmark = pytest.mark.e2e

# Runs the lakejoin commands given (JSON, argv[1]) in one process where `import pyspark` raises
# ImportError, then prints their exit codes and the JVM-side modules that were loaded.
PROBE = """\
import json, sys
sys.modules["pyspark"] = None
from lakejoin.cli.main import main
codes = [main(command) for command in json.loads(sys.argv[1])]
loaded = [m for m, module in list(sys.modules.items())
          if module is not None and m.split(".")[0] in ("pyspark", "py4j", "delta")]
print("no-jvm " + json.dumps({"codes": codes, "loaded": sorted(loaded)}))
"""
NEVER_RUN = "  merchants_by_name:\n    rekey: {source: merchants, key: display_name}\n"


def test_status_and_report_run_where_pyspark_cannot_be_imported(lake):
    lake.create("merchants", MERCHANTS, [("m1", "Acme", "a.png"), ("m2", "Bolt", "b.png")])
    lake.create("products", PRODUCTS, [("p1", "pen", 1.0, "m1"), ("p2", "cup", 2.0, "m2")])
    spec = lake.spec("left", extra=NEVER_RUN)
    assert lake.run(spec).outcome is BatchOutcome.COMMITTED  # display_products' batch 1, checked
    lake.upsert("merchants", "merchant_id", [("m1", "Acme Inc", "a.png")])
    reports = reports_root(spec)
    pages = [reports / "index.html", reports / "display_products" / "batch-000001.html"]
    for page in pages:  # the batch wrote them at its check: `report` must write them again
        page.unlink(missing_ok=True)

    spec_file = str(lake.root / "shop.yaml")
    commands = json.dumps([["status", spec_file], ["report", spec_file]])
    env = {**os.environ, "COLUMNS": "80", "GX_ANALYTICS_ENABLED": "False"}
    result = subprocess.run(
        [sys.executable, "-c", PROBE, commands], capture_output=True, text=True, env=env, timeout=300
    )

    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert json.loads(out.rsplit("no-jvm ", 1)[1]) == {"codes": [0, 0], "loaded": []}, out
    # status at 80 columns: a block per view, its name, last batch and state whole
    blocks = status_blocks(out)
    assert set(blocks) >= set(spec.views), out
    assert blocks["display_products"]["head"] == "batch 1, committed, full_refresh"
    assert blocks["display_products"]["behind"] == "products 0, merchants 1 (versions)"
    assert blocks["display_products"]["pins"] == "merchants@1, products@1"
    assert blocks["merchants_by_name"]["head"] == "never run"
    assert all(len(line) <= 80 for line in out.splitlines() if "batch log" not in line), out
    # report: the pipeline's index and the batch's page, written again
    assert all(page.is_file() for page in pages)
    index = pages[0].read_text(encoding="utf-8")
    assert all(view in index for view in spec.views)
    assert f"data-quality reports of pipeline {spec.name}" in out
