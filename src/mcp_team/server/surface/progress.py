"""A run's events as MCP progress notifications (and a warning log message when a handoff fails).

Progress counts handoffs started and finished, human checkpoints asked and answered (a run waiting for a
person says so while nothing else moves), and a model call's waits for a rate limit (the run says why nothing
moves, and for how long), and is sent without a total: how many handoffs a run takes is
known only when it ends (the supervisor re-plans, failures are retried), and a total that grows as work
appears would make a progress bar go backwards or show "done" before the end. It counts the events as they
reach it: a branch's finish is told once it is stored, so another branch's events may come first, and a
count taken when each event happened would then go backwards (and the spec's progress must only grow).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from mcp_team.handoffs import RunEvent
from mcp_team.server.client_features.sampling import CtxGetter
from mcp_team.server.surface.log_level import send_log

ProgressSink = Callable[[RunEvent], Awaitable[None]]


def progress_sink(get_ctx: CtxGetter) -> ProgressSink:
    """An `on_event` callback for `Team.run` that reports progress on the calling request (whichever
    request `get_ctx` gives, since a 2026-07-28 run moves from round to round)."""
    told = 0

    async def on_event(event: RunEvent) -> None:
        nonlocal told
        if event.kind in ("handoff_started", "handoff_finished", "checkpoint", "waiting"):
            told += 1  # one more start, finish, checkpoint or wait for a rate limit
            await get_ctx().report_progress(told, None, event.message)
        if event.kind == "handoff_finished" and event.record is not None and event.record.status != "completed":
            await send_log(get_ctx(), "warning", f"{event.record.target} {event.record.status}: {event.record.error}")

    return on_event
