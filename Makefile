# Two commands for a fresh machine (Python 3.11, Java 17+, Maven): `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: install demo test faults lint stack-down clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip==26.3 setuptools==84.2.1 wheel==0.48.0
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/lineage demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .

test: lint
	$(VENV)/bin/pytest

faults: $(STAMP)
	$(VENV)/bin/pytest -m fault

stack-down: $(STAMP)
	$(VENV)/bin/lineage stack down

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache
