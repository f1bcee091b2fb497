"""A durable run's concurrent branches as DBOS child workflows, on DBOS's public API.

DBOS numbers a workflow's steps with one counter, handed out in the order steps start: concurrent branches
of one workflow would interleave their step ids one way when they run and another when a crash replays them
(../shared/docs/dbos-durable.md measured it: wrong outputs or a failed replay). DBOS's own pattern for
concurrent work is a child workflow per branch, started in a fixed order; each has its own counter.

A branch is engine code that reads and writes the run's state in memory (budgets, breakers, records), so
its body cannot be a self-contained workflow function with serializable arguments. Instead:

- The parent publishes each branch's body here under the branch's workflow id (the branch key the engine
  gives, e.g. `<run id>/h3`), then starts the child workflow `branch_workflow` under that id. The child takes
  its body from here and runs it in its own task, so every step of the body is the child's.
- The children are started at once, one task each, begun in the branches' order: DBOS records a child under
  the parent's next step id, which `DBOS.start_workflow_async` takes before its first await, so the ids follow
  the order the tasks begin in, on every replay too (starting them one after another cost a K=32 fan-out about
  90 ms of wall time: two database round trips each). Should a DBOS release take the id later, a replay that
  numbers them otherwise finds another child recorded under an id than the one it asks for: the run stops
  as diverged (`BranchesDiverged`), never handed another branch's results.
- A child never ends before its run does: once its body has ended it waits for the run's release, which comes
  only after the run's final record is stored. So after a crash every branch of an unfinished run is still
  pending; recovery (runs/recovery.py) resumes the run and all its branches in this one process, the parent's
  replay publishes the bodies again, and each child runs its body again from its own recorded steps: the run's
  in-memory state is rebuilt exactly as a replay of one workflow would rebuild it. A finished child would hand
  the parent only its result, and the state its body had built would be lost.
- A recovered child may start before its parent has replayed up to it: it waits for its body. If its run is
  over (its record finished: the run was cancelled, or its end was recorded before DBOS's), it ends at once.
- When the process stops, the children still waiting are cancelled, not ended: they stay pending and resume
  with their run.

Everything here runs on the event loop DBOS adopted at launch (runs/launch.py): bodies, futures and cancel
scopes belong to it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import sqlalchemy as sa
from dbos import DBOS, SetWorkflowID
from opentelemetry import context as otel_context

from mcp_team.handoffs.runtime import Branch
from mcp_team.runs import workflow
from mcp_team.runs.errors import BranchesDiverged, CheckpointFailed

log = logging.getLogger(__name__)

BRANCH_WORKFLOW = "mcp_team.branch"
OVER_POLL = 5.0  # seconds between looks at whether the run of a child still waiting for its body is over


@dataclass
class _Body:
    """One branch's body, published by its parent and run by its child workflow."""

    run: Callable[[], Coroutine[object, object, None]]
    trace: otel_context.Context  # the parent's trace context: a recovered child has none of its own
    ended: anyio.Event = field(default_factory=anyio.Event)
    error: BaseException | None = None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    async def execute(self) -> None:
        token = otel_context.attach(self.trace)
        try:
            with self.scope:  # cancelled by the parent (its run cancelled, its deadline) or by a stop
                await self.run()
        except anyio.get_cancelled_exc_class():
            raise  # not the parent's: the task itself (DBOS's shutdown)
        except BaseException as exc:  # raised by the parent, as from a task group (never recorded as DBOS's error)
            self.error = exc
        finally:
            otel_context.detach(token)
            self.ended.set()

    def cancel(self) -> None:
        self.scope.cancel()


@dataclass
class _Run:
    """What this process holds of one run's branches."""

    run_id: str
    bodies: dict[str, asyncio.Future[_Body | None]] = field(default_factory=dict)  # by workflow id
    released: anyio.Event = field(default_factory=anyio.Event)
    waiting: set[anyio.CancelScope] = field(default_factory=set)  # children waiting for a body or the release

    def body(self, workflow_id: str) -> asyncio.Future[_Body | None]:
        return self.bodies.setdefault(workflow_id, asyncio.get_running_loop().create_future())


