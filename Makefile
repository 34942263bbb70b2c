# lakejoin: `make demo` runs the main job, `make test` runs the test suite.
# Both install everything they need into ./.venv first (Python packages and Delta's jars).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

export GX_ANALYTICS_ENABLED := False
export AIRFLOW_HOME ?= $(CURDIR)/.airflow
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export AIRFLOW__CORE__DAGS_FOLDER := $(CURDIR)/dags
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: install demo airflow-ui test test-fast lint clean bench bench-smoke

install: $(VENV)/.delta-jars $(VENV)/.docs-assets

$(VENV)/.installed: pyproject.toml constraints.txt
	@echo "==> installing Python packages into $(VENV) (pinned by constraints.txt)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e ".[airflow,dev]"
	touch $@

# The scripts, styles and fonts of Great Expectations' Data Docs, from npm (npm pack), shipped
# with every Data Docs site so that its pages work offline (lakejoin/quality/docs_assets.py).
$(VENV)/.docs-assets: $(VENV)/.installed spark_jobs/lakejoin/quality/docs_assets.py
	$(BIN)/python -m lakejoin.quality.docs_assets
	touch $@

$(VENV)/.delta-jars: $(VENV)/.installed
	@echo "==> resolving Delta Lake's JVM artifacts once into $(VENV)/spark-jars, then starting Spark with them"
	$(BIN)/python -m lakejoin.delta.jars || (scripts/fetch-delta-jars.sh && $(BIN)/python -m lakejoin.delta.jars)
	$(BIN)/python -m lakejoin.delta.session
	touch $@

demo: install
	$(BIN)/python scripts/demo.py

# The demo's DAG in Airflow's own UI (after `make demo`, or on its own): the api-server, the
# scheduler and the dag-processor with LocalExecutor on ./.airflow's SQLite, at
# http://localhost:8080. User admin; the password is printed, and kept in
# .airflow/simple_auth_manager_passwords.json.generated. Ctrl-C stops it.
airflow-ui: install
	$(BIN)/airflow db migrate > /dev/null
	PATH=$(CURDIR)/$(BIN):$$PATH AIRFLOW__CORE__PLUGINS_FOLDER=$(CURDIR)/plugins $(BIN)/airflow standalone

test: install lint
	# tests/unit alone first: no JVM (its conftest fails a test that brings pyspark in), seconds
	$(BIN)/python -m pytest -p no:cacheprovider -q tests/unit
	$(BIN)/python -m pytest -p no:cacheprovider --durations=40 -n 2 --dist worksteal --ignore=tests/unit

test-fast: install
	$(BIN)/python -m pytest -p no:cacheprovider -m "unit and not tools"

lint: $(VENV)/.installed
	$(BIN)/ruff check spark_jobs dags tests scripts plugins bench
	$(BIN)/mypy
	$(BIN)/mypy bench

# Incremental batches against full recompute (issue 6): figures to docs/benchmarks.md.
# The full matrix takes hours on 2 cores; the smoke run (100 k orders, 1 % change) minutes.
bench: install
	$(BIN)/python -m bench

bench-smoke: install
	$(BIN)/python -m bench --smoke

clean:
	rm -rf lakehouse .airflow spark-warehouse build

# docker-compose.yaml's secrets, random, into ./.env (gitignored); a secret already there is kept.
.PHONY: compose-env
compose-env:
	scripts/compose-env.sh

# System tools some tests need (Debian's chromium for the browser test, docker-compose to
# validate docker-compose.yaml), installed when missing.
.PHONY: test-tools
test: test-tools
test-tools:
	scripts/install-test-tools.sh
