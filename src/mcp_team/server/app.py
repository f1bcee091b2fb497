"""The MCP server for a team: `build_server` wires the parts, each in a module of its own.

- `state`: `ServerState`, what the server holds (settings, team, runs, sessions) and how a call gets a model
- `tools`: `run_team`, `plan_team` and the per-specialist tools; `progress`: run events as progress
- `prompts`: `supervisor` and the per-specialist prompts; `resources`: `team://...`
- `registry`: putting a team's specialists on the server; `watch`: reloading the team file
- `middleware`: what runs around every request; `strict`: exact errors for a client's mistakes
- `log_level`: log messages at the level a client asked for
- `shared_lifespan`: one set-up for all the connections served at once
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
from mcp.server.mcpserver import MCPServer

from mcp_team import __version__
from mcp_team.llm.settings import ModelSettings
from mcp_team.server.health import add_health_routes, dies_loudly
from mcp_team.server.lowlevel import lowlevel_of
from mcp_team.server.registry import apply_team
from mcp_team.server.runs import ServerRuns
from mcp_team.server.shared_lifespan import SharedLifespan
from mcp_team.server.state import ListenedBus, ServerState
from mcp_team.server.surface.checkpoint_tools import add_checkpoint_tools
from mcp_team.server.surface.limits import ServerLimits
from mcp_team.server.surface.log_level import install_set_level
from mcp_team.server.surface.prompts import add_supervisor_prompt
from mcp_team.server.surface.resources import add_resources
from mcp_team.server.surface.run_tools import add_run_tools
from mcp_team.server.surface.strict import install_strict_requests, name_invalid_params
from mcp_team.server.surface.tools import add_team_tools
from mcp_team.server.tasks.handlers import TasksExtension, legacy_tasks
from mcp_team.server.tasks.runs import ServerTaskRuns
from mcp_team.server.transports.middleware import (
    advertise_list_changed,
    flush_after_calls,
    redact_tool_results,
    remember_session,
)
from mcp_team.server.updates.run_updates import follow_runs, install_run_updates
from mcp_team.server.views.run_view import ViewSettings, run_view_app, view_settings
from mcp_team.server.watch import watch_team_file
from mcp_team.teamfile.loading import TeamSpec, load_team

if TYPE_CHECKING:
    from mcp.server.auth.provider import TokenVerifier
    from mcp.server.auth.settings import AuthSettings

    from mcp_team.runs.config import DurableConfig
    from mcp_team.telemetry.setup import Tracing

INSTRUCTIONS = """\
mcp-team puts a team of specialists ({names}) and a supervisor behind these tools.
- run_team: for a request that needs several kinds of work (e.g. research, then analysis, then writing and
  review). The supervisor delegates, runs independent work in parallel, retries failures and returns one
  answer with status complete, partial (saying what is missing) or failed. It can take minutes; progress is
  reported as handoffs start and finish.
- a specialist's own tool ({names}): for one focused task that needs only that skill; faster and cheaper.
- plan_team: to preview how the team would split a request, without running it.
- start_run: run_team without waiting (returns the run id at once); get_run follows it (wait_seconds waits for
  the answer), cancel_run stops it.{durable}
- answer_checkpoint: approve, revise or reject the step a run waits at for a person (get_run shows it).
Run records (every handoff with its payload and result) are resources at team://runs/{{run_id}}."""

DURABLE_INSTRUCTIONS = " Runs survive a restart of the server."


