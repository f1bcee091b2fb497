"""The durable side of the engine's runtime seam: branches (child workflows, runs/branches.py), concurrent
single steps, recorded decisions, and the model and tool wrappers that make each call a DBOS step.

Inside a run's workflows every model call and every side-effecting tool call is a step: its result (or
its error) is stored, and a replay after a crash gets the stored value instead of calling again. A step
that was running when the process died has no stored result and runs again (at-least-once): only the
call in flight at the crash can repeat.

Step names carry a digest of the call's input (`model:specialist:3f2a…`): DBOS checks each replayed
step's name against the recorded one, so a replay that would ask something different from what was
recorded (changed prompts, a different team, a timing-dependent decision that went the other way) stops
with `DBOSUnexpectedStepError` instead of silently handing back an answer to another question.
Everything here is DBOS's public API (`DBOS.run_step_async`, `DBOS.reserve_step`, child workflows).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import anyio
import sqlalchemy as sa
from dbos import DBOS

from mcp_team.handoffs import Team
from mcp_team.handoffs.checkpoints import Approver
from mcp_team.handoffs.runtime import Branch
from mcp_team.handoffs.subteam import SubTeam
from mcp_team.llm import Model, ModelRequest, ModelResponse
from mcp_team.llm.call import timed_out
from mcp_team.llm.wrappers import WrapperModel, map_models
from mcp_team.runs.branches import Branches
from mcp_team.runs.errors import CheckpointFailed, raise_if_diverged
from mcp_team.specialists import Specialist
from mcp_team.specialists.tools import Tool, capped

T = TypeVar("T")

PURE_TOOLS = frozenset({"calculate"})
"""Tools with no side effects and cheap, deterministic results: not worth a step (~2 ms each)."""


async def step(name: str, func: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
    """`await func(*args)` as a step named `name` of the current workflow; `ReplayDiverged` when a replay finds
    another step recorded at this point."""
    try:
        return await DBOS.run_step_async({"name": name}, func, *args)
    except sa.exc.SQLAlchemyError as exc:  # DBOS's own write: our calls never touch the runs database
        raise CheckpointFailed(exc) from exc
    except Exception as exc:
        raise_if_diverged(exc)
        raise


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


class DurableRuntime:
    """The `Runtime` the engine runs on inside a run's workflows (handoffs/runtime.py names the seam).

    `approve`: the run's checkpoint approver, whose answers are steps (runs/approvals.py)."""

    def __init__(self, run_id: str, branches: Branches, approve: Approver | None = None) -> None:
        self.run_id, self._branches, self.approve = run_id, branches, approve

    async def branches(self, work: Sequence[Branch]) -> None:
        """Each branch a child workflow (runs/branches.py); one alone runs inline: nothing runs beside it, so its
        steps are the current workflow's, in order, on every replay too."""
        if len(work) == 1:
            await work[0].body()
            return
        await self._branches.run(self.run_id, work)

    async def gather(self, calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
        """Run single-step calls concurrently; results in order. Each call is one step (ids drawn in order
        before any starts), so a replay maps every stored result to its own call. All calls run to the
        end; then the first failure, in call order, is raised."""
        reservations = [DBOS.reserve_step() for _ in calls]

        def as_step(i: int, call: Callable[[], Awaitable[T]]) -> Callable[[], Awaitable[T]]:
            async def body() -> T:
                return await call()

            async def run() -> T:
                try:
                    return await reservations[i].run_async({"name": "gather"}, body)
                except sa.exc.SQLAlchemyError as exc:
                    raise CheckpointFailed(exc) from exc
                except Exception as exc:
                    raise_if_diverged(exc)
                    raise

            return run

        return await _run_all([as_step(i, c) for i, c in enumerate(calls)])

    async def decide(self, name: str, value: Callable[[], T]) -> T:
        """A decision that depends on timing (which branch finished first): recorded, replayed as recorded."""

        async def compute() -> T:
            return value()

        return await step(f"decide:{name}", compute)


def _plain(call: Callable[[], Awaitable[T]]) -> Callable[[], Awaitable[T]]:
    async def run() -> T:
        return await call()

    return run


async def _run_all(calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    outcomes: list[Any] = [None] * len(calls)
    failed: list[bool] = [False] * len(calls)

    async def one(i: int) -> None:
        try:
            outcomes[i] = await calls[i]()
        except Exception as exc:
            outcomes[i], failed[i] = exc, True

    async with anyio.create_task_group() as tg:
        for i in range(len(calls)):
            tg.start_soon(one, i)
    for i, bad in enumerate(failed):
        if bad:
            raise outcomes[i]
    return outcomes


class DurableModel(WrapperModel):
    """A `Model` whose `complete` is a step. The call timeout is enforced inside the step, so a timed-out
    call is recorded as `ModelError("timeout")` and a replay sees the same timeout. Endpoint and prices are
    the wrapped model's (`WrapperModel`)."""

    def __init__(self, wrapped: Model, role: str, timeout: float | None = None, said: float | None = None) -> None:
        super().__init__(wrapped)
        self.role, self.timeout = role, timeout
        self.said = said if said is not None else timeout  # the call timeout as set (`timeout` leaves a margin)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await step(f"model:{self.role}:{_digest(request.model_dump_json())}", self._call, request)

    async def _call(self, request: ModelRequest) -> ModelResponse:
        if self.timeout is None:
            return await self.wrapped.complete(request)
        with anyio.move_on_after(self.timeout) as limit:
            return await self.wrapped.complete(request)
        assert limit.cancelled_caught
        raise timed_out(self.wrapped.name, self.said or self.timeout)


def durable_tool(tool: Tool) -> Tool:
    """`tool` with `run` as a step (pure tools are returned as they are). A `ToolFailed` is recorded too."""
    if tool.name in PURE_TOOLS:
        return tool
    run = tool.run

    async def call(args: dict[str, Any]) -> str:
        output = await run(args)  # cut here too: the step's record keeps no more than the model sees
        return capped(output, tool.max_result_chars) if isinstance(output, str) else output

    async def durable_run(args: dict[str, Any]) -> str:
        return await step(f"tool:{tool.name}:{_digest(repr(sorted(args.items())))}", call, args)

    return replace(tool, run=durable_run)  # its limits and hints (max_result_chars, read_only...) kept


TIMEOUT_MARGIN = 0.05
"""Seconds by which a durable model call times out before the engine's own limit, so the step records
the timeout (a step cancelled from outside records nothing and would run again after a restart)."""


def durable_team(team: Team) -> Team:
    """`team` with every model call and every side-effecting tool call a step (in a workflow)."""
    timeout = team.settings.call_timeout
    step_timeout = max(timeout - TIMEOUT_MARGIN, timeout / 2)
    models = map_models(team.models, lambda m: DurableModel(m, _label(m), step_timeout, said=timeout))
    specialists = [_durable_specialist(s) for s in team.specialists]
    return Team(models, specialists, team.settings, team.runtime)


def _label(model: Model) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in model.name)[:40] or "model"


def _durable_specialist(specialist: Specialist) -> Specialist:
    if isinstance(specialist, SubTeam):  # a team inside the team: its members' tools are steps too
        members = tuple(_durable_specialist(m) for m in specialist.members)
        specialist = specialist.model_copy(update={"members": members})
    if not specialist.tools:
        return specialist
    return specialist.model_copy(update={"tools": tuple(durable_tool(t) for t in specialist.tools)})
