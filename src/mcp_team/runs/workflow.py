"""The run workflow: one DBOS workflow per run (id = run id), registered when this module is imported.

Its input is everything a replay needs: the request, mode, budget overrides, the run id, the start time
(for the absolute deadline), the thread history, and the hash of the team it ran with. The team itself
is the process's current team (the `Engine` the server gives `open_runs`): if its hash differs from the
recorded one when a run resumes, the run is not replayed against another team but marked
`interrupted`, its finished handoffs kept. The output is the `RunResult`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from dbos import DBOS
from pydantic import BaseModel

from mcp_team.handoffs import Budgets, RunEvent, RunResult, Runtime
from mcp_team.handoffs.schema import Mode
from mcp_team.runs.threads import ThreadHistory

if TYPE_CHECKING:
    from mcp_team.runs.service import Runs

WORKFLOW_NAME = "mcp_team.run"

EventSink = Callable[[RunEvent], Awaitable[None]]


class RunInput(BaseModel, defer_build=True):
    run_id: str
    request: str
    mode: Mode | None = None
    budgets: Budgets | None = None
    thread: str | None = None
    history: ThreadHistory = ThreadHistory()
    started_at: datetime
    team_hash: str
    # Set (not stored) when a run starts here after a stop, or off the shared queue: its deadline counts from then
    resumed_at: datetime | None = None
    checkpoints: list[str] = []  # the call's own, added to the team's (issue 13)


class Engine(Protocol):
    """What runs/ needs of the engine; the server builds one from its `Team` (integration round)."""

    @property
    def team_hash(self) -> str:
        """Changes whenever the team (specialists, prompts, tools, settings, models) changes."""
        ...

    async def run(
        self,
        run: RunInput,
        runtime: Runtime | None,
        on_event: EventSink,
        on_finish: Callable[[RunResult], None],
    ) -> RunResult:
        """Run it (on `runtime`, or ephemerally when None). On cancellation, `on_finish` gets the cancelled
        record before the cancellation propagates (as `Team.run` does)."""
        ...


_service: Runs | None = None


def bind(service: Runs | None) -> None:
    """The process's `Runs`, which recovered workflows run through (set before DBOS launches)."""
    global _service
    _service = service


# The tasks of run workflows in this process, until DBOS has finished with them (see `settle`).
_tasks: set[asyncio.Task[object]] = set()


@DBOS.workflow(name=WORKFLOW_NAME)
async def run_workflow(run: RunInput) -> RunResult:
    if _service is None:
        raise RuntimeError("the run workflow ran before mcp-team's run service was bound")
    if (task := asyncio.current_task()) is not None:  # the task DBOS runs the workflow in
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)
    return await _service.execute(run, durable=True)


async def settle(timeout: float) -> None:
    """Wait up to `timeout` seconds for the run workflows of this process to end. A run's record is final
    before DBOS has recorded its workflow's output: shutting down in between (`mcp-team run` exits once it
    has the record) would cancel that bookkeeping, leave the workflow pending, replay it at the next start,
    and log a cancelled task."""
    if pending := {task for task in _tasks if not task.done()}:
        await asyncio.wait(pending, timeout=timeout)
