# The three commands of the README: `make setup`, `make demo`, `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Use the corpora beside the checkout when they are there (as in CI); else nslm looks in
# ~/.cache/nslm and then downloads.
export NSLM_DATA_DIR ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),)

.PHONY: setup demo test lint format

# Quiet: pip's ~200 lines would hide the one that matters (how to activate).
setup:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@echo "installed nslm $$($(BIN)/python -c 'import importlib.metadata as m; print(m.version("nslm"))') (editable, with pytest, hypothesis, ruff) into $(VENV); activate it with: . $(BIN)/activate"

demo:
	$(BIN)/nslm demo

test:
	$(BIN)/pytest -q

lint:
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

format:
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks
