"""mcp-team: a team of LLM specialists and a supervisor behind one MCP server.

The library API, importable from here:

    from mcp_team import Team, ModelSet, Specialist, Tool, Budgets, RunSettings, RunResult, use_tracing

Names are imported on first use (PEP 562), so `import mcp_team` stays as cheap as it was: the
CLI imports this package on the server's start-up path.
"""

from __future__ import annotations

# Not `typing`'s: importing typing is most of the time between `mcp-team` starting and its `main` (cli/main.py).
TYPE_CHECKING = False

__version__ = "0.1.0"

if TYPE_CHECKING:
    from mcp_team.errors import BudgetExhausted, ConfigError, McpTeamError
    from mcp_team.handoffs import Budgets, PlanError, RunEvent, RunResult, RunSettings, Team, UnknownSpecialist
    from mcp_team.llm import ModelError, ModelSet
    from mcp_team.specialists import DEFAULT_TEAM, Specialist, Tool
    from mcp_team.telemetry.spans import use_tracing

# Where each public name lives.
_PUBLIC = {
    "Team": "mcp_team.handoffs",
    "RunResult": "mcp_team.handoffs",
    "Budgets": "mcp_team.handoffs",
    "RunSettings": "mcp_team.handoffs",
    "PlanError": "mcp_team.handoffs",
    "RunEvent": "mcp_team.handoffs",
    "UnknownSpecialist": "mcp_team.handoffs",
    "ModelSet": "mcp_team.llm",
    "ModelError": "mcp_team.llm",
    "Specialist": "mcp_team.specialists",
    "Tool": "mcp_team.specialists",
    "DEFAULT_TEAM": "mcp_team.specialists",
    "McpTeamError": "mcp_team.errors",
    "ConfigError": "mcp_team.errors",
    "BudgetExhausted": "mcp_team.errors",
    "use_tracing": "mcp_team.telemetry.spans",
}

__all__ = [
    "DEFAULT_TEAM",
    "BudgetExhausted",
    "Budgets",
    "ConfigError",
    "McpTeamError",
    "ModelError",
    "ModelSet",
    "PlanError",
    "RunEvent",
    "RunResult",
    "RunSettings",
    "Specialist",
    "Team",
    "Tool",
    "UnknownSpecialist",
    "__version__",
    "use_tracing",
]


def __getattr__(name: str) -> object:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'mcp_team' has no attribute {name!r}")
    from importlib import import_module  # here, not at the top: `import mcp_team` stays cheap

    value = getattr(import_module(_PUBLIC[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
