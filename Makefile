# One Makefile for local runs and CI. Needs only python3, pip and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.8
STAMP := $(VENV)/.synced
CODE := src tests examples bench tools
# `make cli-compat CLI=/path/to/claude` checks that binary; empty: the bundled one.
CLI ?=

.PHONY: all install lint typecheck test test-fast demo bench cli-compat clean

all: test

$(BIN)/uv:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv==$(UV_VERSION)

$(STAMP): $(BIN)/uv pyproject.toml uv.lock
	$(BIN)/uv sync --frozen --all-extras --inexact --quiet
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff format --check $(CODE)
	$(BIN)/ruff check $(CODE)

typecheck: install
	$(BIN)/pyright $(CODE)

test: lint typecheck
	$(BIN)/pytest

test-fast: install
	$(BIN)/pytest -x -q

demo: install
	$(BIN)/dex-agents demo

bench: install
	$(BIN)/python -m bench

# The real-CLI tests of each CLI behavior the adapter relies on; a pass/fail table.
cli-compat: install
	$(BIN)/python tools/cli_compat.py $(if $(CLI),--cli "$(CLI)")

clean:
	rm -rf $(VENV) .dex-agents .pytest_cache .ruff_cache
