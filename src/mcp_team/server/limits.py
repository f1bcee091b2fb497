"""What a client may ask of this server: text sizes, runs at once, and budgets no larger than the operator's.

Every check here runs before any model call and answers with a `ToolError` that names the limit, the value
asked for and how to get under it.

Defaults, and why:
- `MCP_TEAM_MAX_REQUEST_CHARS` = 100,000 characters for a request (or a specialist's task). At 3 to 4
  characters a token that is 25,000 to 33,000 tokens: it fits the smallest context window among the default
  models (128k tokens for gpt-4o and gpt-4o-mini; Claude has 200k) with room left for the instructions, the
  handoff results and the answer, and since the supervisor reads it again on every turn, 10 turns of it stay
  under the default token budget (400,000).
- `MCP_TEAM_MAX_CONTEXT_CHARS` = 200,000 characters for the context handed to a specialist with its task:
  read once, by one specialist, so up to about half of a 128k-token window.
- `MCP_TEAM_MAX_RUNS` = 16 runs (and other model-backed tool calls) in progress at once per server. All of them
  share the server's model calls (`MCP_TEAM_MAX_CONCURRENCY`, 8 by default), so more would only wait while
  their state stays in memory; a client over the limit is told the server is busy and to retry later.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from mcp_team.handoffs import Budgets, validation_problems
from mcp_team.handoffs.budget import BudgetAboveLimit, merge_budgets

T = TypeVar("T")

DEFAULT_MAX_REQUEST_CHARS = 100_000
DEFAULT_MAX_CONTEXT_CHARS = 200_000
DEFAULT_MAX_RUNS = 16


class ServerLimits(BaseSettings):
    """The limits a client cannot lift, from `MCP_TEAM_*` variables."""

    model_config = SettingsConfigDict(env_prefix="MCP_TEAM_", extra="ignore")

    max_request_chars: int = Field(default=DEFAULT_MAX_REQUEST_CHARS, ge=100, description="A request or task.")
    max_context_chars: int = Field(default=DEFAULT_MAX_CONTEXT_CHARS, ge=100, description="A specialist's context.")
    max_runs: int = Field(default=DEFAULT_MAX_RUNS, ge=1, description="Runs in progress at once.")

    def check_request(self, request: str, name: str = "request") -> None:
        """Refuse a request (or task) longer than `max_request_chars`."""
        _check_size(name, request, self.max_request_chars, "MCP_TEAM_MAX_REQUEST_CHARS")

    def check_task(self, task: str, context: str) -> None:
        """Refuse a specialist's task or context over its limit."""
        self.check_request(task, "task")
        _check_size("context", context, self.max_context_chars, "MCP_TEAM_MAX_CONTEXT_CHARS")


def _check_size(name: str, text: str, limit: int, variable: str) -> None:
    if len(text) > limit:
        raise ToolError(
            f"'{name}' is {len(text):,} characters, over this server's limit of {limit:,} ({variable}): send a "
            f"shorter {name}, e.g. a summary or the part that matters, so the model is not paid to read the rest"
        )


@dataclass
class RunSlots:
    """How many runs are in progress; a run over the limit is refused at once rather than queued."""

    running: int = 0

    def guarded(self, work: Callable[..., Awaitable[T]], limit: int) -> Callable[..., Awaitable[T]]:
        """`work`, taking a slot while it runs; it raises `ToolError` (busy) when `limit` slots are taken."""

        async def run(*args: Any) -> T:
            if self.running >= limit:
                raise ToolError(
                    f"busy: this server already has {self.running} run(s) in progress, its limit "
                    f"(MCP_TEAM_MAX_RUNS={limit}); retry later"
                )
            self.running += 1
            try:
                return await work(*args)
            finally:
                self.running -= 1

        return run


def client_budgets(base: Budgets, **overrides: int | float | None) -> Budgets | None:
    """The budgets for a run whose client asked for `overrides` (None: not asked): each may lower the
    operator's budget (`base`, from the team file or the defaults), never raise it. None when nothing was
    asked. Raises `ToolError` naming the argument, the value and the limit."""
    if all(value is None for value in overrides.values()):
        return None
    try:
        return merge_budgets(base, overrides, cap=True)
    except BudgetAboveLimit as exc:
        limit = _number(exc.limit)
        raise ToolError(
            f"{exc}, this server's limit (set by the operator in the team file's [supervisor.budgets], or the "
            f"default): ask for at most {limit}, or leave {exc.name} out to use it"
        ) from None
    except ValidationError as exc:
        raise ToolError("; ".join(validation_problems(exc))) from None


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
