"""Running a run in this process: the engine under the run's cancel scope, on the durable runtime for a
durable run, and the run's record however it ends (finished, failed, cancelled here or from another
process, interrupted by a stop, a changed team or a replay that diverged).

What a run's record says is never ahead of what is stored: a finished handoff is written before the engine
goes on and before anyone (progress, get_run, the run's live record) is told it finished, so a handoff a
client saw completed keeps its id, times, output and cost through any restart. A resumed run replays its
finished handoffs from their recorded steps: their stored times are kept, and a replayed start never shows a
finished handoff running again.

`Execution` is the part of the run service (`runs.service.Runs`) that runs: the run workflow calls its
`execute`, and so do runs that cannot resume.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Literal

import anyio
from anyio.abc import TaskGroup

from mcp_team.errors import McpTeamError
from mcp_team.handoffs import RunEvent, RunResult
from mcp_team.handoffs.checkpoints import Approver, Checkpoint
from mcp_team.runs.approvals import Board
from mcp_team.runs.errors import CheckpointFailed, ReplayDiverged
from mcp_team.runs.live import Live
from mcp_team.runs.records import NOT_RESUMABLE, Progress, final_state
from mcp_team.runs.store import RunStore
from mcp_team.runs.types import Engine, Resumed, RunInput, RunRecord, now

if TYPE_CHECKING:
    from mcp_team.runs.durable import Durable

log = logging.getLogger(__name__)


class RunInterrupted(McpTeamError):
    """The run cannot go on here (its record says why); its finished handoffs are kept."""


class Execution:
    """Runs a run here; what it needs of the service is declared below (`Runs` sets it)."""

    store: RunStore
    engine: Engine
    executor_id: str
    app_version: str
    checkpoints: Board
    durable: Durable | None  # a durable service's DBOS side (None: runs never go through DBOS)
    _live: dict[str, Live]
    _closing: bool
    _tg: TaskGroup | None

    async def _execute_quietly(self, run: RunInput) -> None:
        with contextlib.suppress(Exception):
            await self.execute(run, durable=False)

    async def execute(self, run: RunInput, *, durable: bool) -> RunResult:
        """Run `run` here (called by the run workflow, and for runs that cannot resume)."""
        live = self._live.get(run.run_id)
        if live is None:  # resumed after a restart or taken over, or a run of the shared queue
            stored = await anyio.to_thread.run_sync(self.store.get, run.run_id)
            if stored is not None and stored.finished:
                # Its end was recorded but DBOS's was not (a crash in between), or it was cancelled while no
                # process ran it: its record is the truth, and running it again could only overwrite it.
                if self.durable is not None:
                    self.durable.branches.finish(run.run_id)
                if stored.result is not None:
                    return stored.result
                raise RunInterrupted(stored.reason or stored.status)
            base = stored or RunRecord(run_id=run.run_id, status="running", request=run.request, thread=run.thread,
                                       mode=run.mode, executor_id=self.executor_id, resumable=True,
                                       started_at=run.started_at, updated_at=now())  # fmt: skip
            if base.executions:  # it ran before: say so in its record
                how: Literal["restart", "takeover"] = "restart" if base.executor_id == self.executor_id else "takeover"
                base = base.model_copy(update={"resumed": [*base.resumed, Resumed(at=now(), by=self.executor_id,
                                                                                   how=how)]})  # fmt: skip
            live = self._live[run.run_id] = Live(Progress(base), self.engine, fresh=False, back_to=base.waiting)
            run = run.model_copy(update={"resumed_at": now()}) if base.executions else run
        progress = live.progress
        begun = progress.record.executions + (0 if live.fresh else 1)  # a fresh run's record counted its start
        progress.record = progress.record.model_copy(
            update={"executor_id": self.executor_id, "status": "running", "executions": begun,
                    "waiting": None}  # a resumed run shows its checkpoint again once it waits there
        )  # fmt: skip
        if durable:
            assert self.durable is not None
            progress.record = progress.record.model_copy(
                update={"workflow_id": self.durable.workflow_id(), "app_version": self.app_version}
            )
        try:
            if not live.fresh:
                # Resumed, or taken off the shared queue: its record says where it runs (and that it resumed) at
                # once, so that recovery finds it under this process's executor id should this one stop too.
                await self.store.write(progress.snapshot())
            if run.team_hash != live.engine.team_hash:
                raise RunInterrupted(
                    "the team changed since the run started (another team file or settings), so it was not "
                    "replayed against the new team; start it again"
                )
            return await self._run_engine(run, live, durable)
        except RunInterrupted as exc:
            await self.store.write(progress.finish("interrupted", reason=str(exc)))
            raise
        finally:
            self._live.pop(run.run_id, None)
            live.done.set()
            self.checkpoints.ended(run.run_id)
            if durable and self.durable is not None:
                if progress.record.finished:
                    self.durable.branches.finish(run.run_id)  # its branch workflows may end now: the record is final
                else:
                    self.durable.branches.stop(run.run_id)  # a stop: they stay pending and resume with the run

    async def _run_engine(self, run: RunInput, live: Live, durable: bool) -> RunResult:
        progress = live.progress
        finished: list[RunResult] = []

        async def on_event(event: RunEvent) -> None:
            if event.kind == "handoff_finished":
                # Stored before anyone is told (see the module docstring); concurrent ends share one write, and each
                # write carries every end still being written (`Progress.storing`). The branch waits for it, so
                # another branch's events may reach the follower first.
                await self.store.write(progress.storing(event))
            progress.on_event(event)
            if event.kind != "handoff_finished":  # the record is taken when written or read, not at every event
                self.store.put_later(progress.record.run_id, progress.snapshot)
            if live.on_event is not None:
                await live.on_event(event)

        result: RunResult | None = None
        try:
            with live.scope:
                approve = self._approver(run.run_id, live, durable)
                if durable:
                    assert self.durable is not None
                    runtime = self.durable.runtime(run.run_id, approve)
                    result = await live.engine.run(run, runtime, on_event, finished.append, approve)
                else:
                    result = await live.engine.run(run, None, on_event, finished.append, approve)
        except BaseException as exc:
            if _contains(exc, CheckpointFailed) and not self._closing:
                # Its workflow stays pending (nothing recorded its end): it goes on from its last recorded step once
                # the database takes writes again, in this process (`_resume_when_writable`).
                self._pause(progress.snapshot(), _first(exc))
                raise anyio.get_cancelled_exc_class()() from None
            if _contains(exc, ReplayDiverged):
                raise RunInterrupted(
                    f"it could not resume: the replay asked for other steps than those recorded ({_first(exc)})"
                ) from None
            if _contains(exc, BaseException, names=("DBOSWorkflowConflictIDError",)) and await self._owned_elsewhere(
                progress.record
            ):  # another replica took the run over while we could not reach the database: its record now
                raise
            if _contains(exc, BaseException, names=("DBOSWorkflowCancelledError", "DBOSWorkflowConflictIDError")):
                reason = await self._cancel_reason(live)
                await self.store.write(progress.finish("cancelled", finished[-1] if finished else None, reason))
                raise
            if isinstance(exc, anyio.get_cancelled_exc_class()) and not durable:  # its caller was cancelled
                reason = live.cancel_reason or "cancelled by the client"
                with anyio.CancelScope(shield=True):
                    await self.store.write(progress.finish("cancelled", finished[-1] if finished else None, reason))
            if isinstance(exc, Exception):  # with the failed result the engine handed over: what had finished
                failed = finished[-1] if finished else None
                await self.store.write(progress.finish("failed", failed, reason=f"the run stopped on an error: {exc}"))
            elif isinstance(exc, anyio.get_cancelled_exc_class()) and not self._closing:
                # DBOS cancels a cancelled workflow's task itself: record it, or the run shows running forever
                with anyio.CancelScope(shield=True):
                    reason = await self._cancel_reason(live)
                    await self.store.write(progress.finish("cancelled", finished[-1] if finished else None, reason))
            raise
        if result is None:  # our scope was cancelled: by `cancel`, or by `close`
            if self._closing:
                if not durable:
                    await self.store.write(progress.finish("interrupted", reason=NOT_RESUMABLE))
                raise anyio.get_cancelled_exc_class()()  # leave the workflow pending: it resumes at the next start
            cancelled = finished[-1] if finished else None
            await self.store.write(progress.finish("cancelled", cancelled, live.cancel_reason))
            if durable:
                await live.workflow_cancelled.wait()  # see `Live.workflow_cancelled`
            return cancelled or progress.record.result  # type: ignore[return-value]
        await self.store.write(progress.finish(final_state(result), result))
        return result

    async def _cancel_reason(self, live: Live) -> str:
        """Why `live` was cancelled, for its final record. DBOS may stop a workflow cancelled from another process
        before `watch_cancellations` has read the reason that process stored: it is read here then, not lost."""
        if live.cancel_reason:
            return live.cancel_reason
        # The reason another process gave when it cancelled the run: it writes the run's record (with the reason)
        # before it cancels the workflow, so the reason is kept, whoever stops the run first.
        told = await anyio.to_thread.run_sync(self.store.get, live.progress.record.run_id)
        return told.reason if told is not None and told.status == "cancelled" and told.reason else "cancelled"

    def _pause(self, record: RunRecord, reason: str) -> None:
        log.warning(
            "the runs database could not record a step of run %s (%s): the run pauses, and goes on from its last "
            "recorded step once the database takes writes again", record.run_id, reason,
        )  # fmt: skip
        if self._tg is not None:
            self._tg.start_soon(self._resume_when_writable, record)

    async def _resume_when_writable(self, record: RunRecord) -> None:
        await self.store.write(record)  # waits, retrying with backoff (and saying so), until the database takes it
        assert self.durable is not None
        await self.durable.resume_here(record.run_id)
        log.warning("run %s goes on: the runs database takes writes again", record.run_id)

    def _approver(self, run_id: str, live: Live, durable: bool) -> Approver:
        """The run's checkpoint approver (runs/approvals.py); its question shows on the run's record meanwhile."""

        async def on_wait(checkpoint: Checkpoint | None) -> None:
            live.back_to = None  # back at its checkpoints (a resumed run): an answer finds them on the board
            live.progress.record = live.progress.record.model_copy(update={"waiting": checkpoint})
            await self.store.write(live.progress.snapshot())

        return self.checkpoints.approver(run_id, live.approve, on_wait, durable=durable)

    async def _owned_elsewhere(self, record: RunRecord) -> bool:
        """Whether another process took the run over (its record names another executor, and is not cancelled)."""
        stored = await anyio.to_thread.run_sync(self.store.get, record.run_id)
        return stored is not None and stored.executor_id != self.executor_id and stored.status != "cancelled"


def _contains(exc: BaseException, kind: type[BaseException], names: tuple[str, ...] = ()) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return any(_contains(e, kind, names) for e in exc.exceptions)
    return isinstance(exc, kind) and (not names or type(exc).__name__ in names)


def _first(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return _first(exc.exceptions[0])
    return " ".join(str(exc).split())[:300]
