"""Running a run in this process: the engine under the run's cancel scope, DBOS's step bookkeeping for a
durable run, and the run's final record however it ends (finished, failed, cancelled here or from another
process, interrupted by a stop, a changed team or a replay that diverged).

`Execution` is the part of the run service (`runs.service.Runs`) that runs: the run workflow calls its
`execute`, and so do runs that cannot resume.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import anyio
from dbos import DBOS

from mcp_team.errors import McpTeamError
from mcp_team.handoffs import RunEvent, RunResult
from mcp_team.handoffs.checkpoints import Approver, Checkpoint
from mcp_team.runs import _dbos_internals as internals
from mcp_team.runs import _dbos_steps as steps
from mcp_team.runs.approvals import Board
from mcp_team.runs.cancels import stored_cancel_reason
from mcp_team.runs.config import DurableConfig
from mcp_team.runs.live import Live
from mcp_team.runs.records import NOT_RESUMABLE, Progress, final_state
from mcp_team.runs.runtime import DurableRuntime, ReplayDiverged
from mcp_team.runs.store import RunStore
from mcp_team.runs.tables import RunRecord, now
from mcp_team.runs.workflow import Engine, RunInput


class RunInterrupted(McpTeamError):
    """The run cannot go on here (its record says why); its finished handoffs are kept."""


class Execution:
    """Runs a run here; what it needs of the service is declared below (`Runs` sets it)."""

    config: DurableConfig
    store: RunStore
    engine: Engine
    checkpoints: Board
    _live: dict[str, Live]
    _closing: bool

    if TYPE_CHECKING:

        @property
        def executor_id(self) -> str: ...

    async def _execute_quietly(self, run: RunInput) -> None:
        with contextlib.suppress(Exception):
            await self.execute(run, durable=False)

    async def execute(self, run: RunInput, *, durable: bool) -> RunResult:
        """Run `run` here (called by the run workflow, and for runs that cannot resume)."""
        live = self._live.get(run.run_id)
        if live is None:  # resumed after a restart, or forked onto this version
            stored = await anyio.to_thread.run_sync(self.store.get, run.run_id)
            if stored is not None and stored.finished and stored.result is not None:
                # Its end was recorded but DBOS's was not (e.g. a full disk, or a stop in between): its caller
                # had the result, so it is the result; running it again could only overwrite it.
                return stored.result
            base = stored or RunRecord(run_id=run.run_id, status="running", request=run.request, thread=run.thread,
                                       mode=run.mode, executor_id=self.executor_id, resumable=True,
                                       started_at=run.started_at, updated_at=now())  # fmt: skip
            live = self._live[run.run_id] = Live(Progress(base), self.engine)
            run = run.model_copy(update={"resumed_at": now()})
        progress = live.progress
        if durable:
            progress.record = progress.record.model_copy(
                update={"workflow_id": DBOS.workflow_id, "executor_id": self.executor_id,
                        "app_version": self.config.app_version, "status": "running",
                        "waiting": None}  # a resumed run shows its checkpoint again once it waits there
            )  # fmt: skip
        try:
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

    async def _run_engine(self, run: RunInput, live: Live, durable: bool) -> RunResult:
        progress = live.progress
        finished: list[RunResult] = []

        async def on_event(event: RunEvent) -> None:
            progress.on_event(event)
            if event.kind == "handoff_finished" and not durable:
                # the store is the only record of a run that cannot resume: written before the branch goes
                # on. A durable run's finished handoffs are DBOS steps already; its record follows (coalesced).
                await self.store.write(progress.snapshot())
            else:  # the record is taken when the store writes it or someone reads it, not at every event
                self.store.put_later(progress.record.run_id, progress.snapshot)
            if live.on_event is not None:
                await live.on_event(event)

        result: RunResult | None = None
        try:
            with live.scope:
                if durable:
                    workflow_id = DBOS.workflow_id
                    assert workflow_id is not None
                    recorded = (
                        frozenset()
                        if live.fresh
                        else await anyio.to_thread.run_sync(steps.recorded_step_ids, workflow_id)
                    )
                    live.fresh = False  # another execution of it here (none is expected) reads them
                    with steps.known_steps(workflow_id, recorded):  # steps not recorded yet skip DBOS's read
                        runtime = DurableRuntime(self._approver(run.run_id, live))
                        result = await live.engine.run(run, runtime, on_event, finished.append)
                else:
                    result = await live.engine.run(run, None, on_event, finished.append)
        except BaseException as exc:
            if _contains(exc, ReplayDiverged):
                raise RunInterrupted(
                    f"it could not resume: the replay asked for other steps than those recorded ({_first(exc)})"
                ) from None
            if _contains(exc, BaseException, names=("DBOSWorkflowConflictIDError",)) and await _owned_elsewhere(
                progress.record.workflow_id
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
            return cancelled or progress.record.result  # type: ignore[return-value]
        await self.store.write(progress.finish(final_state(result), result))
        return result

    async def _cancel_reason(self, live: Live) -> str:
        """Why `live` was cancelled, for its final record. DBOS may stop a workflow cancelled from another process
        before `watch_cancellations` has read the reason that process stored: it is read here then, not lost."""
        return live.cancel_reason or await stored_cancel_reason(self.store, live.progress.record.run_id) or "cancelled"

    def _approver(self, run_id: str, live: Live) -> Approver:
        """The run's checkpoint approver (runs/approvals.py); its question shows on the run's record meanwhile."""

        async def on_wait(checkpoint: Checkpoint | None) -> None:
            live.progress.record = live.progress.record.model_copy(update={"waiting": checkpoint})
            await self.store.write(live.progress.snapshot())

        return self.checkpoints.approver(run_id, live.approve, on_wait)


async def _owned_elsewhere(workflow_id: str | None) -> bool:
    status = await internals.workflow_status(workflow_id) if workflow_id else None
    return status is not None and status.status != "CANCELLED"


def _contains(exc: BaseException, kind: type[BaseException], names: tuple[str, ...] = ()) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return any(_contains(e, kind, names) for e in exc.exceptions)
    return isinstance(exc, kind) and (not names or type(exc).__name__ in names)


def _first(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return _first(exc.exceptions[0])
    return " ".join(str(exc).split())[:300]
