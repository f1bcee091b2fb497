"""The seam between a run and what executes it: concurrent branches, concurrent steps, recorded decisions.

A run asks its `Runtime` for the three things durable execution needs and in-memory execution
does not care about:

- `branches(work)`: run these bodies concurrently, each as a branch of its own, and return when all
  have ended. A branch is one handoff with everything it does (its attempts, refine calls, checkpoint
  and gate decisions, a sub-team's whole sub-run); its `key` names it uniquely within the run (the
  handoff's id qualified by its run or sub-run: `<run id>/h3`, `<run id>/h2.1/h1`). A durable runtime
  runs each branch as a workflow of its own so that concurrent branches never share one step counter;
  the bodies are started in the order given. If the caller is cancelled, every branch is cancelled and
  has ended before the cancellation goes on; a body that raises cancels the others, as a task group does.
- `gather(calls)`: run single-step calls of one branch concurrently (a specialist's tool calls of
  one turn), results in the order given, so a durable runtime can number them in that order
  before any of them starts.
- `decide(name, value)`: a decision whose outcome depends on how other branches were timed (a
  retry once a breaker may have opened, a start refused because a shared budget ran out, the
  number of a handoff a plan's review adds). A replay must see the recorded value, never a new one.
  `value` reads the run's state and has no side effects: the caller applies the outcome, so a replay
  that skips `value` charges nothing twice.

Model calls and tool calls become durable steps by wrapping the `Model` and `Tool` objects, not
here; budgets are charged around `Model.complete`, never inside it, so a replayed call is charged
once in the process that replays it. `Ephemeral` is the default: today's in-memory behaviour at
near-zero cost.

Where the run calls it: `branches` in `execution.dispatch` (a turn's admitted handoffs) and
`planner.run_plan` (every task of a plan, each waiting for its dependencies inside its branch);
`gather` in the specialist loop, for each turn's tool calls; `decide` in `execution` ("start" for a
planned task that waited for its dependencies, "retry N", "fallback N"), `review` ("revise N", "plan
revise") and `review.revise_in_plan` (the numbers of the handoffs a review adds).

Not covered: a model call refused because the shared model-call or token budget ran out while
branches ran at once is refused at a moment that depends on their timing, and a replay may refuse
another call instead. Making that exact needs the check recorded with the call it refuses.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import anyio

from mcp_team.specialists import gather_concurrently

T = TypeVar("T")


@dataclass(frozen=True)
class Branch:
    """One branch of a run: `body` runs it; `key` names it uniquely within the run (see `Runtime.branches`)."""

    key: str
    body: Callable[[], Coroutine[object, object, None]]


class Runtime(Protocol):
    """What a run needs from whatever executes it (see the module docstring)."""

    async def branches(self, work: Sequence[Branch]) -> None:
        """Run the bodies concurrently, each as a branch of its own; return when all have ended."""
        ...

    async def gather(self, calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
        """Await the calls concurrently; their results in the order given."""
        ...

    async def decide(self, name: str, value: Callable[[], T]) -> T:
        """`value()` the first time; on a replay, the value recorded then."""
        ...


class Ephemeral:
    """In-memory execution: branches are plain code, decisions are taken on the spot, nothing is kept."""

    async def branches(self, work: Sequence[Branch]) -> None:
        if len(work) == 1:  # alone: in the caller's task, as a plain call
            await work[0].body()
            return
        async with anyio.create_task_group() as tg:
            for branch in work:
                # Named: anyio otherwise builds a name from the function's module and qualname.
                tg.start_soon(branch.body, name=branch.key)

    async def gather(self, calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
        return await gather_concurrently(calls)

    async def decide(self, name: str, value: Callable[[], T]) -> T:
        return value()

    def __repr__(self) -> str:  # as `Team`'s default, in help(Team)
        return "EPHEMERAL"


EPHEMERAL = Ephemeral()