class Branches:
    """The branches of the durable runs of this process (one per process: a recovered child finds its body
    here by its run id). `is_over(run_id)` says whether a run is over for good (its record finished)."""

    def __init__(self, is_over: Callable[[str], Awaitable[bool]]) -> None:
        self.is_over = is_over
        self._runs: dict[str, _Run] = {}

    def _run(self, run_id: str) -> _Run:
        return self._runs.setdefault(run_id, _Run(run_id))

    # --- the parent's side ----------------------------------------------------------------------
    async def run(self, run_id: str, work: Sequence[Branch]) -> None:
        """Run `work` as child workflows of the current workflow (started in order), until every body has ended.
        Cancelled, it cancels every body and waits for them; a body that raises cancels the others, then its
        error is raised (as from a task group)."""
        run = self._run(run_id)
        bodies: list[_Body] = []
        with anyio.CancelScope(shield=True):  # a child started is a body supervised: never half of a start
            for branch in work:
                body = _Body(branch.body, otel_context.get_current())
                future = run.body(branch.key)
                if not future.done():
                    future.set_result(body)
                bodies.append(body)

            async def start(branch: Branch) -> None:
                try:
                    with SetWorkflowID(branch.key):
                        handle = await DBOS.start_workflow_async(branch_workflow, run_id)
                except sa.exc.SQLAlchemyError as exc:
                    raise CheckpointFailed(exc) from exc
                if handle.get_workflow_id() != branch.key:
                    raise BranchesDiverged(
                        f"the replay started branch {branch.key} where the run had started {handle.get_workflow_id()}"
                    )

            async with anyio.create_task_group() as starting:
                for branch in work:
                    starting.start_soon(start, branch)
        try:
            async with anyio.create_task_group() as tg:
                for body in bodies:
                    tg.start_soon(_watch, body, bodies)
        except BaseException:
            with anyio.CancelScope(shield=True):
                for body in bodies:
                    body.cancel()
                for body in bodies:
                    await body.ended.wait()
            raise
        errors = [body.error for body in bodies if body.error is not None]
        if errors:
            raise BaseExceptionGroup("a branch of the run raised", errors)

    def finish(self, run_id: str) -> None:
        """The run is over for good (its final record is stored): its children may end, and any still waiting for a
        body it will never publish ends without one."""
        run = self._runs.pop(run_id, None)
        if run is None:
            return
        for future in run.bodies.values():
            if not future.done():
                future.set_result(None)
        run.released.set()

    def stop(self, run_id: str | None = None) -> None:
        """The process stops (or only `run_id` stops here, to resume later): children still waiting are cancelled, so
        they stay pending and resume with their run, which then publishes its bodies afresh."""
        for key in [run_id] if run_id is not None else list(self._runs):
            run = self._runs.pop(key, None)
            for scope in list(run.waiting) if run is not None else []:
                scope.cancel()

    # --- the child's side -----------------------------------------------------------------------
    async def serve(self, run_id: str, workflow_id: str) -> None:
        """Run the body published for `workflow_id`, then wait for the run's release. Stopped while it waits
        (`stop`), it raises the cancellation: DBOS then records nothing and the workflow stays pending."""
        run = self._run(run_id)
        async with self._stoppable(run):
            body = await self._take(run, workflow_id)
        if body is None:
            return
        await body.execute()
        async with self._stoppable(run):
            await run.released.wait()

    @asynccontextmanager
    async def _stoppable(self, run: _Run) -> AsyncIterator[None]:
        scope = anyio.CancelScope()
        run.waiting.add(scope)
        try:
            with scope:
                yield
        finally:
            run.waiting.discard(scope)
        if scope.cancel_called:  # absorbed by the scope: raised again, so the workflow ends cancelled
            raise asyncio.CancelledError

    async def _take(self, run: _Run, workflow_id: str) -> _Body | None:
        future = run.body(workflow_id)
        while True:
            with anyio.move_on_after(OVER_POLL):
                return await asyncio.shield(future)
            if await self.is_over(run.run_id):
                log.info("branch %s ends unrun: its run is over", workflow_id)
                return None


async def _watch(body: _Body, bodies: list[_Body]) -> None:
    await body.ended.wait()
    if body.error is not None:
        for other in bodies:
            other.cancel()


_branches: Branches | None = None


def bind(branches: Branches | None) -> None:
    """The process's branches, which branch workflows run through (set before DBOS launches)."""
    global _branches
    _branches = branches


@DBOS.workflow(name=BRANCH_WORKFLOW)
async def branch_workflow(run_id: str) -> None:
    if _branches is None:
        raise RuntimeError("a branch workflow ran before mcp-team's run service was bound")
    workflow.track()  # the process's close waits for its end to be recorded (`workflow.settle`)
    workflow_id = DBOS.workflow_id
    assert workflow_id is not None
    await _branches.serve(run_id, workflow_id)
