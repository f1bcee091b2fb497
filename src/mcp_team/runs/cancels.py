"""Cancelling runs: those of another process (`cancel_elsewhere`), a cancel left half done (`finished_cancel`),
and the watch that stops this process's runs cancelled from another process (`watch_cancellations`).

A cancel made elsewhere (`cancel_run` on another replica or server, `mcp-team runs cancel`) writes the run's
record, then cancels its DBOS workflow. The process running it polls both, for its live runs: a cancelled
workflow, or a record written `cancelled` whose workflow cancel never came (the canceller killed in between, or
the database refused it). Either way it cancels their tasks, keeping the reason the canceller recorded, and
finishes DBOS's half itself, so a restart does not resume the workflow.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

import anyio
import sqlalchemy as sa
from dbos import DBOS

from mcp_team.runs.database import reason_of
from mcp_team.runs.errors import CancelRefused
from mcp_team.runs.live import Live
from mcp_team.runs.records import Progress
from mcp_team.runs.store import RunStore
from mcp_team.runs.types import RunRecord

log = logging.getLogger(__name__)

CANCEL_POLL = 1.0  # seconds between checks for runs cancelled by another process
CANCEL_CHUNK = 64  # run ids per check (see fixed_chunks)


async def watch_cancellations(lives: Mapping[str, Live], store: RunStore) -> None:
    """Until cancelled: every `CANCEL_POLL` seconds, cancel the live runs cancelled elsewhere. A database that
    cannot be read for a moment (locked, away) is read at the next poll: the watch never ends on it."""
    while True:
        await anyio.sleep(CANCEL_POLL)
        if not lives:
            continue
        try:
            await stop_cancelled(lives, store)
        except sa.exc.SQLAlchemyError as exc:
            log.warning("could not check for runs cancelled by another process (%s); retrying", reason_of(exc))


async def stop_cancelled(lives: Mapping[str, Live], store: RunStore) -> None:
    """Cancel the live runs whose workflow was cancelled elsewhere, or whose stored record was written cancelled
    elsewhere. One query of each kind per `CANCEL_CHUNK` live runs. DBOS is read first: a canceller writes the
    record before the workflow, so the record of every workflow found cancelled is in the store when it is read
    after, with the reason."""
    workflows = {live.progress.record.workflow_id: rid for rid, live in lives.items()
                 if live.progress.record.resumable and live.progress.record.workflow_id}  # fmt: skip
    run_ids = list(lives)
    in_dbos: set[str] = set()
    for chunk in fixed_chunks(list(workflows), CANCEL_CHUNK):
        found = await DBOS.list_workflows_async(workflow_ids=chunk, status="CANCELLED",
                                                load_input=False, load_output=False)  # fmt: skip
        in_dbos.update(workflows[status.workflow_id] for status in found)
    stored: dict[str, str | None] = {}
    for chunk in fixed_chunks(run_ids, CANCEL_CHUNK):
        stored.update(await anyio.to_thread.run_sync(store.cancelled_among, chunk))
    for run_id in in_dbos | stored.keys():
        live = lives.get(run_id)
        if live is None or live.scope.cancel_called or live.progress.record.finished:  # ended, or ending here
            continue
        live.cancel_reason = live.cancel_reason or stored.get(run_id) or "cancelled from another process"
        record = live.progress.record
        if run_id not in in_dbos and record.resumable and record.workflow_id:
            # DBOS's half of a cancel another process recorded but did not finish: nothing resumes the workflow
            # after a restart then. Refused, the run is stopped all the same: it ends with the cancelled record
            # as its result, and a run whose end was recorded is never run again.
            try:
                await cancel_workflow(record)
            except CancelRefused as exc:
                log.warning("run %s was cancelled by another process, but its workflow could not be cancelled (%s); "
                            "stopping it here", run_id, reason_of(exc.cause))  # fmt: skip
        live.workflow_cancelled.set()  # DBOS's half is done (or was refused): its workflow may end
        live.scope.cancel()


class Workflows(Protocol):
    """DBOS's side of a cancel: a launched DBOS (`LAUNCHED`), or a `DBOSClient` of a process that runs no workflows
    (`mcp-team runs cancel`)."""

    async def cancel_workflow_async(self, workflow_id: str, *, cancel_children: bool = False) -> None: ...

    async def list_workflows_async(self, *, workflow_ids: list[str], load_input: bool, load_output: bool) -> Any: ...


class _Launched:
    """DBOS's class methods, as a `Workflows` (this process launched DBOS)."""

    async def cancel_workflow_async(self, workflow_id: str, *, cancel_children: bool = False) -> None:
        await DBOS.cancel_workflow_async(workflow_id, cancel_children=cancel_children)

    async def list_workflows_async(self, *, workflow_ids: list[str], load_input: bool, load_output: bool) -> Any:
        return await DBOS.list_workflows_async(workflow_ids=workflow_ids, load_input=load_input,
                                               load_output=load_output)  # fmt: skip