def build_server(
    model_settings: ModelSettings | None = None,
    team: TeamSpec | None = None,
    *,
    auth: tuple[TokenVerifier, AuthSettings] | None = None,
    watch: bool = False,
    tracing: Tracing | None = None,
    limits: ServerLimits | None = None,
    durable: DurableConfig | ServerRuns | None = None,
    environ: Mapping[str, str] | None = None,
    views: ViewSettings | None = None,
) -> MCPServer[ServerState]:
    """The MCP server for a team (by default the one `load_team` finds). Cheap to build: the model is made on
    first use, and external MCP servers start with the server's lifespan. With `watch`, edits to the team file
    reload the team and tell clients that the tool and prompt lists changed. With `tracing`, spans are
    flushed after every tool call (in the background, so an absent collector never delays a reply). `limits`
    (default: from the environment) bound what a client may ask (see `limits`). With `durable`, runs are
    durable and kept in its database (see server/runs.py); without, in memory. `environ` (default: the process's)
    is read here, at the edge: `MCP_TEAM_FILE` when no `team` is given, and the key variables its members name;
    so are the run view's `views` when not given (`serve --http` gives the ones its run pages have)."""
    environ = os.environ if environ is None else environ
    team = team or load_team(environ.get("MCP_TEAM_FILE") or None)
    base_settings = model_settings or ModelSettings()
    model_settings = base_settings.model_copy(update=team.model_overrides)
    bus = ListenedBus()
    runs = durable if isinstance(durable, ServerRuns) else ServerRuns(durable)
    state = ServerState(model_settings, team, runs, bus=bus, limits=limits or ServerLimits())
    state.base_settings, state.environ = base_settings, environ
    tasks = TasksExtension(ServerTaskRuns(state))

    # One set-up of `state` for all the connections served at once (in-memory clients each enter the lifespan)
    @SharedLifespan
    @asynccontextmanager
    async def lifespan(server: MCPServer[ServerState]) -> AsyncIterator[ServerState]:
        # Runs parked between 2026-07-28 sampling rounds, and the team-file watcher, live in this task group.
        # A task of it that dies takes the server down (exit 1, saying why), never leaves it half alive.
        async with dies_loudly(state.runs.liveness), anyio.create_task_group() as tg:
            state.rounds.task_group = tg
            await apply_team(server, state, state.team, tg)
            state.runs.follow = follow_runs(state, tg)
            state.runs.start(tg, state)
            watcher = anyio.CancelScope()
            if watch and state.team.path is not None:
                tg.start_soon(watch_team_file, server, state, state.team.path, tg, watcher)
            try:
                yield state
            finally:
                # Let the pool's task close the external servers in order; stop everything else.
                watcher.cancel()
                tasks.stop()  # stop waiting on task runs
                state.runs.stop()
                state.rounds.cancel_all()
                state.close_pool()

    server: MCPServer[ServerState] = MCPServer(
        "mcp-team",
        title="mcp-team",
        version=__version__,
        instructions=INSTRUCTIONS.format(
            names=", ".join(team.names), durable=DURABLE_INSTRUCTIONS if runs.durable else ""
        ),
        lifespan=lifespan,
        token_verifier=auth[0] if auth else None,
        auth=auth[1] if auth else None,
        subscriptions=bus,
        middleware=[
            remember_session(state),
            redact_tool_results(),
            *([flush_after_calls(state, tracing)] if tracing else []),
        ],
        # run_team as an MCP task, on a model of the server's own (a run on the client's model needs the call)
        extensions=[run_view_app(views or view_settings()), *([tasks] if tasks.runs.serves_tasks() else [])],
    )
    server.middleware.append(legacy_tasks(server, tasks))
    server.middleware.append(name_invalid_params())  # innermost: it sees the SDK's own validation of params
    advertise_list_changed(server)
    add_health_routes(server, state)  # /healthz and /readyz, on HTTP
    install_set_level(lowlevel_of(server))  # also declares the `logging` capability (2025-11-25)
    install_strict_requests(server)  # exact errors for unknown tools, prompts, resources and arguments
    add_team_tools(server)
    add_run_tools(server)
    add_checkpoint_tools(server)
    install_run_updates(server, state)  # a run's record, and the list of runs
    add_supervisor_prompt(server, state)
    # The specialists' tools and prompts are registered by the lifespan, once their MCP servers are up.
    add_resources(server, state)
    return server
