"""Recovery: what a stopped process (or a dead replica) left running is settled by the process that takes its
executor id over: itself at its next start, a server adopting a dead process's runs on SQLite (orphans.py), or
a replica taking over a dead one (replicas.py). One way, whoever does it.

For each run the executor's records say is still running: a run that cannot resume (on the client's model) is
marked `interrupted`; a run whose workflow ended is finished as DBOS recorded it (its answer, or cancelled);
a run of another replay format is interrupted, its finished handoffs kept; every other run is resumed here:
its workflow and the workflows of its branches (runs/branches.py) that are still pending are put on this
process's own queue (`launch.here_queue`), which only this process reads, so the whole run comes back in one
process. Resuming is DBOS's public `resume_workflow`; a cancelled workflow is never resumed (its record says
cancelled, and DBOS's status too). No run is left "running".
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

import anyio
from dbos import DBOS

from mcp_team.handoffs import RunResult
from mcp_team.runs.config import REPLAY_FORMAT
from mcp_team.runs.launch import RUN_QUEUE, here_queue
from mcp_team.runs.records import NOT_RESUMABLE, Progress, final_state
from mcp_team.runs.store import RunStore
from mcp_team.runs.types import RunRecord, Settled
from mcp_team.runs.workflow import WORKFLOW_NAME as RUN_WORKFLOW

_PENDING = ("PENDING", "ENQUEUED")


async def recover(
    store: RunStore, app_version: str, executor_id: str, live: Container[str], here: str
) -> list[Settled]:
    """Settle every run `executor_id` left running, except those running in this process (`live`); resumed runs go
    on the queue of `here` (this process's executor id). See the module docstring."""
    left = await anyio.to_thread.run_sync(
        lambda: store.list(limit=100_000, status=["running"], executor_id=executor_id)
    )
    settled = []
    for record in left:
        if record.run_id not in live:
            settled.append(await _settle(store, app_version, record, here))
    await _end_finished(store, executor_id, here, {r.run_id for r in left})
    return settled


async def _end_finished(store: RunStore, executor_id: str, here: str, seen: set[str]) -> None:
    """Resume the run workflows an earlier process of `executor_id` left pending although their record is finished
    (it stopped between writing the run's end and DBOS's): resumed, each returns its recorded result at once
    (runs/execution.py), so DBOS records its end too, and its branches end with it."""
    pending = await DBOS.list_workflows_async(status=list(_PENDING), name=RUN_WORKFLOW, load_input=False,
                                              load_output=False)  # fmt: skip
    for workflow in pending:
        if workflow.workflow_id in seen or not (workflow.executor_id or "").startswith(f"{executor_id}+"):
            continue
        if workflow.status == "ENQUEUED" and workflow.queue_name in (RUN_QUEUE, here_queue(here)):
            continue  # waiting for a replica to take it, or for this process's queue
        record = await anyio.to_thread.run_sync(store.get, workflow.workflow_id)
        if record is not None and record.finished:
            await resume_here(record.run_id, here)


async def resume_here(run_id: str, here: str) -> None:
    """Resume run `run_id` (its workflow and its pending branches) in the process holding executor id `here`."""
    await _resume(await _tree(run_id), here)


async def _resume(tree: list[Any], here: str) -> None:
    for workflow in tree:
        if workflow.status in _PENDING:
            await DBOS.resume_workflow_async(workflow.workflow_id, queue_name=here_queue(here))


async def _tree(run_id: str) -> list[Any]:
    """The workflows of run `run_id`: its own (id = run id) and its branches' (`<run id>/...`)."""
    found = await DBOS.list_workflows_async(workflow_id_prefix=run_id, load_input=False, load_output=False)
    return [w for w in found if w.workflow_id == run_id or w.workflow_id.startswith(run_id + "/")]


async def _settle(store: RunStore, app_version: str, record: RunRecord, here: str) -> Settled:
    done = sum(h.status == "completed" for h in (record.result.handoffs if record.result else []))

    async def finish(status: str, result: RunResult | None = None, reason: str | None = None) -> Settled:
        await store.write(Progress(record).finish(status, result, reason))  # type: ignore[arg-type]
        return Settled(record.run_id, False, status, reason, done)

    if not record.resumable:
        return await finish("interrupted", reason=NOT_RESUMABLE)
    root_id = record.workflow_id or record.run_id
    tree = await _tree(record.run_id)
    root = next((w for w in tree if w.workflow_id == root_id), None)
    if root is None:
        return await finish("interrupted", reason="the process stopped before it started")
    if root.status == "SUCCESS":
        status = await DBOS.get_workflow_status_async(root_id)
        output = status.output if status is not None else None
        if isinstance(output, RunResult):
            return await finish(final_state(output), output)
        return await finish("interrupted", reason="its workflow ended without a result")
    if root.status == "CANCELLED":
        return await finish("cancelled", reason="cancelled")
    if root.status not in _PENDING:  # ERROR, MAX_RECOVERY_ATTEMPTS_EXCEEDED
        return await finish("interrupted", reason=f"it stopped on an error ({root.status.lower()})")
    if (root.app_version or "").rpartition(".r")[2] != str(REPLAY_FORMAT) or root.app_version != app_version:
        await DBOS.cancel_workflow_async(root_id, cancel_children=True)
        reason = (f"it was left unfinished by an mcp-team that records runs differently ({root.app_version}, this "
                  f"one {app_version}); start it again")  # fmt: skip
        return await finish("interrupted", reason=reason)
    if root.status == "ENQUEUED" and root.queue_name == RUN_QUEUE:  # not started yet: the replica that takes it
        return Settled(record.run_id, True, "running", None, done)  # off the shared queue runs it (and says so)
    await _resume(tree, here)
    now = await anyio.to_thread.run_sync(store.get, record.run_id)
    if now is not None and now.status == "cancelled":
        # Cancelled by another process while it was being resumed (a resume makes a cancelled workflow pending
        # again): cancelled again, and the run, should it start before that lands, ends at its first look at its
        # record (runs/execution.py).
        await DBOS.cancel_workflow_async(root_id, cancel_children=True)
        return Settled(record.run_id, False, "cancelled", now.reason, done)
    return Settled(record.run_id, True, "running", None, done)
