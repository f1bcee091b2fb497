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

import asyncio
import ctypes
import functools
import gc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

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
        """Refuse a request (or task) that is blank or longer than `max_request_chars`: either would cost a model
        call for nothing."""
        if not request.strip():
            raise ToolError(
                f"'{name}' is empty: say what the {'team' if name == 'request' else 'specialist'} should do"
            )
        _check_size(name, request, self.max_request_chars, "MCP_TEAM_MAX_REQUEST_CHARS")

    def check_task(self, task: str, context: str) -> None:
        """Refuse a specialist's task or context over its limit."""
        self.check_request(task, "task")
        _check_size("context", context, self.max_context_chars, "MCP_TEAM_MAX_CONTEXT_CHARS")


def size_problem(name: str, text: str, limit: int, variable: str) -> str | None:
    """What is wrong with `text` (the argument `name`) if it is longer than `limit` characters, naming the setting
    (`variable`) that sets the limit; None when it fits. Tools and prompts say it each in their own error."""
    if len(text) <= limit:
        return None
    return f"'{name}' is {len(text):,} characters, over this server's limit of {limit:,} ({variable})"


def _check_size(name: str, text: str, limit: int, variable: str) -> None:
    if (problem := size_problem(name, text, limit, variable)) is not None:
        raise ToolError(
            f"{problem}: send a shorter {name}, e.g. a summary or the part that matters, so the model is not paid "
            "to read the rest"
        )


RELEASE_AFTER = 0.5  # seconds without a run in progress before freed memory is given back


@dataclass
class RunSlots:
    """How many runs are in progress; a run over the limit is refused at once rather than queued. Once none
    has been for `RELEASE_AFTER` seconds, freed memory is given back to the OS (`release_memory`)."""

    running: int = 0
    releases: int = 0  # times memory was given back, for tests
    _release: asyncio.TimerHandle | None = field(default=None, repr=False)

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
                if self.running == 0:
                    self._release_soon()

        return run

    def _release_soon(self) -> None:
        # Not at once: when the last run returns, its reply, its session's streams and their garbage are
        # still alive; a second later they are gone and a collection frees them first.
        # A timer of the loop, not an anyio task: `guarded` runs in whichever request finished last, which has
        # no task group that outlives it, and the server always runs on asyncio (uvicorn; anyio.run's default).
        if self._release is not None:
            self._release.cancel()
        self._release = asyncio.get_running_loop().call_later(RELEASE_AFTER, self._release_if_idle)

    def _release_if_idle(self) -> None:
        self._release = None
        if self.running == 0:
            release_memory()
            self.releases += 1


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        return cast("Callable[[int], int]", libc.malloc_trim)
    except (OSError, AttributeError):  # not glibc (musl, macOS): the allocator keeps its own policy
        return None


def release_memory() -> None:
    """Give freed heap back to the OS. glibc keeps the arenas a burst of runs grew; once no run is in
    progress, `malloc_trim` returns their free pages. It frees most when Python objects live in glibc's heap
    too, with PYTHONMALLOC=malloc as the operating docs advise for a served process: Python's own allocator keeps each
    1 MiB arena any survivor of the burst sits in. Garbage in reference cycles (a run's tasks, frames and
    exceptions) is collected first, or its pages stay in use."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


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
