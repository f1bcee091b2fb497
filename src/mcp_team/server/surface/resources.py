"""The team and its runs as resources: `team://specialists`, `team://runs` and `team://runs/{run_id}`.

No `from __future__ import annotations` here: the SDK reads these signatures at runtime (the
`run_id` template parameter).
"""

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError

from mcp_team.errors import McpTeamError
from mcp_team.server.auth import visible
from mcp_team.server.state import ServerState
from mcp_team.telemetry.content import redact

if TYPE_CHECKING:
    from mcp_team.handoffs.checkpoints import Checkpoint
    from mcp_team.runs.service import Runs

WAITING_SUMMARY = 200  # characters of what a waiting run asks to approve, in the listing
LISTED = 50  # runs in team://runs, newest first
MAX_SCANNED = 1000  # newest runs looked at for the caller's own, when the server checks tokens


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

    @server.resource(
        "team://runs",
        name="runs",
        mime_type="application/json",
        description="Recent runs, newest first; a run waiting for a person shows the checkpoint under `waiting` "
        "(answer it with answer_checkpoint). Subscribe to it to be told when a run starts or finishes.",
    )
    async def runs_resource() -> dict[str, Any]:
        runs = await _service(state)
        # The caller's own (with auth on); one page read when the newest are theirs: the run pages poll this.
        try:
            mine = await runs.list(limit=LISTED, keep=lambda r: visible(r.owner), deep=MAX_SCANNED)
        except McpTeamError as exc:  # the runs database busy for seconds: said at once, to retry
            raise ResourceError(str(exc)) from None
        return {"runs": [_summary(r.run_id, r.status, r.request, r.started_at, r.waiting) for r in mine]}

    @server.resource(
        "team://runs/{run_id}",
        name="run",
        mime_type="application/json",
        description="A run's record: request, plan, every handoff with payload and result, status, usage, trace id. "
        "Subscribe to it to be told as the run goes.",
    )
    async def run_resource(run_id: str) -> str:
        runs = await _service(state)
        try:
            record = await runs.get(run_id)
        except McpTeamError as exc:  # the runs database busy for seconds: said at once, to retry
            raise ResourceError(str(exc)) from None
        if record is None or not visible(record.owner):  # another user's run does not exist for this one
            where = "the run store" if state.runs.durable else "this server's memory (--ephemeral: newest runs only)"
            raise ResourceNotFoundError(f"no run '{run_id}' in {where} (see team://runs)")
        return json.dumps(record.view(), indent=2)


async def _service(state: ServerState) -> "Runs":
    """The run service, or `ResourceError` saying why it is unavailable (say, an unwritable state directory):
    the client reads the reason, where anything else is "Error reading resource" and a traceback in the log."""
    try:
        return await state.runs.get()
    except ToolError as exc:
        raise ResourceError(str(exc)) from None


def _summary(
    run_id: str, status: str, request: str, started_at: "datetime", waiting: "Checkpoint | None" = None
) -> dict[str, Any]:
    """A run in the listing; `waiting`, in short, the checkpoint it waits at for a person (the whole question is
    in team://runs/{run_id}): a client sees which runs need someone without reading each."""
    asks = None
    if waiting is not None:
        summary = waiting.summary
        if len(summary) > WAITING_SUMMARY:
            summary = summary[: WAITING_SUMMARY - 1].rstrip() + "…"
        asks = {"name": waiting.name, "round": waiting.round, "summary": summary}
    return {
        "run_id": run_id,
        "status": status,
        "request": redact(request)[:200],  # redacted whole, then cut: no part of a secret
        "started_at": started_at.isoformat(),
        "uri": f"team://runs/{run_id}",
        "waiting": asks,
    }
