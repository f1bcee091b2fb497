"""The seam between a run and what executes it: branches, concurrent steps and recorded decisions.

A run asks its `Runtime` for the three things durable execution needs and in-memory execution
does not care about:

- `branch(seq)`: everything inside is handoff number `seq` of the run (all its attempts and its
  refine calls), so a durable runtime can number that handoff's steps in a namespace of their own
  and concurrent handoffs never share one step counter. The run enters it in the task that runs
  the handoff; supervisor turns, planning and synthesis run outside any branch, one after another.
- `gather(calls)`: run single-step calls of one branch concurrently (a specialist's tool calls of
  one turn), results in the order given, so a durable runtime can number them in that order
  before any of them starts.
- `decide(name, value)`: a decision whose outcome depends on how other branches were timed (a
  retry once a breaker may have opened, a start refused because a shared budget ran out). A
  replay must see the recorded value, never a new one. `name` is unique within the branch (or
  within the run's sequential part); `value` reads the run's state and has no side effects: the
  caller applies the outcome, so a replay that skips `value` charges nothing twice.

Model calls and tool calls become durable steps by wrapping the `Model` and `Tool` objects, not
here; budgets are charged around `Model.complete`, never inside it, so a replayed call is charged
once in the process that replays it. `Ephemeral` is the default: today's in-memory behaviour at
near-zero cost.

Where the run calls it: `branch` in `execution.execute` (every handoff, adaptive and planned);
`gather` in the specialist loop, for each turn's tool calls (one call each, at most one tool step
each); `decide` in `execution` only: "start" for a planned task that waited for its dependencies
(a `Refusal` or None) and "retry N" after a failed attempt N-1 that may be retried ("circuit_open",
"handoff_budget" or None). A turn's handoffs and a plan's first tasks are admitted in order
before any branch starts, so their admission needs no decision.

Not covered yet: a model call refused because the shared model-call or token budget ran out
while branches ran at once is refused at a moment that depends on their timing, and a replay may
refuse another call instead. Making that exact needs the check recorded with the call it refuses.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol, TypeVar

from mcp_team.specialists import gather_concurrently

T = TypeVar("T")


class Runtime(Protocol):
    """What a run needs from whatever executes it (see the module docstring)."""

    def branch(self, seq: int) -> AbstractContextManager[None]:
        """Run the body as handoff number `seq` of this run: its own branch of steps."""
        ...

    async def gather(self, calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
        """Await the calls concurrently; their results in the order given."""
        ...

    async def decide(self, name: str, value: Callable[[], T]) -> T:
        """`value()` the first time; on a replay, the value recorded then."""
        ...


_NO_BRANCH: AbstractContextManager[None] = nullcontext()  # reusable, so a branch costs no allocation


class Ephemeral:
    """In-memory execution: branches are plain code, decisions are taken on the spot, nothing is kept."""

    def branch(self, seq: int) -> AbstractContextManager[None]:
        return _NO_BRANCH

    async def gather(self, calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
        return await gather_concurrently(calls)

    async def decide(self, name: str, value: Callable[[], T]) -> T:
        return value()

    def __repr__(self) -> str:  # as `Team`'s default, in help(Team)
        return "EPHEMERAL"


EPHEMERAL = Ephemeral()
