"""The durable side of a run service: the runs database, this process's executor id, DBOS (its migrations and
launch, the run workflow, branches as child workflows, recovery) and, on PostgreSQL, the other replicas.

`Runs` (runs/service.py) holds one when it was opened on a `DurableConfig`, and asks it to start, cancel and
resume runs; an ephemeral service has none and never imports DBOS. Everything here is DBOS's public API.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import anyio
import sqlalchemy as sa
from anyio.abc import TaskGroup
from dbos import DBOS, SetWorkflowID

from mcp_team.errors import ConfigError
from mcp_team.handoffs.checkpoints import Approver, Checkpoint, Decision
from mcp_team.runs import answers, approvals, branches, launch, orphans, recovery, replicas, workflow
from mcp_team.runs.branches import Branches
from mcp_team.runs.cancels import CancelRefused, cancel_elsewhere, cancel_workflow, finished_cancel, watch_cancellations
from mcp_team.runs.config import DurableConfig
from mcp_team.runs.database import reason_of
from mcp_team.runs.executor import ExecutorLease
from mcp_team.runs.records import Progress
from mcp_team.runs.replicas import Replicas
from mcp_team.runs.runtime import DurableRuntime
from mcp_team.runs.sql_store import SqlRunStore
from mcp_team.runs.types import RunInput, RunRecord, Settled

if TYPE_CHECKING:
    from mcp_team.runs.host import RunHost

SETTLE_SECONDS = 5.0  # at close, how long finished runs get for DBOS to record their workflows' end


class Durable:
    """DBOS and the runs database for one run service (see the module docstring)."""

    def __init__(self, config: DurableConfig, store: SqlRunStore, lease: ExecutorLease, service: RunHost) -> None:
        self.config, self.store, self.lease, self.service = config, store, lease, service
        self.db = store.engine  # the runs database: DBOS's tables and ours
        self.branches = Branches(service.is_over)
        self.replicas: Replicas | None = None  # PostgreSQL: heartbeat, takeover, the shared run queue
        self.adopter: orphans.Adopter | None = None  # SQLite, a server: runs of dead processes taken over
        self.recovered: Sequence[Settled] = ()  # what an earlier process left, and what became of it

    @property
    def executor_id(self) -> str:
        return self.lease.executor_id

    # --- lifecycle ----------------------------------------------------------------------------
    async def open(self) -> None:
        """Migrate and launch DBOS, join the replicas, settle what an earlier process left. `ConfigError` (never a
        traceback) naming what to fix; nothing is left open then."""
        config = self.config
        workflow.bind(self.service)
        branches.bind(self.branches)
        try:
            await anyio.to_thread.run_sync(launch.migrate, config)
            launch.launch(config, self.db, self.executor_id)  # on this loop: DBOS runs its workflows on it
            if not config.is_sqlite:
                self.replicas = await replicas.join(config, self.db, self.lease, self.recover)
                self.service.checkpoints.inbox = answers.inbox_of(self.db)
            self.recovered = await self.recover()
            await launch.register_here_queue(config, self.executor_id)
        except BaseException as exc:
            workflow.bind(None)
            branches.bind(None)
            self.lease.release()
            if isinstance(exc, (sa.exc.DBAPIError, sa.exc.InvalidatePoolError)):
                # The database went away (or refused a statement) part-way through: a PostgreSQL restart as the
                # process starts. Said as the other start-up problems are, not as a traceback.
                raise ConfigError(
                    f"the runs database {config.redacted_url} failed while it was being opened: {reason_of(exc)}"
                ) from None
            raise

    def serve(self, tg: TaskGroup, *, adopt_orphans: bool) -> None:
        """Background work: cancellations from other processes; heartbeats and takeovers (replicas), or, for a
        server on SQLite (`adopt_orphans`), taking over the runs of dead processes."""
        tg.start_soon(watch_cancellations, self.service.live, self.store)
        if self.replicas is not None:
            tg.start_soon(self.replicas.run)
        elif adopt_orphans and self.config.is_sqlite:
            self.adopter = orphans.Adopter(self.config, self.db, self.executor_id, self.recover)
            tg.start_soon(self.adopter.run)

    async def close(self) -> None:
        """After the service stopped its runs: let DBOS record the ends it has, leave, shut DBOS down."""
        if self.adopter is not None:
            await self.adopter.stop()
        self.branches.stop()  # branches waiting for their run stay pending, to resume with it
        await workflow.settle(SETTLE_SECONDS)
        await self.store.flush()
        if self.replicas is not None:
            await self.replicas.stop()
            with contextlib.suppress(sa.exc.SQLAlchemyError):
                await anyio.to_thread.run_sync(self.replicas.leave)
        await anyio.to_thread.run_sync(launch.destroy)
        # DBOS made its executor the loop's default (asyncio.to_thread) and has shut it down: give the loop a
        # live one, or the next `to_thread` on it fails, a service opened again on it included.
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor())
        workflow.bind(None)
        branches.bind(None)
        self.lease.release()
        self.store.dispose()  # its engine is `db`, and the reader beside it

    async def recover(self, executor_id: str | None = None) -> Sequence[Settled]:
        """Settle the runs `executor_id` (default: this process's own, left by its last process) left running."""
        return await recovery.recover(self.store, self.config.app_version, executor_id or self.executor_id,
                                      self.service.live, self.executor_id)  # fmt: skip

    # --- runs ---------------------------------------------------------------------------------
    async def start(self, record: RunRecord, run: RunInput, *, anywhere: bool) -> bool:
        """Start `run`'s workflow, its record written first (a crash in between leaves a record that recovery
        settles, never a workflow nobody knows of). With `anywhere` (it needs nothing of this process) and this
        replica full, it goes on the shared queue instead: True then, another replica may run it."""
        if anywhere and self.replicas is not None and self.replicas.busy(self.service.running):
            await self.store.write_new(record.model_copy(update={"executions": 0}))  # not begun: its taker begins it
            await replicas.enqueue(run)
            return True
        await self.store.write_new(record)
        try:
            with SetWorkflowID(record.run_id):
                await DBOS.start_workflow_async(workflow.run_workflow, run)
        except BaseException as exc:
            with contextlib.suppress(sa.exc.SQLAlchemyError), anyio.CancelScope(shield=True):
                why = reason_of(exc) if isinstance(exc, sa.exc.SQLAlchemyError) else type(exc).__name__
                await self.store.write_new(Progress(record).finish("failed", reason=f"it could not start: {why}"))
            raise
        return False

    def runtime(self, run_id: str, approve: Approver) -> DurableRuntime:
        return DurableRuntime(run_id, self.branches, approve)

    @staticmethod
    def workflow_id() -> str | None:
        return DBOS.workflow_id

    async def cancel_here(self, record: RunRecord) -> None:
        """DBOS's half of cancelling a run that runs here, first: nothing resumes it after a restart. Refused (a
        locked database), the run stops all the same: it ends with its cancelled record, never run again."""
        if record.resumable and record.workflow_id:
            with contextlib.suppress(CancelRefused):
                await cancel_workflow(record)

    async def cancel_elsewhere(self, record: RunRecord, reason: str) -> RunRecord | None:
        return await cancel_elsewhere(self.store, record, reason)

    @staticmethod
    async def finished_cancel(record: RunRecord | None) -> RunRecord | None:
        return await finished_cancel(record)

    async def answer_elsewhere(
        self, record: RunRecord, decision: Decision, name: str | None, round_: int | None
    ) -> Checkpoint:
        if self.replicas is None or record.executor_id == self.executor_id:
            raise approvals.NotWaiting(record.run_id)
        return await answers.answer_elsewhere(self.db, record, decision, name, round_)

    async def resume_here(self, run_id: str) -> None:
        await recovery.resume_here(run_id, self.executor_id)
