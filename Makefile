# Two entry points for a fresh machine: `make demo` runs the team, `make test` runs the checks.
# Both create the virtualenv on first use; nothing needs to be installed beforehand but python3.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
REQUEST ?= Research the history of the transistor, compute 12*(3+4)/2 for the analyst, and write a short report, then review it.

$(BIN)/mcp-team: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

.PHONY: demo test lint bench
demo: $(BIN)/mcp-team
	$(BIN)/mcp-team run --model offline "$(REQUEST)"

test: $(BIN)/mcp-team
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/pytest

bench: $(BIN)/mcp-team
	$(BIN)/python benchmarks/run.py
