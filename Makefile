# Two commands for a fresh machine (Python 3.11, Java 17+, Maven): `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

UI := server/ui
UI_BUILT := server/ui-dist/index.html
BROWSER_STAMP := $(VENV)/.browser
DBT_VENV := .lineage/dbt-venv
DBT_STAMP := $(DBT_VENV)/.installed

.PHONY: install demo test faults lint stack-down clean dbt

# The product with every extra (flink too: PyFlink, ~800 MB, for the Flink tests `make test` runs), and the
# development tools (devtools/, a distribution of their own), at the exact versions in constraints.txt.
$(STAMP): pyproject.toml devtools/pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -c constraints.txt --upgrade pip setuptools wheel
	$(VENV)/bin/pip install --quiet -c constraints.txt -e '.[all,flink,dev]' -e ./devtools
	touch $(STAMP)

# The web UI: Node packages at the versions in package-lock.json, built into server/ui-dist (served by lineage serve).
$(UI_BUILT): $(UI)/package.json $(UI)/package-lock.json $(UI)/index.html $(UI)/vite.config.js $(UI)/tsconfig.json $(wildcard $(UI)/src/*)
	cd $(UI) && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent

# Browser tests drive Debian's Chromium (Playwright's own browser download cannot work here).
$(BROWSER_STAMP): $(STAMP)
	@command -v chromium >/dev/null || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
		else echo "the browser tests need Debian's chromium: sudo apt-get install chromium" >&2; exit 1; fi; }
	touch $(BROWSER_STAMP)

# Real dbt and dbt-ol for the schema-change gate's tests, in a virtualenv of their own (their pins clash with ours).
$(DBT_STAMP): devtools/dbt/constraints.txt
	$(PYTHON) -m venv $(DBT_VENV)
	$(DBT_VENV)/bin/pip install --quiet -c devtools/dbt/constraints.txt --upgrade pip
	$(DBT_VENV)/bin/pip install --quiet -c devtools/dbt/constraints.txt dbt-core dbt-duckdb openlineage-dbt
	touch $(DBT_STAMP)

dbt: $(DBT_STAMP)

install: $(STAMP) $(UI_BUILT) $(BROWSER_STAMP) $(DBT_STAMP)

demo: $(STAMP) $(UI_BUILT)
	$(VENV)/bin/lineage demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .

test: lint $(UI_BUILT) $(BROWSER_STAMP) $(DBT_STAMP)
	$(VENV)/bin/pytest

faults: $(STAMP)
	$(VENV)/bin/pytest -m 'fault or campaign'

# For `lineage bench peer` only (not part of install or test): Debian's PostgreSQL, and Marquez's API server with its
# jars (its published artifact, else its source release given as MARQUEZ_SOURCE=<checkout or git dir>, built with
# Maven). Exits non-zero, saying why, when Marquez cannot be set up.
.PHONY: peer-deps
peer-deps: $(STAMP)
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; \
		else echo "lineage bench peer needs Debian's postgresql: sudo apt-get install postgresql" >&2; exit 1; fi; }
	$(VENV)/bin/python -m kafka_lineage_devtools.bench_peer setup $(if $(MARQUEZ_SOURCE),--source $(MARQUEZ_SOURCE))

stack-down: $(STAMP)
	$(VENV)/bin/lineage stack down

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache $(UI)/node_modules server/ui-dist
