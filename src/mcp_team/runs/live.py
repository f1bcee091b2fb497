"""The runs executing in this process (`Live`), and the watch that stops those cancelled from another process.

A cancel made elsewhere (`cancel_run` on another replica or server, `mcp-team runs cancel`) writes the run's
record and cancels its DBOS workflow; the process running it polls DBOS for its live runs' cancelled workflows
and cancels their tasks, keeping the reason the canceller recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import anyio
from dbos import DBOS

from mcp_team.handoffs.checkpoints import Approver
from mcp_team.runs.records import Progress
from mcp_team.runs.store import RunStore
from mcp_team.runs.workflow import Engine, EventSink

CANCEL_POLL = 1.0  # seconds between checks for runs cancelled by another process
CANCEL_CHUNK = 64  # run ids per check (see fixed_chunks)


@dataclass
class Live:
    """A run executing in this process."""

    progress: Progress
    engine: Engine
    on_event: EventSink | None = None
    approve: Approver | None = None  # the session's, while it is attached (runs/approvals.py)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    cancel_reason: str | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    fresh: bool = False  # its workflow id was made here, now: DBOS has recorded nothing for it


async def watch_cancellations(lives: Mapping[str, Live], store: RunStore) -> None:
    """Until cancelled: every `CANCEL_POLL` seconds, cancel the live runs whose workflow was cancelled elsewhere."""
    while True:
        await anyio.sleep(CANCEL_POLL)
        ids = {live.progress.record.workflow_id: rid for rid, live in lives.items()
               if live.progress.record.resumable and live.progress.record.workflow_id}  # fmt: skip
        if not ids:
            continue
        for chunk in fixed_chunks(list(ids), CANCEL_CHUNK):
            found = await DBOS.list_workflows_async(workflow_ids=chunk, status="CANCELLED",
                                                    load_input=False, load_output=False)  # fmt: skip
            for status in found:
                if (live := lives.get(ids[status.workflow_id])) is not None:
                    given = await stored_cancel_reason(store, ids[status.workflow_id])
                    live.cancel_reason = live.cancel_reason or given or "cancelled from another process"
                    live.scope.cancel()


async def stored_cancel_reason(store: RunStore, run_id: str) -> str | None:
    """The reason another process gave when it cancelled `run_id`: it writes the run's record (with the reason)
    before it cancels the workflow, so the process running it keeps that reason, whoever stops the run first."""
    told = await anyio.to_thread.run_sync(store.get, run_id)
    return told.reason if told is not None and told.status == "cancelled" and told.reason else None


def fixed_chunks(ids: list[str], size: int) -> list[list[str]]:
    """`ids` in lists of exactly `size` (the last padded with repeats of its first id). A query `IN (?, ...)`
    with as many `?` as ids has a new SQL text for every number of runs in flight: SQLite's statement cache
    (per connection) then kept a statement made during each burst of runs, long after it (and the memory
    arenas around it, measured 23 MiB pinned by 42 statements after 300 runs). Fixed sizes make one text."""
    chunks = [ids[i : i + size] for i in range(0, len(ids), size)]
    if chunks:
        chunks[-1] += [chunks[-1][0]] * (size - len(chunks[-1]))
    return chunks
