"""The library API as a Python user imports it: `from mcp_team import ...`."""

from __future__ import annotations

import subprocess
import sys

import pytest

import mcp_team

pytestmark = pytest.mark.anyio


async def test_a_team_runs_from_the_top_level_names() -> None:
    from mcp_team import Budgets, ModelSet, RunResult, RunSettings, Specialist, Team
    from mcp_team.llm.offline import OfflineModel

    crew = [Specialist(name="poet", description="Writes short poems.", system_prompt="Write the poem asked for.")]
    team = Team(ModelSet.single(OfflineModel()), crew, RunSettings(budgets=Budgets(max_handoffs=3)))
    result = await team.run("A haiku about bees")
    assert isinstance(result, RunResult) and result.status == "complete"
    assert [h.target for h in result.handoffs] == ["poet"]


async def test_a_model_of_ones_own_that_returns_something_else_is_named() -> None:
    from mcp_team import ModelSet, Team
    from mcp_team.llm import ModelRequest

    class Sloppy:
        name, provider = "sloppy", "mine"

        async def complete(self, request: ModelRequest) -> object:
            return "Bees are great."  # a str, not a ModelResponse

    with pytest.raises(TypeError, match=r"model 'sloppy' returned a str where a ModelResponse was expected"):
        await Team(ModelSet.single(Sloppy())).run("Research bees")  # type: ignore[arg-type]


def test_every_error_is_a_mcp_team_error() -> None:
    from mcp_team import BudgetExhausted, ConfigError, McpTeamError, ModelError, PlanError

    for error in (BudgetExhausted, ConfigError, ModelError, PlanError):
        assert issubclass(error, McpTeamError)


def test_the_public_names_are_listed_and_unknown_ones_are_an_attribute_error() -> None:
    assert {name for name in mcp_team.__all__ if name != "__version__"} == {
        "Team",
        "RunResult",
        "Budgets",
        "RunSettings",
        "ModelSet",
        "Specialist",
        "McpTeamError",
        "ConfigError",
        "ModelError",
        "BudgetExhausted",
        "PlanError",
        "use_tracing",
    }
    assert set(mcp_team.__all__) <= set(dir(mcp_team))
    with pytest.raises(AttributeError, match="no attribute 'Teem'"):
        _ = mcp_team.Teem  # type: ignore[attr-defined]


def test_importing_the_package_loads_no_engine() -> None:
    # The CLI imports the package on the server's start-up path: the names load on first use only.
    code = "import sys, mcp_team; print(sorted(m for m in sys.modules if m.startswith('mcp_team')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['mcp_team']"
