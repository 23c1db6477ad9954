# One Makefile for local runs and CI. Needs only python3, pip and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.8
STAMP := $(VENV)/.synced

.PHONY: all install lint typecheck test test-fast demo bench clean

all: test

$(BIN)/uv:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv==$(UV_VERSION)

$(STAMP): $(BIN)/uv pyproject.toml uv.lock
	$(BIN)/uv sync --frozen --all-extras --inexact --quiet
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff format --check src tests examples bench
	$(BIN)/ruff check src tests examples bench

typecheck: install
	$(BIN)/pyright

test: lint typecheck
	$(BIN)/pytest

test-fast: install
	$(BIN)/pytest -x -q

demo: install
	$(BIN)/dex-agents demo

bench: install
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .dex-agents .pytest_cache .ruff_cache
