"""The dependency ranges in pyproject.toml are what a user's resolver sees: the lowest versions they allow
(`uv pip install --resolution lowest-direct`) must work, not just the newest, which the developers' venvs get.

One venv outside the checkout gets mcp-team (built from this checkout, not editable) at the lowest versions of
its direct dependencies, and the tests that exercise each of them run on it in a pytest of its own: import and
library use, an offline run, the MCP server in process and over stdio, durable runs (DBOS, SQLite and
PostgreSQL through SQLAlchemy and psycopg), the Anthropic and OpenAI SDKs against their fake APIs on a real
socket, tracing's exporters, and the settings. A floor that is too low fails here, naming the test.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from support import clean_env
from support.install_support import ROOT, UV, host_env, host_path, uv_cache

pytestmark = [pytest.mark.process, pytest.mark.timeout(1800)]

# The tests that run on the lowest versions, and what each proves works there.
SUITE = [
    "tests/engine/test_library_api.py",  # import mcp_team, the library API
    "tests/llm/test_offline_model.py",  # an offline run, end to end
    "tests/server/test_server.py",  # the MCP server in process, both protocol revisions (mcp, mcp-types, pydantic)
    "tests/server/test_stdio_startup.py",  # `mcp-team serve` over stdio, as a host starts it
    "tests/server/test_run_tools.py",  # durable runs over MCP: DBOS, SQLite, SQLAlchemy
    "tests/runs/test_runs_postgres.py",  # durable runs on PostgreSQL: psycopg
    "tests/llm/test_anthropic_backend.py",  # the anthropic SDK against its fake API
    "tests/llm/test_openai_backend.py",  # the openai SDK against its fake API
    "tests/telemetry/test_telemetry_setup.py",  # OpenTelemetry's SDK and exporters
    "tests/llm/test_settings.py",  # pydantic-settings
]
# What the tests above need beyond mcp-team itself, from the dev extra's ranges (at their lowest too).
RUNNER = ("pytest", "pytest-timeout", "pytest-xdist", "hypothesis")
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def runner_requirements() -> list[str]:
    dev = [Requirement(req) for req in PROJECT["optional-dependencies"]["dev"]]
    wanted = [str(req) for req in dev if req.name in RUNNER]
    assert len(wanted) == len(RUNNER), f"the dev extra lacks one of {RUNNER}: {dev}"
    return wanted


def floor(requirement: Requirement) -> Version:
    """The lowest version a `>=X,<Y` range allows."""
    (lowest,) = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
    return lowest


def test_the_fast_tests_pass_on_the_lowest_versions_the_ranges_allow(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    venv = tmp_path / "lowest"
    subprocess.run(["python3", "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    env = host_env(tmp_path, host_path(), uv_cache(tmp_path_factory))
    install = subprocess.run(
        [str(UV), "pip", "install", "--python", python, "--resolution", "lowest-direct", str(ROOT),
         *runner_requirements()],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr

    listed = subprocess.run([str(UV), "pip", "list", "--python", python, "--format", "json"], env=env,
                            capture_output=True, text=True, check=True)  # fmt: skip
    versions = {p["name"].lower(): Version(p["version"]) for p in json.loads(listed.stdout)}
    # Each direct dependency at its floor (a patch release of it at most): a floor that another dependency's
    # own range lifts is no floor a user gets, and this says which.
    lifted = []
    for requirement in map(Requirement, PROJECT["dependencies"]):
        lowest, got = floor(requirement), versions[requirement.name.lower()]
        if got.release[: len(lowest.release)] != lowest.release:
            lifted.append(f"{requirement.name}: floor {lowest}, resolved {got}")
    assert lifted == [], "floors the resolver cannot reach; raise them to what it resolves"
    where = subprocess.run([python, "-I", "-c", "import mcp_team; print(mcp_team.__file__)"], cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert Path(where).is_relative_to(venv), f"mcp_team came from {where}, not the venv"

    # The nested pytest is a session of its own: none of this worker's pytest-xdist variables.
    nested_env = {k: v for k, v in clean_env().items() if not k.startswith("PYTEST_")}
    suite = subprocess.run(
        [python, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", *SUITE],
        cwd=ROOT, env=nested_env, capture_output=True, text=True, timeout=1700,
    )  # fmt: skip
    shown = ", ".join(
        f"{name} {versions[name]}"
        for name in ("mcp", "mcp-types", "dbos", "pydantic", "anthropic", "openai", "sqlalchemy", "psycopg")
        if name in versions
    )
    assert suite.returncode == 0, f"on the lowest versions ({shown}):\n{suite.stdout[-6000:]}\n{suite.stderr[-2000:]}"
    assert re.search(r"\d+ passed", suite.stdout), suite.stdout[-2000:]
