"""The run workflow: one DBOS workflow per run (id = run id), registered when this module is imported.

Its input is everything a replay needs: the request, mode, budget overrides, the run id, the start time
(for the absolute deadline), the thread history, and the hash of the team it ran with. The team itself
is the process's current team (the `Engine` the server gives `open_runs`): if its hash differs from the
recorded one when a run resumes, the run is not replayed against another team but marked
`interrupted`, its finished handoffs kept. The output is the `RunResult`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from dbos import DBOS

from mcp_team.handoffs import RunResult
from mcp_team.runs.types import RunInput

if TYPE_CHECKING:
    from mcp_team.runs.host import RunHost

WORKFLOW_NAME = "mcp_team.run"

_service: RunHost | None = None


def bind(service: RunHost | None) -> None:
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
