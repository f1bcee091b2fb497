"""The team's prompts, so a client's own model can play each role: `supervisor` and one per specialist.

No `from __future__ import annotations` here: the SDK reads these signatures at runtime to build
the prompts' arguments.
"""

from collections.abc import Callable
from typing import Annotated, Any

import mcp_types as types
from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Prompt, UserMessage
from pydantic import Field

from mcp_team.handoffs.prompts import SUPERVISOR_INSTRUCTIONS, describe_team
from mcp_team.server.state import ServerState, state_of
from mcp_team.server.surface.limits import size_problem
from mcp_team.specialists import Specialist, handoff_message

# The settings of the limits a prompt's arguments are held to: those of the tools taking the same text (run_team's
# request, a specialist's task and context), so a prompt never leads a model to a call that would be refused.
REQUEST_CHARS = "MCP_TEAM_MAX_REQUEST_CHARS"
CONTEXT_CHARS = "MCP_TEAM_MAX_CONTEXT_CHARS"

# The engine's instructions name the tools its own supervisor gets (`handoff_to_<name>`, `finalize`); a client's
# model has this server's tools instead.
FOR_A_CLIENT = {
    "with its handoff_to_<name> tool": "with this server's tool named after it",
    "call finalize with the complete answer": "write the complete answer",
}


def supervisor_prompt(state: ServerState) -> Callable[[str], list[UserMessage]]:
    """The supervisor's instructions for the current team (read at each `prompts/get`, so a reload shows)."""

    def supervisor(request: Annotated[str, Field(description="The request to orchestrate.")]) -> list[UserMessage]:
        _check_said("supervisor", "request", request, "team")
        _check_argument("supervisor", "request", request, state.limits.max_request_chars, REQUEST_CHARS)
        system = SUPERVISOR_INSTRUCTIONS.format(team=describe_team(state.specialists))
        for engine_words, client_words in FOR_A_CLIENT.items():
            system = system.replace(engine_words, client_words)
        hint = "If your client does not show this server's tools, do each task yourself as that specialist would."
        return [UserMessage(f"{system}\n\n{hint}\n\nRequest:\n{request}")]

    return supervisor


def specialist_prompt(specialist: Specialist) -> Callable[..., list[UserMessage]]:
    """A specialist's instructions with a task (and its context) handed over as the team would."""

    def prompt(
        task: Annotated[str, Field(description="The task for this specialist.")],
        context: Annotated[str, Field(description="Context the task needs.")] = "",
        *,
        ctx: Context[Any, Any],
    ) -> list[UserMessage]:
        limits = state_of(ctx).limits  # as the specialist's tool holds its task and context
        _check_said(specialist.name, "task", task, "specialist")
        _check_argument(specialist.name, "task", task, limits.max_request_chars, REQUEST_CHARS)
        _check_argument(specialist.name, "context", context, limits.max_context_chars, CONTEXT_CHARS)
        return [UserMessage(f"{specialist.instructions}\n\n{handoff_message(task, context)}")]

    return prompt


def _check_said(prompt: str, name: str, text: str, who: str) -> None:
    """-32602 for a blank request or task, as the tools taking it refuse one: the model would get nothing to do."""
    if not text.strip():
        said = f"prompt {prompt}: argument '{name}' is empty: say what the {who} should do"
        raise MCPError(types.INVALID_PARAMS, said)


def _check_argument(prompt: str, name: str, text: str, limit: int, variable: str) -> None:
    """-32602 for an argument of `prompt` longer than `limit`, naming it, its size, the limit and its setting."""
    if (problem := size_problem(name, text, limit, variable)) is not None:
        raise MCPError(
            types.INVALID_PARAMS,
            f"prompt {prompt}: argument {problem}: send a shorter {name}, e.g. a summary or the part that matters, "
            "or ask the server's operator to raise the limit",
        )


def add_supervisor_prompt(server: MCPServer[ServerState], state: ServerState) -> None:
    """The `supervisor` prompt; the specialists' prompts come and go with the team (see `registry`)."""
    server.add_prompt(
        Prompt.from_function(
            supervisor_prompt(state),
            name="supervisor",
            description="Play the supervisor: plan and delegate a request.",
        )
    )
