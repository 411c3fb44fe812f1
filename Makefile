# Jobgate's developer commands (GNU make). `make help` lists them.
#
# The virtualenv (.venv) is made on first use and re-synced whenever pyproject.toml changes;
# redis-server is installed with apt-get when missing and make runs as root.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
# What `make test` runs: PYTEST_PATHS (the whole suite by default) with PYTEST_ARGS added.
PYTEST_PATHS ?= tests
PYTEST_ARGS ?=
# The suite runs in this many pytest-xdist workers (tests/conftest.py says how it is split);
# PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= 4
DEV_ARGS ?=
BENCH_ARGS ?=
# The benchmark's own extra (Dramatiq, taskiq, Celery, py-spy), installed by `make bench` only.
BENCH_INSTALLED := $(VENV)/.bench-installed

.DEFAULT_GOAL := help
.PHONY: help dev test lint bench openapi sdk-dist clean venv redis-server chromium node

help:
	@echo "Jobgate: make <target>"
	@echo
	@echo "  dev           run a local gateway with its own Redis (data in .jobgate/);"
	@echo "                prints the URL and an admin API key. Extra flags: DEV_ARGS=..."
	@echo "  test          lint, then the test suite in PYTEST_WORKERS=$(PYTEST_WORKERS) parallel workers"
	@echo "                (PYTEST_PATHS=tests/e2e for a folder, PYTEST_ARGS=-x for pytest flags)"
	@echo "                (needs redis-server). Extra: PYTEST_ARGS=..."
	@echo "  lint          ruff check, ruff format --check, mypy --strict on gateway and sdk"
	@echo "  bench         Jobgate against Dramatiq, taskiq and Celery: Python functions and an"
	@echo "                HTTP service, issue 20's targets met or not; then idle cost"
	@echo "                (bench/run.sh); installs the [bench] extra. Flags: BENCH_ARGS=--quick"
	@echo "                One suite: BENCH_ARGS='races|latency|growth|cpu [--quick]' (bench/README.md)"
	@echo "  openapi       regenerate openapi.yaml from the code"
	@echo "  sdk-dist      build the light jobgate-sdk distribution (sdist and wheel: sdk/ alone,"
	@echo "                none of the gateway's dependencies) into dist/"
	@echo "  clean         remove .venv, caches and build output (keeps .jobgate/, the dev data)"
	@echo
	@echo "  venv          create .venv and install jobgate with its test tools"
	@echo "  redis-server  check for redis-server; install it with apt-get when root"
	@echo "  chromium      check for chromium (the browser tests'); install it with apt-get when root"
	@echo "  node          check for node and npm (the Node.js worker example's test); install them"
	@echo "                with apt-get when root; npm ci in examples/node-worker"
	@echo
	@echo "Python: PYTHON=$(PYTHON) (3.11 or newer)."

dev: venv redis-server
	$(BIN)/jobgate dev $(DEV_ARGS)

# The linters run first (lint is a prerequisite: a lint failure stops make test before the
# suite), then the suite; pytest's exit code 5 (no tests collected) counts as success.
test: venv redis-server chromium node lint
	@status=0; $(BIN)/python -m pytest $(PYTEST_PATHS) -n $(PYTEST_WORKERS) $(PYTEST_ARGS) \
		|| status=$$?; \
	if [ $$status -eq 5 ]; then \
		echo "make test: pytest collected no tests (exit code 5); treating that as success."; \
		status=0; \
	fi; \
	exit $$status

lint: venv
	$(BIN)/ruff check
	$(BIN)/ruff format --check
	$(BIN)/mypy gateway sdk

bench: venv redis-server $(BENCH_INSTALLED)
	bash bench/run.sh $(BENCH_ARGS)

openapi: venv
	$(BIN)/jobgate openapi --output openapi.yaml

# jobgate-sdk is built from packaging/jobgate-sdk, whose sdk/ is a symlink to ./sdk (one copy of
# the code); the sdist holds the files themselves and the wheel is built from it, so what is
# published builds anywhere. `build` comes from the [test] extra.
sdk-dist: venv
	$(BIN)/python -m build --outdir dist packaging/jobgate-sdk

