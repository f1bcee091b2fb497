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


# The tasks of the run and branch workflows of this process, until DBOS has finished with them (see `settle`).
_tasks: set[asyncio.Task[object]] = set()


def track() -> None:
    """Keep the current task (the one DBOS runs a workflow in) for `settle`."""
    if (task := asyncio.current_task()) is not None:
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)


@DBOS.workflow(name=WORKFLOW_NAME)
async def run_workflow(run: RunInput) -> RunResult:
    if _service is None:
        raise RuntimeError("the run workflow ran before mcp-team's run service was bound")
    track()
    return await _service.execute(run, durable=True)


async def settle(timeout: float) -> None:
    """Wait up to `timeout` seconds for the run and branch workflows of this process to end. A run's record is
    final before DBOS has recorded its workflow's output, and its branches' (runs/branches.py: they end once the
    record is final): shutting down in between (`mcp-team run` exits once it has the record) would cancel that
    bookkeeping, leave the workflows pending (a branch of a finished run, pending for good), and log a cancelled
    task. Branches still waiting for a run that goes on later were cancelled first (`Branches.stop`): they end at
    once, pending, as they should."""
    if pending := {task for task in _tasks if not task.done()}:
        await asyncio.wait(pending, timeout=timeout)
