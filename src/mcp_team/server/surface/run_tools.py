"""Runs that outlive a call: `start_run` (returns the run id at once; it takes what `run_team` takes), `get_run`
(status, progress so far, the result when done; an optional bounded wait) and `cancel_run`. They need the
server's own model: a run on the client's model (sampling) cannot outlive the call that asks for its model calls,
so it goes through `run_team`. On a durable server (the default for `serve`) such a run survives a restart; on an
`--ephemeral` one it lives as long as the process.

No `from __future__ import annotations` here: the SDK reads these signatures at runtime.
"""

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from mcp_team.errors import McpTeamError
from mcp_team.handoffs import Team
from mcp_team.runs.errors import CancelRefused
from mcp_team.server.auth import principal, visible
from mcp_team.server.state import ServerState, state_of
from mcp_team.server.surface.results import tool_result
from mcp_team.server.surface.run_arguments import RunArguments, run_request, takes_run_arguments
from mcp_team.server.surface.tools import CAUTIOUS, described, run_engine
from mcp_team.server.views.run_view import RUN_VIEW_META

RunView = Annotated[CallToolResult, dict[str, Any]]  # a run's record, its answer first in the text (results.py)
MAX_WAIT_SECONDS = 50.0  # under the 60 s many clients give one tool call
RUN_ID = Field(
    description="The run id start_run returned.", min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.~-]+$"
)


async def _service(ctx: Context[Any, Any]) -> Any:
    return await state_of(ctx).runs.get()


@takes_run_arguments
async def start_run(ctx: Context[Any, Any], arguments: RunArguments) -> RunView:
    """Start a team run in the background and return its id at once; follow it with get_run (or the resource
    team://runs/{run_id}), stop it with cancel_run, answer its checkpoints with answer_checkpoint. It takes what
    run_team takes."""
    state = state_of(ctx)
    asked = run_request(state, arguments)
    models = state.own_models()
    if models is None:
        raise ToolError("start_run needs a model configured on the server (a run on the client's model through "
                        "sampling cannot outlive this call); use run_team")  # fmt: skip
    runs = await _service(ctx)
    if runs.running >= state.limits.max_runs:
        raise ToolError(f"busy: this server already has {runs.running} run(s) in progress, its limit "
                        f"(MCP_TEAM_MAX_RUNS={state.limits.max_runs}); retry later")  # fmt: skip
    team = Team(models, state.specialists, state.run_settings)
    try:
        record = await runs.start(asked, engine=run_engine(state, team), owner=principal(),
                                  resumable=not state.model_settings.record_dir)  # fmt: skip
    except McpTeamError as exc:  # the runs database refused it: nothing ran
        raise ToolError(str(exc)) from None
    return tool_result(record.view())  # the answer (or how to follow the run) first: server/surface/results.py


async def get_run(
    run_id: Annotated[str, RUN_ID],
    ctx: Context[Any, Any],
    wait_seconds: Annotated[
        float,
        Field(ge=0, le=MAX_WAIT_SECONDS, allow_inf_nan=False, strict=True,
              description=f"Wait up to this long for the run to finish (at most {MAX_WAIT_SECONDS:g} s)."),
    ] = 0,
) -> RunView:  # fmt: skip
    """A run's status, its handoffs so far, and its answer once it has finished (status complete, partial,
    failed, cancelled or interrupted)."""
    runs = await _service(ctx)
    try:
        await _own(runs, run_id)
        record = await (runs.wait(run_id, wait_seconds) if wait_seconds > 0 else runs.get(run_id))
    except McpTeamError as exc:  # the runs database busy for seconds: said at once, to retry
        raise ToolError(str(exc)) from None
    assert record is not None  # it was there a moment ago: runs are never deleted
    return tool_result(record.view())  # the answer (or how to follow the run) first: server/surface/results.py


async def cancel_run(run_id: Annotated[str, RUN_ID], ctx: Context[Any, Any]) -> RunView:
    """Cancel a run: its model and tool calls stop, and it does not resume after a restart. A run that has
    already finished is left as it is."""
    runs = await _service(ctx)
    await _own(runs, run_id)
    try:
        record = await runs.cancel(run_id, "cancelled with cancel_run")
    except CancelRefused as exc:  # a locked or read-only database: the cancel is recorded, not finished
        raise ToolError(str(exc.retried_with("Call cancel_run again"))) from None
    assert record is not None
    return tool_result(record.view())  # the answer (or how to follow the run) first: server/surface/results.py


async def _own(runs: Any, run_id: str) -> None:
    """`ToolError` unless the run exists and the caller may see it: a run started by a principal (with auth
    on) is theirs alone, as its task is."""
    record = await runs.get(run_id)
    if record is None or not visible(record.owner):
        raise ToolError(f"no run '{run_id}' on this server (see team://runs)")


def add_run_tools(server: MCPServer[ServerState]) -> None:
    """`start_run`, `get_run` and `cancel_run`."""
    server.add_tool(
        start_run,
        name="start_run",
        description=described(start_run),
        title="Start a team run",
        annotations=CAUTIOUS,  # until the team is loaded: then what the team may do (registry)
        meta=RUN_VIEW_META,
    )
    server.add_tool(
        get_run,
        name="get_run",
        description=described(get_run),
        title="Get a run",
        annotations=ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
        meta=RUN_VIEW_META,
    )
    server.add_tool(
        cancel_run,
        name="cancel_run",
        description=described(cancel_run),
        title="Cancel a run",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
        ),
    )
