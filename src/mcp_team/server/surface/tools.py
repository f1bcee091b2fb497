"""The team's tools: `run_team`, `plan_team`, and one tool per specialist.

No `from __future__ import annotations` here: the SDK reads these signatures at runtime to build
the tools' JSON schemas.
"""

import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import Field

from mcp_team.errors import McpTeamError
from mcp_team.evals.recordings import RecordedTeam
from mcp_team.handoffs import Plan, PlanError, RunResult, Team
from mcp_team.handoffs.subteam import SubTeam
from mcp_team.runs.service import RunKept
from mcp_team.runs.types import Engine, RunRecord
from mcp_team.server.auth import principal
from mcp_team.server.client_features.elicitation import can_elicit, elicitation_approver
from mcp_team.server.client_features.sampling import CtxGetter
from mcp_team.server.state import ServerState, state_of
from mcp_team.server.surface.progress import progress_sink
from mcp_team.server.surface.results import tool_result
from mcp_team.server.surface.run_arguments import RunArguments, run_request, takes_run_arguments
from mcp_team.server.views.run_view import RUN_VIEW_META
from mcp_team.specialists import Specialist, SpecialistResult, Tool

# What `run_team` and `start_run` say until the team is loaded (the server's start), then `team_effects`.
CAUTIOUS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)
SpecialistTool = Callable[..., Awaitable[Annotated[CallToolResult, SpecialistResult] | InputRequiredResult]]


def team_effects(specialists: Iterable[Specialist]) -> ToolAnnotations:
    """What a call that runs `specialists` may do to the world, for MCP clients (which may skip asking their user
    before a read-only tool): read-only if every tool any of them may call only reads (members of a team inside
    the team too), destructive if one may delete or overwrite. Open world always: every call asks a model."""
    tools = [t for s in specialists for t in _tools_of(s)]
    return ToolAnnotations(
        read_only_hint=all(t.read_only for t in tools),
        destructive_hint=any(t.destructive and not t.read_only for t in tools),
        idempotent_hint=False,
        open_world_hint=True,
    )


def _tools_of(specialist: Specialist) -> Iterator[Tool]:
    yield from specialist.tools
    for member in specialist.members if isinstance(specialist, SubTeam) else ():
        yield from _tools_of(member)


def run_engine(state: ServerState, team: Team) -> Engine:
    """The engine a call's run runs on: `team` (on the server's model or the client's), recorded to
    MCP_TEAM_RECORD_DIR/<run id>.jsonl when that is set."""
    if state.model_settings.record_dir:
        return RecordedTeam(team, Path(state.model_settings.record_dir), into_directory=True)
    return state.engine.engine_for(team)


def run_result(record: RunRecord) -> RunResult:
    """A finished run's result, or `ToolError` for a run that could not go on (saying where its record is)."""
    if record.result is None or record.status == "interrupted":
        raise ToolError(
            f"run {record.run_id} stopped: {record.reason or record.status} (see team://runs/{record.run_id})"
        )
    return record.result


