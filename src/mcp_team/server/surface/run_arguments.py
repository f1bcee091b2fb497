"""The arguments of a run, as a client sends them: one definition (`RunArguments`) for `run_team`, `start_run`
and a `run_team` task, so their input schemas cannot drift apart; and `run_request`, which checks them against
the server's limits and makes them the run service's `RunRequest`.

No `from __future__ import annotations` here: the SDK reads these annotations at runtime to build the tools'
JSON schemas.
"""

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar, get_type_hints

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, BeforeValidator, Field

from mcp_team.handoffs.checkpoints import checkpoint_problems
from mcp_team.runs.types import RunRequest
from mcp_team.server.state import ServerState
from mcp_team.server.surface.limits import client_budgets

R = TypeVar("R")


def _a_number(value: object) -> object:
    """A budget of "3" or true is a client's mistake to name, not a number to guess (true was 1 handoff); a
    whole number written as 5.0 (some clients' JSON) is still 5."""
    if isinstance(value, bool | str):
        raise ValueError(f"must be a number, not {'a boolean' if isinstance(value, bool) else 'a string'}")
    return value


WholeNumber = BeforeValidator(_a_number)  # on the int, after its bound: else `ge` meets None, or the schema says "ge"


class RunArguments(BaseModel, defer_build=True):
    """What a client may ask a run for. The fields' order, types and descriptions are the tools' input schema."""

    request: Annotated[str, Field(description="What the team should do, in plain language.", min_length=1)]
    mode: Annotated[
        Literal["adaptive", "planned"] | None,
        Field(description="adaptive (default): the supervisor re-plans after each round; planned: plan first."),
    ] = None
    max_handoffs: Annotated[
        Annotated[int, Field(ge=1), WholeNumber] | None, Field(description="Cap on handoffs, retries included.")
    ] = None
    max_model_calls: Annotated[
        Annotated[int, Field(ge=2), WholeNumber] | None, Field(description="Cap on model calls.")
    ] = None
    max_tokens: Annotated[
        Annotated[int, Field(ge=1), WholeNumber] | None, Field(description="Cap on tokens over all calls.")
    ] = None
    deadline_seconds: Annotated[
        float | None, Field(gt=0, strict=True, allow_inf_nan=False, description="Wall-clock limit in seconds.")
    ] = None
    thread: Annotated[
        str | None,
        Field(
            description="Continue a conversation: runs with the same thread id see its earlier requests and answers.",
            min_length=1,
            max_length=128,
            pattern=r"^[A-Za-z0-9_.:-]+$",
        ),
    ] = None
    max_cost: Annotated[
        float | None,
        Field(
            gt=0,
            strict=True,
            allow_inf_nan=False,
            description="Cap on the cost in US dollars of the calls whose price is known; the run's notes say how "
            "many it could not count.",
        ),
    ] = None
    checkpoints: Annotated[
        list[str] | None,
        Field(
            description='Where to stop for your approval, added to the team\'s: "plan", "before:<member>". Asked '
            "through elicitation when the client can answer it, else the run waits for answer_checkpoint.",
        ),
    ] = None


def takes_run_arguments(
    tool: Callable[[Context[Any, Any], RunArguments], Awaitable[R]],
) -> Callable[..., Awaitable[R]]:
    """`tool(ctx, arguments)` as an MCP tool whose parameters are `RunArguments`' fields, one by one: the SDK builds
    a tool's input schema from its signature, and would nest a model parameter (`{"arguments": {...}}`)."""

    @functools.wraps(tool)
    async def flat(ctx: Context[Any, Any], **arguments: Any) -> R:
        return await tool(ctx, RunArguments(**arguments))

    hints = get_type_hints(RunArguments, include_extras=True)  # the fields' annotations as written, Field included
    fields = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=hints[name],
            default=inspect.Parameter.empty if field.is_required() else field.default,
        )
        for name, field in RunArguments.model_fields.items()
    ]
    own = inspect.signature(tool)
    flat.__signature__ = own.replace(parameters=[own.parameters["ctx"], *fields])  # type: ignore[attr-defined]
    return flat


def run_request(state: ServerState, arguments: RunArguments) -> RunRequest:
    """What a caller asked for, once it passed the server's limits: the client's budgets within the team's, and
    checkpoints that name members. `ToolError` saying what to change."""
    state.limits.check_request(arguments.request)
    budgets = client_budgets(
        state.run_settings.budgets,
        max_handoffs=arguments.max_handoffs,
        max_model_calls=arguments.max_model_calls,
        max_tokens=arguments.max_tokens,
        deadline_seconds=arguments.deadline_seconds,
        max_cost=arguments.max_cost,
    )
    checkpoints = arguments.checkpoints or []
    if problems := checkpoint_problems(checkpoints, [s.name for s in state.specialists]):
        raise ToolError("invalid checkpoints: " + "; ".join(problems))
    return RunRequest(
        request=arguments.request,
        mode=arguments.mode,
        budgets=budgets,
        thread=arguments.thread,
        checkpoints=tuple(checkpoints),
    )
