# Two entry points for a fresh machine: `make serve` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA_DIR ?= ./data
PORT ?= 6443

.PHONY: setup serve test lint typecheck unit integration reliability clean

$(BIN)/kubewire: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,fast]'
	touch $(BIN)/kubewire

setup: $(BIN)/kubewire

serve: setup
	$(BIN)/kubewire serve --data-dir $(DATA_DIR) --port $(PORT)

lint: setup
	$(BIN)/ruff check src tests tools $(wildcard bench examples)
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest -q tests/unit

integration: setup
	$(BIN)/pytest -q tests/integration

test: setup lint
	tools/ensure-kubectl
	$(BIN)/pytest -q

# Long forms of the reliability runs (crash safety, slow consumers, concurrency, hostile clients,
# soak): one line per property with its figures; the short forms run in `make test`.
SOAK_MINUTES ?= 10
reliability: setup
	$(BIN)/python -m tests.reliability.cli all --long
	$(BIN)/python -m tests.reliability.soak --minutes $(SOAK_MINUTES)

clean:
	rm -rf $(VENV) $(DATA_DIR) .mypy_cache .ruff_cache .pytest_cache