@takes_run_arguments
async def run_team(
    ctx: Context[Any, Any], arguments: RunArguments
) -> Annotated[CallToolResult, RunResult] | InputRequiredResult:
    """Run a request through the supervisor and its specialists and return one answer.

    The result lists every handoff, any failures and token usage; `status` is complete, partial (the
    answer says what is missing) or failed."""
    state = state_of(ctx)
    asked = run_request(state, arguments)
    if asked.checkpoints and not can_elicit(ctx) and state.run_settings.checkpoint_policy == "fail":
        # Asked for by this call, which cannot answer them: the run would only fail at the first.
        raise ToolError(
            "'checkpoints' need a client that can answer them (MCP elicitation), and this one declares none: leave "
            "'checkpoints' out, or start the run with start_run and answer them with answer_checkpoint"
        )
    asks = bool(asked.checkpoints or state.run_settings.checkpoints)

    async def work(team: Team, get_ctx: CtxGetter) -> RunResult:
        runs = await state.runs.get()
        own_model = state.own_models() is not None  # a run on the client's model runs in this call, and cannot resume
        recorded = bool(state.model_settings.record_dir)  # a recorded run is its own record: it never resumes
        approve = elicitation_approver(get_ctx, by_tool=own_model)
        try:
            record = await runs.run(asked, engine=run_engine(state, team), owner=principal(),
                                    on_event=progress_sink(get_ctx), approve=approve,
                                    resumable=own_model and not recorded, in_task=not own_model,
                                    stop=state.runs.asked_to_stop)  # fmt: skip
        except RunKept as kept:
            raise ToolError(
                f"the server is stopping: run {kept.run_id} is kept and goes on when it starts again; follow it then "
                f"with get_run (run_id {kept.run_id}) or team://runs/{kept.run_id}"
            ) from None
        except McpTeamError as exc:  # the runs database refused it: nothing ran
            raise ToolError(str(exc)) from None
        return run_result(record)

    result = await state.execute(ctx, work, asks=asks)
    if isinstance(result, InputRequiredResult):
        return result
    if result.status == "failed":
        reasons = "; ".join(f"{f.specialist}: {f.kind}: {f.reason}" for f in result.failures if not f.recovered)
        raise ToolError(
            f"the team could not answer (run {result.run_id}, see team://runs/{result.run_id}). "
            f"{reasons or result.answer}"
        )
    return tool_result(result)  # the answer first, for a reader of the text (server/surface/results.py)


async def plan_team(
    request: Annotated[str, Field(description="The request to plan.", min_length=1)],
    ctx: Context[Any, Any],
) -> Plan | InputRequiredResult:
    """Show the validated plan the team would run for a request (tasks, specialists, dependencies), without
    running it."""
    state_of(ctx).limits.check_request(request)
    try:
        return await state_of(ctx).execute(ctx, lambda team, _get_ctx: team.plan(request))
    except PlanError as exc:
        raise ToolError(str(exc)) from None


def specialist_tool(specialist: Specialist) -> SpecialistTool:
    """The tool that hands one self-contained task to `specialist`."""

    async def call(
        task: Annotated[
            str, Field(description="The task, self-contained: the specialist sees nothing else.", min_length=1)
        ],
        ctx: Context[Any, Any],
        context: Annotated[str, Field(description="Facts or earlier results the task needs.")] = "",
    ) -> Annotated[CallToolResult, SpecialistResult] | InputRequiredResult:
        state_of(ctx).limits.check_task(task, context)
        await ctx.report_progress(0, 1, f"{specialist.name}: {task[:100]}")
        state, owner = state_of(ctx), principal()

        def keep(run: RunResult) -> None:
            state.keep_run(run, owner)

        result = await state.execute(
            ctx, lambda team, _get_ctx: team.ask(specialist.name, task, context, on_finish=keep)
        )
        if isinstance(result, InputRequiredResult):
            return result
        await ctx.report_progress(1, 1, f"{specialist.name} {result.status}")
        if result.status == "failed":
            raise ToolError(f"{specialist.name} failed ({result.error_type}): {result.error}")
        return tool_result(result)  # the answer first, for a reader of the text (server/surface/results.py)

    return call


def described(tool: Callable[..., Any]) -> str:
    """A tool function's docstring as its description, without the indentation its source gives it (the SDK
    takes `__doc__` as it is)."""
    return inspect.cleandoc(tool.__doc__ or "")


def add_team_tools(server: MCPServer[ServerState]) -> None:
    """`run_team` and `plan_team`; the specialists' tools come and go with the team (see `registry`)."""
    server.add_tool(run_team, name="run_team", title="Run the team", annotations=CAUTIOUS, meta=RUN_VIEW_META,
                    description=described(run_team))  # fmt: skip
    server.add_tool(
        plan_team,
        name="plan_team",
        description=described(plan_team),
        title="Plan a request",
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False),
    )
