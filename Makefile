# Entry points for a fresh machine: `make up` / `make down` (the server in the background),
# `make serve` (in the foreground) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA_DIR ?= ./data
PORT ?= 6443

.PHONY: setup serve up down test test-etcd lint typecheck unit integration reliability e2e-kubernetes \
        clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The server's runtime dependencies only: all `make serve` and `make up` need.
$(VENV)/.server-deps: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[server]'
	touch $@

# Those and the test stack (kubectl's peers, linters, type checker).
$(VENV)/.test-deps: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $@

setup: $(VENV)/.test-deps

serve: $(VENV)/.server-deps
	$(BIN)/kubewire serve --data-dir $(DATA_DIR) --port $(PORT)

up: $(VENV)/.server-deps
	$(BIN)/kubewire serve --detach --data-dir $(DATA_DIR) --port $(PORT)

down: $(VENV)/.server-deps
	$(BIN)/kubewire stop --data-dir $(DATA_DIR)

lint: setup
	$(BIN)/ruff check src tests tools $(wildcard bench examples)
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest -q tests/unit

integration: setup
	tools/ensure-etcd
	tools/ensure-client-node
	$(BIN)/pytest -q tests/integration

# `make test` runs the unit, integration and benchmark-smoke suites on two workers, a file per
# worker at a time (pytest-xdist; each test starts its own servers on random ports), then the
# reliability short forms alone: they assert latency and memory bounds under attack, which a
# second worker's load on a two-core machine would blur. PARALLEL= runs everything in one process.
PARALLEL ?= -n 2 --dist loadfile

test: setup lint
	tools/ensure-kubectl
	tools/ensure-etcd
	tools/ensure-client-node
	$(BIN)/pytest -q $(PARALLEL) --ignore=tests/reliability
	$(BIN)/pytest -q tests/reliability
	KUBEWIRE_TEST_STORAGE=etcd $(BIN)/pytest -q $(ETCD_SHORT)

# The suites on etcd (tests/storage_choice.py: KUBEWIRE_TEST_STORAGE puts every test server on a
# real etcd, each under its own prefix). `make test` runs a short form on one etcd member: the
# watch conformance scenarios, the wire-level watch protocol and kubernetes_asyncio (31-35 s;
# the store contract and tests/integration/test_etcd_layout.py run on etcd in the main run
# anyway). `make test-etcd`, the long form: the store contract suite on etcd, then every
# integration suite (conformance, wire-level and server tests, the peer clients: kubectl,
# kubernetes, kubernetes_asyncio, lightkube, kr8s, kopf) on one member and on a three-member
# cluster (20-24 minutes on 2 shared cores: 10-12 min per cluster).
ETCD_SHORT := tests/integration/test_watch_conformance.py tests/integration/test_watch_protocol.py \
              tests/integration/test_client_kubernetes_asyncio.py
test-etcd: setup
	tools/ensure-kubectl
	tools/ensure-etcd
	$(BIN)/pytest -q tests/unit/test_store_contract.py -k etcd
	KUBEWIRE_TEST_STORAGE=etcd $(BIN)/pytest -q tests/integration
	KUBEWIRE_TEST_STORAGE=etcd-3 $(BIN)/pytest -q tests/integration

# Long forms of the reliability runs (crash safety, slow consumers, concurrency, hostile clients,
# soak): one line per property with its figures; the short forms run in `make test`.
SOAK_MINUTES ?= 10
reliability: setup
	$(BIN)/python -m tests.reliability.cli all --long
	$(BIN)/python -m tests.reliability.soak --minutes $(SOAK_MINUTES)

# The kubernetes package's own e2e tests (tests/external/kubernetes_e2e), unchanged, against a
# fresh server; part of `make test` too (about 20 s).
e2e-kubernetes: setup
	$(BIN)/pytest -q tests/integration/test_kubernetes_e2e.py

clean:
	rm -rf $(VENV) $(DATA_DIR) .mypy_cache .ruff_cache .pytest_cache
