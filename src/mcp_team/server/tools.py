"""The team's tools: `run_team`, `plan_team`, and one tool per specialist.

No `from __future__ import annotations` here: the SDK reads these signatures at runtime to build
the tools' JSON schemas.
"""

import functools
import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import BeforeValidator, Field

from mcp_team.evals.recordings import record_run
from mcp_team.handoffs import Budgets, Plan, PlanError, RunResult, Team
from mcp_team.handoffs.checkpoints import checkpoint_problems
from mcp_team.handoffs.subteam import SubTeam
from mcp_team.server.durability import RunRequest, run_and_wait
from mcp_team.server.elicitation import can_elicit, elicitation_approver
from mcp_team.server.limits import client_budgets
from mcp_team.server.progress import progress_sink
from mcp_team.server.results import tool_result
from mcp_team.server.sampling import CtxGetter
from mcp_team.server.state import ServerState, state_of
from mcp_team.server.tasks import principal
from mcp_team.server.views import RUN_VIEW_META, live_record
from mcp_team.specialists import Specialist, SpecialistResult, Tool

THREAD_FIELD = Field(
    description="Continue a conversation: runs with the same thread id see its earlier requests and answers.",
    min_length=1,
    max_length=128,
    pattern=r"^[A-Za-z0-9_.:-]+$",
)
# What `run_team` and `start_run` say until the team is loaded (the server's start), then `team_effects`.
CAUTIOUS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)
SpecialistTool = Callable[..., Awaitable[Annotated[CallToolResult, SpecialistResult] | InputRequiredResult]]


# The arguments run_team and start_run share, one definition each.
Request = Annotated[str, Field(description="What the team should do, in plain language.", min_length=1)]
RunMode = Annotated[
    Literal["adaptive", "planned"] | None,
    Field(description="adaptive (default): the supervisor re-plans after each round; planned: plan first."),
]


def _a_number(value: object) -> object:
    """A budget of "3" or true is a client's mistake to name, not a number to guess (true was 1 handoff); a
    whole number written as 5.0 (some clients' JSON) is still 5."""
    if isinstance(value, bool | str):
        raise ValueError(f"must be a number, not {'a boolean' if isinstance(value, bool) else 'a string'}")
    return value


WholeNumber = BeforeValidator(_a_number)  # on the int, after its bound: else `ge` meets None, or the schema says "ge"
MaxHandoffs = Annotated[
    Annotated[int, Field(ge=1), WholeNumber] | None, Field(description="Cap on handoffs, retries included.")
]
MaxModelCalls = Annotated[Annotated[int, Field(ge=2), WholeNumber] | None, Field(description="Cap on model calls.")]
MaxTokens = Annotated[
    Annotated[int, Field(ge=1), WholeNumber] | None, Field(description="Cap on tokens over all calls.")
]
DeadlineSeconds = Annotated[
    float | None, Field(gt=0, strict=True, allow_inf_nan=False, description="Wall-clock limit in seconds.")
]
MaxCost = Annotated[
    float | None,
    Field(
        gt=0,
        strict=True,
        allow_inf_nan=False,
        description="Cap on the cost in US dollars of the calls whose price is known; the run's notes say how many "
        "it could not count.",
    ),
]
Thread = Annotated[str | None, THREAD_FIELD]


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


def checked_request(
    state: ServerState,
    request: str,
    max_handoffs: int | None,
    max_model_calls: int | None,
    max_tokens: int | None,
    deadline_seconds: float | None,
    max_cost: float | None,
) -> Budgets | None:
    """The run's budgets (the client's caps within the team's; None: the team's), once the request passed
    the server's limits."""
    state.limits.check_request(request)
    return client_budgets(
        state.run_settings.budgets,
        max_handoffs=max_handoffs,
        max_model_calls=max_model_calls,
        max_tokens=max_tokens,
        deadline_seconds=deadline_seconds,
        max_cost=max_cost,
    )


