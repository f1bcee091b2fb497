"""The team and its runs as resources: `team://specialists`, `team://runs` and `team://runs/{run_id}`.

No `from __future__ import annotations` here: the SDK reads these signatures at runtime (the
`run_id` template parameter).
"""

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from mcp_team.server.state import ServerState


def add_resources(server: MCPServer[ServerState], state: ServerState) -> None:
    """Register the resources; each reads `state` when it is read, so it shows the current team and runs."""

    @server.resource(
        "team://specialists",
        name="specialists",
        mime_type="application/json",
        description="The team: names, descriptions, tools and budgets.",
    )
    def team_resource() -> dict[str, Any]:
        return {
            "source": state.team.source,
            "specialists": [
                {
                    "name": s.name,
                    "description": s.description,
                    "model_role": s.model_role,
                    "tools": [t.name for t in s.tools],
                    "max_turns": s.max_turns,
                    "max_tokens": s.max_tokens,
                }
                for s in state.specialists
            ],
            "budgets": state.run_settings.budgets.model_dump(),
            "mcp_servers": state.pool.status() if state.pool is not None else {},
        }

    @server.resource("team://runs", name="runs", mime_type="application/json", description="Recent runs, newest first.")
    def runs_resource() -> dict[str, Any]:
        return {
            "runs": [
                {
                    "run_id": r.run_id,
                    "status": r.status,
                    "request": r.request[:200],
                    "started_at": r.started_at.isoformat(),
                    "uri": f"team://runs/{r.run_id}",
                }
                for r in state.store.recent()
            ]
        }

    @server.resource(
        "team://runs/{run_id}",
        name="run",
        mime_type="application/json",
        description="A run's record: request, plan, every handoff with payload and result, status, usage, trace id.",
    )
    def run_resource(run_id: str) -> str:
        run = state.store.get(run_id)
        if run is None:
            raise ResourceNotFoundError(
                f"no run '{run_id}' (runs are kept in memory, newest "
                f"{getattr(state.store, 'max_runs', '')} only; see team://runs)"
            )
        return run.model_dump_json(indent=2)