LAUNCHED: Workflows = _Launched()


async def cancel_elsewhere(
    store: RunStore, record: RunRecord, reason: str, workflows: Workflows = LAUNCHED
) -> RunRecord | None:
    """Cancel the run of `record`, running in another process: its record first, so the process running it,
    seeing DBOS's cancel, keeps the reason (and then writes what had finished), then its workflow. Only while it
    still runs: one that just finished keeps its answer. `CancelRefused` when the database refuses the second."""
    final = Progress(record).finish("cancelled", reason=reason)
    if not await store.finish_if_running(final):  # it finished meanwhile (or another cancel came first)
        return await finished_cancel(await anyio.to_thread.run_sync(store.get, record.run_id), workflows)
    if record.resumable and record.workflow_id:
        await cancel_workflow(record, workflows)
    return final


async def finished_cancel(record: RunRecord | None, workflows: Workflows = LAUNCHED) -> RunRecord | None:
    """Cancel a run whose record has finished: nothing to do, except for a cancel left half done (see
    `finish_half_cancel`). Returns the record."""
    if record is not None:
        await finish_half_cancel(record, workflows)
    return record


async def finish_half_cancel(record: RunRecord, workflows: Workflows = LAUNCHED) -> bool:
    """Cancelling another process's run is two writes, its record then DBOS's workflow; when the second fails (a
    locked database, the canceller killed in between), the record says cancelled while the workflow may still run.
    Cancelling again cancels the workflow then: True when it did. Its state is read first: DBOS's cancel leaves a
    finished workflow as it is, but rewrites one already cancelled."""
    if record.status != "cancelled" or not record.resumable or not record.workflow_id:
        return False
    found = await workflows.list_workflows_async(workflow_ids=[record.workflow_id], load_input=False,
                                                 load_output=False)  # fmt: skip
    if not any(w.status in ACTIVE for w in found):
        return False
    await cancel_workflow(record, workflows)
    return True


ACTIVE = ("PENDING", "ENQUEUED", "DELAYED")  # DBOS's states of a workflow that may still run


async def cancel_workflow(record: RunRecord, workflows: Workflows = LAUNCHED) -> None:
    """DBOS's half of cancelling `record`'s run (its branches too), whose record says cancelled: `CancelRefused` if
    refused."""
    assert record.workflow_id is not None
    try:
        await workflows.cancel_workflow_async(record.workflow_id, cancel_children=True)
    except sa.exc.SQLAlchemyError as exc:
        raise CancelRefused(record.run_id, exc) from None


def fixed_chunks(ids: list[str], size: int) -> list[list[str]]:
    """`ids` in lists of exactly `size` (the last padded with repeats of its first id). A query `IN (?, ...)`
    with as many `?` as ids has a new SQL text for every number of runs in flight: SQLite's statement cache
    (per connection) then kept a statement made during each burst of runs, long after it (and the memory
    arenas around it, measured 23 MiB pinned by 42 statements after 300 runs). Fixed sizes make one text."""
    chunks = [ids[i : i + size] for i in range(0, len(ids), size)]
    if chunks:
        chunks[-1] += [chunks[-1][0]] * (size - len(chunks[-1]))
    return chunks
