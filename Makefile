# Two commands for a fresh machine (Python 3.11, Java 17+, Maven): `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: install demo test faults lint stack-down clean

# The product with every extra, and the development tools (devtools/, a distribution of their own), at the exact
# versions in constraints.txt.
$(STAMP): pyproject.toml devtools/pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -c constraints.txt --upgrade pip setuptools wheel
	$(VENV)/bin/pip install --quiet -c constraints.txt -e '.[all,dev]' -e ./devtools
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
