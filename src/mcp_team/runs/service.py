"""The run service the server talks to: start, get, list, wait, subscribe, cancel.

`Runs.open` checks the database, takes this process's executor id, launches DBOS (`launch`, off the loop)
and settles what a previous process left (runs/recovery.py). Running a run here, and how its record ends,
is `Execution`'s (runs/execution.py), which `Runs` extends: e.g. a run whose team changed since it started
is marked `interrupted` when it would resume, its finished handoffs kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import anyio
import sqlalchemy as sa
from anyio.abc import TaskGroup
from dbos import DBOS, SetWorkflowID

from mcp_team.errors import ConfigError
from mcp_team.handoffs import Budgets, RunResult
from mcp_team.handoffs.checkpoints import Approver, Checkpoint, Decision
from mcp_team.handoffs.schema import Mode
from mcp_team.runs import approvals, launch, orphans, recovery, replicas, workflow
from mcp_team.runs.approvals import Board
from mcp_team.runs.cancels import (
    CANCEL_POLL,
    CancelRefused,
    cancel_elsewhere,
    cancel_workflow,
    finished_cancel,
    watch_cancellations,
)
from mcp_team.runs.config import DurableConfig
from mcp_team.runs.database import is_damaged, is_full, reason_of
from mcp_team.runs.execution import Execution
from mcp_team.runs.executor import ExecutorLease
from mcp_team.runs.live import Live
from mcp_team.runs.records import Progress
from mcp_team.runs.replicas import Replicas
from mcp_team.runs.store import RunStore
from mcp_team.runs.tables import RunRecord, now
from mcp_team.runs.threads import ThreadHistory, build_history
from mcp_team.runs.workflow import Engine, EventSink, RunInput

SETTLE_SECONDS = 5.0  # at close, how long finished runs get for DBOS to record their workflows' end


class Runs(Execution):
    def __init__(self, config: DurableConfig, store: RunStore, lease: ExecutorLease, engine: Engine) -> None:
        self.config = config
        self.store = store
        self.lease = lease
        self.engine = engine
        self._live: dict[str, Live] = {}
        self._closing = False
        # The process was asked to stop (a signal): calls cancelled from now on by the stop leave their durable
        # runs pending, to resume at the next start. Set by the server, read by the calls waiting for runs.
        self.stopping = False
        self._tg: TaskGroup | None = None
        self.replicas: Replicas | None = None  # PostgreSQL: heartbeat, takeover, the shared run queue
        self.adopter: orphans.Adopter | None = None  # SQLite, a server: runs of dead processes taken over
        self.checkpoints = Board()  # the checkpoints this process's durable runs wait at

    @property
    def executor_id(self) -> str:
        return self.lease.executor_id

    @property
    def running(self) -> int:
        """Runs executing in this process now."""
        return len(self._live)

    # --- lifecycle ----------------------------------------------------------------------------
    @classmethod
    async def open(cls, config: DurableConfig, engine: Engine) -> Runs:
        """Check, launch and recover. `ConfigError` (never a traceback) naming what to fix."""
        store, lease = await anyio.to_thread.run_sync(launch.prepare, config)
        runs = cls(config, store, lease, engine)
        workflow.bind(runs)
        loop = asyncio.get_running_loop()
        try:
            await anyio.to_thread.run_sync(launch.launch, config, store.engine, lease.executor_id, loop)
            if not config.is_sqlite:
                runs.replicas = await replicas.join(config, store.engine, lease, runs._recover)
                runs.checkpoints.inbox = approvals.inbox_of(store.engine)
            await runs._recover()
        except BaseException as exc:
            workflow.bind(None)
            lease.release()
            if isinstance(exc, (sa.exc.DBAPIError, sa.exc.InvalidatePoolError)):
                # The database went away (or refused a statement) part-way through: a PostgreSQL restart as the
                # process starts. Said as the other start-up problems are, not as a traceback.
                raise ConfigError(
                    f"the runs database {config.redacted_url} failed while it was being opened: {reason_of(exc)}"
                ) from None
            raise
        return runs

    def serve(self, tg: TaskGroup, *, adopt_orphans: bool = False) -> None:
        """Start the background work (coalesced writes, cancellations from other processes; with
        `adopt_orphans`, taking over the runs of dead processes on SQLite) in `tg`."""
        self._tg = tg
        tg.start_soon(self.store.flush_loop)
        tg.start_soon(watch_cancellations, self._live, self.store)
        if self.replicas is not None:
            tg.start_soon(self.replicas.run)
        elif adopt_orphans and self.config.is_sqlite:
            self.adopter = orphans.Adopter(self.config, self.store.engine, self.executor_id, self._recover)
            tg.start_soon(self.adopter.run)

    async def close(self) -> None:
        """Stop running work here: durable runs stay pending and resume at the next start; runs that
        cannot resume are marked interrupted now."""
        self._closing = True
        for live in list(self._live.values()):
            live.scope.cancel()
            await live.done.wait()
        if self.adopter is not None:
            await self.adopter.stop()
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
        self.lease.release()
        self.store.engine.dispose()

    # --- the API the server calls -------------------------------------------------------------
    async def start(
        self,
        request: str,
        *,
        mode: Mode | None = None,
        budgets: Budgets | None = None,
        thread: str | None = None,
        run_id: str | None = None,
        on_event: EventSink | None = None,
        engine: Engine | None = None,
        resumable: bool = True,
        owner: str | None = None,
        approve: Approver | None = None,
        checkpoints: Sequence[str] = (),
    ) -> RunRecord:
        """Start a run and return its record at once. `resumable=False` (with the session's `engine`, e.g.
        the client's model through sampling) runs it outside DBOS: recorded, but not resumed after a restart.
        `approve`: the session's checkpoint approver, attached to the run while it runs here; `checkpoints`:
        the call's own (issue 13)."""
        record, run = await self._begin(
            request, mode, budgets, thread, run_id, on_event, engine, resumable, owner, write=False
        )
        run.checkpoints = list(checkpoints)
        live = self._live[record.run_id]
        live.approve = approve
        try:
            anywhere = on_event is None and approve is None and run.team_hash == self.engine.team_hash
            await self._launch(record, run, resumable=resumable, anywhere=anywhere)
        except BaseException as exc:
            # Never started: nothing will end it, so it must not stay live (`close` waits for live runs).
            self._live.pop(record.run_id, None)
            live.done.set()
            if isinstance(exc, sa.exc.SQLAlchemyError):  # a database to fix, as at start-up: a ConfigError
                fix = "" if is_damaged(exc) or is_full(exc) else "fix the database (disk space, permissions) and "
                raise ConfigError(
                    f"the run could not be started: the runs database {self.config.redacted_url} refused it "
                    f"({reason_of(exc)}). Nothing ran; {fix}start it again"
                ) from None
            raise
        return record

    async def _launch(self, record: RunRecord, run: RunInput, *, resumable: bool, anywhere: bool) -> None:
        if resumable and anywhere and self.replicas is not None:
            await self.store.write(record)  # before another replica can take the run and write its progress
            self._live.pop(record.run_id, None)  # any replica may run it, on its own engine (same team)
            await replicas.enqueue(run)
        elif resumable:
            # DBOS's workflow row first, so the run starts without waiting for its record (both are committed
            # before the id is returned). Not both at once: two SQLite writers make one sleep in its busy
            # handler (a millisecond or more). The record is queued before the run's task first runs, so its
            # progress always comes after it; a crash in between leaves a workflow that recovery resumes and
            # records (`execute` makes the record of a run it finds none for).
            with SetWorkflowID(record.run_id):
                await DBOS.start_workflow_async(workflow.run_workflow, run)
            await self.store.write(record)
        else:
            await self.store.write(record)
            assert self._tg is not None
            self._tg.start_soon(self._execute_quietly, run)

    async def run_here(
        self,
        request: str,
        *,
        engine: Engine,
        mode: Mode | None = None,
        budgets: Budgets | None = None,
        thread: str | None = None,
        on_event: EventSink | None = None,
        owner: str | None = None,
    ) -> RunRecord:
        """Run a non-resumable run in the calling task (a run on the client's model, whose sampling requests
        must come from the call that started it) and return its final record; recorded like any other, and
        marked `interrupted` if the process stops first. Cancelling the call cancels the run."""
        record, run = await self._begin(request, mode, budgets, thread, None, on_event, engine, False, owner)
        with contextlib.suppress(Exception):
            await self.execute(run, durable=False)
        final = await self.get(record.run_id)
        assert final is not None
        return final

    def keep(self, result: RunResult, owner: str | None = None) -> None:
        """Record a run that ran outside the service (a specialist's own tool call, a run that stops at
        checkpoints) as it is now; not resumable, so a restart marks it interrupted if it was still running."""
        record = RunRecord(run_id=result.run_id, status=result.status, request=result.request, mode=result.mode,
                           executor_id=self.executor_id, resumable=False, app_version=self.config.app_version,
                           started_at=result.started_at, updated_at=now(), result=result, owner=owner)  # fmt: skip
        self.store.put(record)

    async def _begin(
        self,
        request: str,
        mode: Mode | None,
        budgets: Budgets | None,
        thread: str | None,
        run_id: str | None,
        on_event: EventSink | None,
        engine: Engine | None,
        resumable: bool,
        owner: str | None = None,
        *,
        write: bool = True,
    ) -> tuple[RunRecord, RunInput]:
        engine = engine or self.engine
        fresh, run_id = run_id is None, run_id or uuid.uuid4().hex
        history = await self.history(thread, owner) if thread else ThreadHistory()
        started = now()
        run = RunInput(run_id=run_id, request=request, mode=mode, budgets=budgets, thread=thread,
                       history=history, started_at=started, team_hash=engine.team_hash)  # fmt: skip
        record = RunRecord(run_id=run_id, status="running", request=request, thread=thread, mode=mode,
                           executor_id=self.executor_id, resumable=resumable,
                           workflow_id=run_id if resumable else None, app_version=self.config.app_version,
                           started_at=started, updated_at=started, owner=owner)  # fmt: skip
        self._live[run_id] = Live(Progress(record), engine, on_event, fresh=fresh)
        if write:
            await self.store.write(record)
        return record, run

    async def get(self, run_id: str) -> RunRecord | None:
        if (live := self._live.get(run_id)) is not None:
            return live.progress.snapshot() if not live.progress.record.finished else live.progress.record
        return await anyio.to_thread.run_sync(self.store.get, run_id)

    async def list(
        self,
        *,
        limit: int = 50,
        offset: int = 0,
        thread: str | None = None,
        keep: Callable[[RunRecord], bool] | None = None,
        deep: int = 1000,
    ) -> list[RunRecord]:
        """The newest runs (of `thread`) after the first `offset`; with `keep` (e.g. one user's runs), only the
        runs it keeps, at most `deep` runs deep (`RunStore.kept`)."""
        await self.store.flush()  # what this process has queued is listed too
        if keep is not None:
            return await self.store.kept(keep, limit=limit, offset=offset, thread=thread, deep=deep)
        return await anyio.to_thread.run_sync(lambda: self.store.list(limit=limit, offset=offset, thread=thread))

    async def wait(self, run_id: str, timeout: float | None = None) -> RunRecord | None:
        """The record once the run has finished, or as it is when `timeout` seconds have passed."""
        latest = None
        with anyio.move_on_after(timeout):
            async for record in self.store.subscribe(run_id, final=True):
                latest = record if record.finished else None
        return latest or await self.get(run_id)  # on timeout, the record as it is now

    def subscribe(self, run_id: str) -> AsyncIterator[RunRecord]:
        """The record now and after each change (for `resources/subscribe`), until the run has finished."""
        return self.store.subscribe(run_id, poll=CANCEL_POLL)

    async def cancel(self, run_id: str, reason: str = "cancelled by request") -> RunRecord | None:
        """Cancel: DBOS first (durable: nothing resumes after a restart), then the run's own task here, so
        in-flight model and tool calls stop at once. A run of another process stops within a second. A run
        that has finished is left as it is (`finished_cancel`). `CancelRefused` when the database refused to
        cancel the workflow of a run recorded cancelled: cancelling again finishes it."""
        record = await self.get(run_id)
        if record is None or record.finished:
            return await finished_cancel(record)
        if (live := self._live.get(run_id)) is not None:
            if record.resumable and record.workflow_id:
                # Refused, the run stops all the same: it ends with its cancelled record, never run again.
                with contextlib.suppress(CancelRefused):
                    await cancel_workflow(record)
            live.cancel_reason = reason
            live.scope.cancel()
            await live.done.wait()
            return await self.get(run_id)
        return await cancel_elsewhere(self.store, record, reason)

    async def answer(
        self, run_id: str, decision: Decision, name: str | None = None, round_: int | None = None
    ) -> Checkpoint:
        """Answer the checkpoint run `run_id` waits at (the one named `name`, in round `round_`, when given), here
        or on the replica running it. Returns the checkpoint answered; `NotWaiting` (saying why) when it waits at
        none."""
        try:
            return self.checkpoints.answer(run_id, decision, name, round_)
        except approvals.NotWaiting:
            record = await self.get(run_id)
            if self.replicas is None or record is None or record.executor_id == self.executor_id:
                raise
            return await approvals.answer_elsewhere(self.store.engine, record, decision, name, round_)

    async def history(self, thread: str, owner: str | None = None) -> ThreadHistory:
        """The thread's earlier turns: of `owner`'s runs only (a thread id is a name anyone may choose; another
        principal's runs of the same name are not this one's conversation)."""
        records = await anyio.to_thread.run_sync(
            lambda: self.store.list(limit=1000, thread=thread, status=["complete", "partial"], oldest_first=True)
        )
        mine = [r for r in records if r.owner == owner]
        return build_history([(r.run_id, r.request, r.result.answer if r.result else "") for r in mine])

    async def _recover(self, executor_id: str | None = None) -> None:
        await recovery.recover(self.store, self.config.app_version, executor_id or self.executor_id, self._live)