async def run_team(
    request: Request,
    ctx: Context[Any, Any],
    mode: RunMode = None,
    max_handoffs: MaxHandoffs = None,
    max_model_calls: MaxModelCalls = None,
    max_tokens: MaxTokens = None,
    deadline_seconds: DeadlineSeconds = None,
    thread: Thread = None,
    max_cost: MaxCost = None,
    checkpoints: Annotated[
        list[str] | None,
        Field(
            description='Where to stop for your approval (elicitation), added to the team\'s: "plan", '
            '"before:<member>".'
        ),
    ] = None,
) -> Annotated[CallToolResult, RunResult] | InputRequiredResult:
    """Run a request through the supervisor and its specialists and return one answer.

    The result lists every handoff, any failures and token usage; `status` is complete, partial (the
    answer says what is missing) or failed."""
    state = state_of(ctx)
    budgets = checked_request(state, request, max_handoffs, max_model_calls, max_tokens, deadline_seconds, max_cost)

    if problems := checkpoint_problems(checkpoints or [], [s.name for s in state.specialists]):
        raise ToolError("invalid checkpoints: " + "; ".join(problems))
    if checkpoints and not can_elicit(ctx) and state.run_settings.checkpoint_policy == "fail":
        # Asked for by this call, which cannot answer them: the run would only fail at the first.
        other = (
            "use start_run with a team file's checkpoints and answer them with answer_checkpoint"
            if _start_run_works(state)
            else "call from a client that supports elicitation"
        )
        raise ToolError(
            "'checkpoints' need a client that can answer them (MCP elicitation), and this one declares none: leave "
            f"'checkpoints' out, or {other}"
        )
    asks = bool(checkpoints or state.run_settings.checkpoints)
    asked = RunRequest(request, mode, budgets, thread, checkpoints=tuple(checkpoints or ()))
    durability = state.durability
    if thread is not None and durability is None:
        raise ToolError("'thread' needs a durable run: this server has durable runs off (--ephemeral)")

    async def work(team: Team, get_ctx: CtxGetter) -> RunResult:
        if durability is not None and not state.model_settings.record_dir:
            runs = await durability.service()
            progress = progress_sink(get_ctx)
            resumable = state.own_models() is not None  # a run on the client's model cannot resume
            if resumable or not asks:  # a durable run waiting at a checkpoint survives a restart (issue 13)
                approve = elicitation_approver(get_ctx, by_tool=resumable)
                return await run_and_wait(runs, state.engine, team, asked, resumable=resumable, on_event=progress,
                                          approve=approve, owner=principal(),
                                          stop=durability.asked_to_stop)  # fmt: skip
        run = functools.partial(
            team.run,
            mode=mode,
            budgets=budgets,
            on_event=live_record(state.save_run, progress_sink(get_ctx)),
            on_finish=state.save_run,
            checkpoints=checkpoints or (),
            approve=elicitation_approver(get_ctx),
        )
        if state.model_settings.record_dir:  # MCP_TEAM_RECORD_DIR: every run to <dir>/<run id>.jsonl
            run_id = uuid.uuid4().hex
            path = Path(state.model_settings.record_dir) / f"{run_id}.jsonl"
            return await record_run(team, path, request, run_id=run_id, **run.keywords)
        return await run(request)

    result = await state.execute(ctx, work, asks=asks)
    if isinstance(result, InputRequiredResult):
        return result
    if result.status == "failed":
        reasons = "; ".join(f"{f.specialist}: {f.kind}: {f.reason}" for f in result.failures if not f.recovered)
        raise ToolError(
            f"the team could not answer (run {result.run_id}, see team://runs/{result.run_id}). "
            f"{reasons or result.answer}"
        )
    return tool_result(result)  # the answer first, for a reader of the text (server/results.py)


def _start_run_works(state: ServerState) -> bool:
    """Whether start_run can run a team here, its checkpoints answered with answer_checkpoint: durable runs on,
    on the server's own model (run_tools.start_run), not recording runs to files (which runs them in process)."""
    settings = state.model_settings
    own_model = settings.configured_backend() not in (None, "sampling")
    return state.durability is not None and not settings.record_dir and own_model


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
        result = await state_of(ctx).execute(
            ctx, lambda team, _get_ctx: team.ask(specialist.name, task, context, on_finish=state_of(ctx).save_run)
        )
        if isinstance(result, InputRequiredResult):
            return result
        await ctx.report_progress(1, 1, f"{specialist.name} {result.status}")
        if result.status == "failed":
            raise ToolError(f"{specialist.name} failed ({result.error_type}): {result.error}")
        return tool_result(result)  # the answer first, for a reader of the text (server/results.py)

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
