"""The team on the server: making a team current and putting its specialists' tools and prompts on the
surface, replacing the previous team's."""

from __future__ import annotations

from anyio.abc import TaskGroup
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Prompt

from mcp_team.server.state import ServerState
from mcp_team.server.surface.prompts import specialist_prompt
from mcp_team.server.surface.tools import specialist_tool, team_effects
from mcp_team.teamfile.loading import TeamSpec

RUNS_THE_TEAM = ("run_team", "start_run")  # the tools whose calls may use any tool of the team


async def apply_team(server: MCPServer[ServerState], state: ServerState, team: TeamSpec, task_group: TaskGroup) -> None:
    """Make `team` current (its MCP servers run in `task_group`) and register its specialists. On a
    `ConfigError` the current team stays, on the server too."""
    await state.load(team, task_group)
    register_specialists(server, state)


def register_specialists(server: MCPServer[ServerState], state: ServerState) -> None:
    """One tool and one prompt per specialist of the current team, replacing the previous team's."""
    for name in state.registered:
        server.remove_tool(name)
        server.remove_prompt(name)
    state.registered = []
    for s in state.specialists:
        server.add_tool(
            specialist_tool(s),
            name=s.name,
            title=s.name.replace("_", " ").title(),
            description=f"{s.description} Hand it one self-contained task.",
            annotations=team_effects([s]),
        )
        server.add_prompt(
            Prompt.from_function(specialist_prompt(s), name=s.name, description=f"Play the {s.name}: {s.description}")
        )
        state.registered.append(s.name)
    effects = team_effects(state.specialists)
    for name in RUNS_THE_TEAM:
        # The SDK (2.3) has no public way to change a registered tool's annotations, and adding the tool again
        # would take its every argument here; its Tool is a plain model.
        tool = server._tool_manager.get_tool(name)
        if tool is not None:
            tool.annotations = effects
