"""Recovery: what a stopped process (or a dead replica) left running is settled at start-up or takeover.

Runs of the executor that were still running are resumed (DBOS does it for the current application
version), forked onto this version (an older mcp-team with the same replay format) or marked `interrupted`
with their finished handoffs kept (runs on the client's model, runs of another replay format). No run is
left "running".
"""

from __future__ import annotations

from collections.abc import Container

import anyio
from dbos import DBOS, SetWorkflowID

from mcp_team.handoffs import RunResult
from mcp_team.runs.config import REPLAY_FORMAT
from mcp_team.runs.records import NOT_RESUMABLE, Progress, final_state
from mcp_team.runs.store import RunStore
from mcp_team.runs.tables import RunRecord


async def recover(store: RunStore, app_version: str, executor_id: str, live: Container[str]) -> None:
    """Settle every run `executor_id` (this process, or a dead replica taken over) left running, except those
    running here (`live`); see the module docstring."""
    left = await anyio.to_thread.run_sync(
        lambda: store.list(limit=100_000, status=["running"], executor_id=executor_id)
    )
    for record in left:
        if record.run_id in live:
            continue
        progress = Progress(record)
        if not record.resumable:
            await store.write(progress.finish("interrupted", reason=NOT_RESUMABLE))
            continue
        status = await DBOS.get_workflow_status_async(record.workflow_id or record.run_id)
        if status is None:
            await store.write(progress.finish("interrupted", reason="the process stopped before it started"))
        elif status.status == "SUCCESS" and isinstance(status.output, RunResult):
            await store.write(progress.finish(final_state(status.output), status.output))
        elif status.status == "CANCELLED":
            await store.write(progress.finish("cancelled", reason="cancelled"))
        elif status.status in ("ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
            await store.write(progress.finish("interrupted", reason=f"it stopped on an error: {status.error}"))
        elif status.app_version != app_version:
            await _upgrade(store, app_version, record, status.workflow_id, status.app_version or "")
        # else: pending on this version; DBOS resumes it (launch re-enqueued it)


async def _upgrade(store: RunStore, app_version: str, record: RunRecord, workflow_id: str, old_version: str) -> None:
    """A run left pending by another application version: fork it onto this one, or interrupt it."""
    if old_version.rpartition(".r")[2] != str(REPLAY_FORMAT):
        await DBOS.cancel_workflow_async(workflow_id)
        reason = (f"it was left unfinished by mcp-team {old_version}, which records runs differently from "
                  f"{app_version}; start it again")  # fmt: skip
        await store.write(Progress(record).finish("interrupted", reason=reason))
        return
    new_id = f"{record.run_id}~{app_version}"
    if await DBOS.get_workflow_status_async(new_id) is None:
        steps = await DBOS.list_workflow_steps_async(workflow_id)
        start = max((s["function_id"] for s in steps), default=0) + 1  # ids are namespaced: max, not count
        with SetWorkflowID(new_id):
            await DBOS.fork_workflow_async(workflow_id, start, application_version=app_version)
    await DBOS.cancel_workflow_async(workflow_id)