clean:
	rm -rf $(VENV) build dist *.egg-info packaging/*/*.egg-info bench/out .pytest_cache \
		.mypy_cache .ruff_cache \
		examples/node-worker/node_modules
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

# --- setup -------------------------------------------------------------------------------------

venv: $(INSTALLED)

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
		echo "Jobgate needs Python 3.11 or newer, and '$(PYTHON)' is not." >&2; \
		echo "Install one (e.g. apt-get install python3.11 python3.11-venv) and run" >&2; \
		echo "  make PYTHON=python3.11 <target>" >&2; \
		exit 1; \
	}
	$(PYTHON) -m venv $(VENV) || { \
		rm -rf $(VENV); \
		echo "Could not create $(VENV). On Debian/Ubuntu: apt-get install python3-venv" >&2; \
		exit 1; \
	}

# The stamp is newer than pyproject.toml once the install has succeeded. uv installs the same
# packages as pip in about a quarter of pip's time (10 s against 46 s for '.[test]' here, with
# bytecode compiled: the environment may set PYTHONDONTWRITEBYTECODE, and then no test process
# would keep what it compiles); pip does it when uv cannot be had.
$(INSTALLED): pyproject.toml | $(BIN)/python
	$(call install,.[test])
	@touch $@

$(BENCH_INSTALLED): pyproject.toml | $(INSTALLED)
	$(call install,.[test,bench])
	@touch $@

define install
	@if $(BIN)/python -m pip install --quiet uv 2>/dev/null && [ -x $(BIN)/uv ]; then \
		echo "$(BIN)/uv pip install -e '$(1)'"; \
		$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '$(1)'; \
	else \
		echo "$(BIN)/python -m pip install -e '$(1)'"; \
		$(BIN)/python -m pip install --quiet -e '$(1)'; \
	fi
endef

# redis-cli too: tests/cluster/ builds a Redis Cluster with `redis-cli --cluster create` (both come
# with the redis-server package on Debian and Homebrew).
redis-server:
	@if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then \
		if [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "redis-server or redis-cli is missing: installing redis-server with apt-get"; \
			apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server; \
		else \
			echo "redis-server or redis-cli is missing. Jobgate's dev gateway and tests run a local Redis;" >&2; \
			echo "install it (Debian/Ubuntu: sudo apt-get install redis-server," >&2; \
			echo "macOS: brew install redis) and run make again." >&2; \
			exit 1; \
		fi; \
	fi

# The admin UI's browser tests drive Debian's chromium with Playwright (never Playwright's own
# downloaded browsers).
chromium:
	@if [ -z "$$JOBGATE_CHROMIUM" ] && ! command -v chromium >/dev/null 2>&1; then \
		if [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "chromium is missing: installing it with apt-get"; \
			apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
		else \
			echo "chromium is missing. The admin UI's browser tests (tests/browser) run it" >&2; \
			echo "headless; install it (Debian/Ubuntu: sudo apt-get install chromium)" >&2; \
			echo "and run make again, or point JOBGATE_CHROMIUM at a Chromium binary." >&2; \
			exit 1; \
		fi; \
	fi

# The Node.js worker example (examples/node-worker) runs in tests/e2e/test_node_worker.py: node and
# npm from Debian when missing, then its locked dependencies with npm ci (again when the lock
# changes).
NODE_EXAMPLE := examples/node-worker
NODE_STAMP := $(NODE_EXAMPLE)/node_modules/.installed

node: $(NODE_STAMP)

$(NODE_STAMP): $(NODE_EXAMPLE)/package-lock.json
	@if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
		if [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "node or npm is missing: installing them with apt-get"; \
			apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm; \
		else \
			echo "node and npm are missing. The Node.js worker example's test runs them;" >&2; \
			echo "install them (Debian/Ubuntu: sudo apt-get install nodejs npm) and run make again." >&2; \
			exit 1; \
		fi; \
	fi
	cd $(NODE_EXAMPLE) && npm ci --no-audit --no-fund
	@touch $@
