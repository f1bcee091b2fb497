"""mcp-team's pydantic models build their validators on first use: a server answering `initialize` (a cold start
every MCP client waits for) builds only the few it uses, not the run's, the records' and the requests' (see
benchmarks/README.md, cold start)."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys

import pytest
from pydantic import BaseModel
from pydantic_settings import BaseSettings

import mcp_team
from support import clean_env

pytestmark = [pytest.mark.process]

# In a child: what `serve` builds before it answers (the team, the settings, the MCP server and its tools).
_BUILT_AT_START = """
import json, os
import pydantic
from pydantic._internal._mock_val_ser import MockValSer
from mcp_team.server.app import build_server

os.environ["MCP_TEAM_MODEL"] = "offline"
build_server()

def subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from subclasses(sub)

ours = {c for c in subclasses(pydantic.BaseModel) if c.__module__.startswith("mcp_team.")}
built = sorted(c.__name__ for c in ours if not isinstance(c.__pydantic_validator__, MockValSer))
print(json.dumps({"models": len(ours), "built": built}))
"""


def _models() -> list[type[BaseModel]]:
    for module in pkgutil.walk_packages(mcp_team.__path__, "mcp_team."):
        importlib.import_module(module.name)
    found: list[type[BaseModel]] = []
    todo: list[type[BaseModel]] = [BaseModel]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("mcp_team."):
                found.append(sub)
    return found


def test_every_model_of_ours_defers_building_its_validator() -> None:
    models = _models()
    assert len(models) > 40  # the walk found the package's models
    eager = [
        f"{m.__module__}.{m.__name__}"
        for m in models
        # Settings are read from the environment at start-up: built then anyway. A generic of the SDK's made
        # concrete here (`Context[Any, Any]`) is the SDK's model.
        if not issubclass(m, BaseSettings)
        and m.__pydantic_generic_metadata__["origin"] is None
        and not m.model_config.get("defer_build")
    ]
    assert eager == [], f"give these defer_build=True (a cold start builds what is not deferred): {eager}"


def test_a_server_built_for_initialize_leaves_the_runs_models_unbuilt() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _BUILT_AT_START], capture_output=True, text=True, timeout=60, env=clean_env()
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    for name in ("RunResult", "ModelRequest", "ModelResponse", "Message", "SpecialistResult", "RunRecord", "RunInput"):
        assert name not in report["built"], report
    assert len(report["built"]) < report["models"] / 3, report
