"""Delta Lake's JVM artifacts, resolved once at install into the project's environment.

`python -m lakejoin.delta.jars` runs Spark's own resolver (Ivy, the repositories Spark knows) once for
the Delta coordinate that matches the installed delta-spark and pyspark, into
`<venv>/spark-jars/ivy`, and keeps the jar files it fetched. A Spark start then lists them in
`spark.jars`: no resolution, no registry, none of Ivy's 250 lines (issue 24). Without them
(`make install` not run), the session falls back to `spark.jars.packages`.

>>> jar_files()                                                      # doctest: +SKIP
['/repo/.venv/spark-jars/ivy/jars/io.delta_delta-spark_2.13-4.4.0.jar', ...]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

# Where the resolved jars live: beside the interpreter's environment, or where LAKEJOIN_JARS says.
FOLDER = Path(os.environ.get("LAKEJOIN_JARS") or Path(sys.prefix) / "spark-jars")
# Spark's log at WARN, lakejoin's own lines unaffected: passed to the driver's JVM.
LOG4J = Path(__file__).with_name("log4j2.properties")


def jar_files(folder: Path = FOLDER) -> list[str]:
    """The resolved jar files, sorted; empty when they were never resolved."""
    return sorted(str(p) for p in (folder / "ivy" / "jars").glob("*.jar"))


def delta_package() -> str:
    """The Maven coordinate of Delta's jars for the installed delta-spark and pyspark, the one
    `configure_spark_with_delta_pip` adds, for `spark-submit --packages`."""
    spark = ".".join(metadata.version("pyspark").split(".")[:2])
    return f"io.delta:delta-spark_{spark}_2.13:{metadata.version('delta-spark')}"


def resolve(folder: Path = FOLDER) -> list[str]:
    """Resolve Delta's jars once with Spark's own resolver into `folder` (emptied first, so it
    holds this resolution alone); return the jar files."""
    ivy = folder / "ivy"
    shutil.rmtree(ivy, ignore_errors=True)
    ivy.mkdir(parents=True)
    with tempfile.NamedTemporaryFile("w", suffix=".py") as empty:
        spark_submit = Path(sys.prefix) / "bin" / "spark-submit"
        env = {**os.environ, "PATH": f"{Path(sys.prefix) / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
        done = subprocess.run(
            [str(spark_submit), "--conf", f"spark.jars.ivy={ivy}", "--packages", delta_package(), empty.name],
            env=env,
            capture_output=True,
            text=True,
        )
    found = jar_files(folder)
    if done.returncode != 0 or not found:
        raise SystemExit(
            f"could not resolve {delta_package()} into {ivy} (spark-submit exit {done.returncode}):\n"
            + done.stderr[-3000:]
            + "\nfix: check that a Maven repository is reachable, or set LAKEJOIN_JARS to a folder "
            "whose ivy/jars holds Delta's jars"
        )
    return found


if __name__ == "__main__":
    files = resolve()
    print(f"Delta's jars resolved once: {len(files)} files in {FOLDER / 'ivy' / 'jars'}")
