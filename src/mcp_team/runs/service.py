"""The one run service: every way a run is started, followed, cancelled or answered goes through `Runs`.

`run_team`, `start_run`/`get_run`/`cancel_run`/`answer_checkpoint`, MCP tasks, `mcp-team run`, `mcp-team runs`
and `eval` all call it; none of them starts, waits for or cancels a run in its own code. A run starts in `start`
(and `run`, which waits), runs and ends in `Execution.execute` (runs/execution.py), and is cancelled in `cancel`.

A service opened on a `DurableConfig` keeps its runs in the runs database and runs them as DBOS workflows
(runs/durable.py): they survive a crash, resume at the next start and, on PostgreSQL, are taken over by another
replica. One opened without (`--ephemeral`, an eval, a recorded run) keeps them in memory (`MemoryRunStore`),
runs them as tasks, and never imports DBOS. Either way a run that cannot resume (on the client's model through
sampling) runs in the task of the call that asks for it.
"""

from __future__ import annotations

import contextlib
import importlib
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from mcp_team.errors import ConfigError
from mcp_team.handoffs import RunResult
from mcp_team.handoffs.checkpoints import Approver, Checkpoint, Decision
from mcp_team.runs import approvals
from mcp_team.runs.approvals import Board
from mcp_team.runs.config import DurableConfig
from mcp_team.runs.execution import Execution
from mcp_team.runs.live import Live
from mcp_team.runs.records import Progress
from mcp_team.runs.store import MemoryRunStore, RunStore
from mcp_team.runs.threads import ThreadHistory, build_history
from mcp_team.runs.types import Engine, EventSink, RunInput, RunRecord, RunRequest, Settled, now

if TYPE_CHECKING:
    from mcp_team.runs.durable import Durable

CANCEL_POLL = 1.0  # seconds between looks at another process's changes to a run followed here
ANSWER_WITHIN = 10.0  # seconds an answer waits for a run resuming here to come back to the checkpoint it waited at


class Runs(Execution):
    """Runs of this process and, with a runs database, of every process on it (see the module docstring)."""

    def __init__(self, store: RunStore, engine: Engine, *, executor_id: str, app_version: str = "") -> None:
        self.store = store
        self.engine = engine
        self.executor_id = executor_id
        self.app_version = app_version
        self.durable: Durable | None = None
        self._live: dict[str, Live] = {}
        self._closing = False
        # The process was asked to stop (a signal): calls cancelled from now on by the stop leave their durable
        # runs pending, to resume at the next start. Set by the server, read by the calls waiting for runs.
        self.stopping = False
        self._tg: TaskGroup | None = None
        self.checkpoints = Board()  # the checkpoints this process's runs wait at

    @property
    def running(self) -> int:
        """Runs executing in this process now."""
        return len(self._live)

    @property
    def live(self) -> Mapping[str, Live]:
        """The runs executing in this process, by id."""
        return self._live

    # --- lifecycle ----------------------------------------------------------------------------
    @classmethod
    async def open(cls, config: DurableConfig | None, engine: Engine) -> Runs:
        """The service; durable on `config`'s database, else in memory. `ConfigError` (never a traceback) naming
        what to fix when the database cannot be used."""
        if config is None:
            return cls(MemoryRunStore(), engine, executor_id=_ephemeral_id())
        # DBOS and SQLAlchemy, loaded only by a durable service, and off the loop (about half a second)
        await anyio.to_thread.run_sync(importlib.import_module, "mcp_team.runs.durable")
        from mcp_team.runs import launch
        from mcp_team.runs.durable import Durable

        store, lease = await anyio.to_thread.run_sync(launch.prepare, config)
        runs = cls(store, engine, executor_id=lease.executor_id, app_version=config.app_version)
        runs.durable = Durable(config, store, lease, runs)
        await runs.durable.open()
        return runs

    def serve(self, tg: TaskGroup, *, adopt_orphans: bool = False) -> None:
        """Start the background work in `tg`: coalesced writes; for a durable service, cancellations from other
        processes, replicas and (a server on SQLite: `adopt_orphans`) the runs of dead processes."""
        self._tg = tg
        tg.start_soon(self.store.flush_loop)
        if self.durable is not None:
            self.durable.serve(tg, adopt_orphans=adopt_orphans)

    async def close(self) -> None:
        """Stop running work here: durable runs stay pending and resume at the next start; runs that cannot resume
        are marked interrupted now."""
        self._closing = True
        for live in list(self._live.values()):
            live.scope.cancel()
            await live.done.wait()
        if self.durable is not None:
            await self.durable.close()
        else:
            await self.store.flush()

    @property
    def recovered(self) -> Sequence[Settled]:
        """What this process found left running by an earlier one, and what became of each (runs/recovery.py)."""
        return self.durable.recovered if self.durable is not None else ()

    # --- starting -----------------------------------------------------------------------------
    async def start(
        self,
        request: RunRequest,
        *,
        engine: Engine | None = None,
        owner: str | None = None,
        on_event: EventSink | None = None,
        approve: Approver | None = None,
        resumable: bool = True,
        run_id: str | None = None,
    ) -> RunRecord:
        """Start a run and return its record at once. Durable when the service is and `resumable` (a run on the
        session's `engine`, e.g. the client's model through sampling, passes False: recorded, but not resumed
        after a restart). `approve`: the session's checkpoint approver, attached while it runs here. `ConfigError`
        when the runs database refuses it (nothing ran)."""
        record, run = await self._begin(request, engine, owner, on_event, run_id, resumable)
        live = self._live[record.run_id]
        live.approve = approve
        try:
            if self.durable is not None and record.resumable:
                anywhere = on_event is None and approve is None and run.team_hash == self.engine.team_hash
                if await self.durable.start(record, run, anywhere=anywhere):
                    self._live.pop(record.run_id, None)  # on the shared queue: whichever replica takes it runs it
            else:
                await self.store.write_new(record)
                assert self._tg is not None, "the run service is not serving (Runs.serve)"
                self._tg.start_soon(self._execute_quietly, run)
        except BaseException as exc:
            # Never started: nothing will end it, so it must not stay live (`close` waits for live runs).
            self._live.pop(record.run_id, None)
            live.done.set()
            if _database_error(exc):
                raise self._refused(exc) from None
            raise
        return record

    async def run(
        self,
        request: RunRequest,
        *,
        engine: Engine | None = None,
        owner: str | None = None,
        on_event: EventSink | None = None,
        approve: Approver | None = None,
        resumable: bool = True,
        in_task: bool = False,
        stop: anyio.Event | None = None,
        run_id: str | None = None,
    ) -> RunRecord:
        """Run it and return its final record. Cancelling the call cancels the run, unless the process is stopping
        (a durable run then goes on at the next start). `in_task`: it runs in the calling task (a run on the
        client's model, whose sampling requests must come from the call that started it; never resumable). When
        `stop` is set first (the server was asked to stop), a durable run raises `RunKept` naming the run, which goes
        on at the next start."""
        if in_task:
            record, run_input = await self._begin(request, engine, owner, on_event, run_id, resumable=False)
            self._live[record.run_id].approve = approve
            await self.store.write_new(record)
            with contextlib.suppress(Exception):
                await self.execute(run_input, durable=False)
            final = await self.get(record.run_id)
            assert final is not None
            return final
        started = await self.start(request, engine=engine, owner=owner, on_event=on_event, approve=approve,
                                   resumable=resumable, run_id=run_id)  # fmt: skip
        try:  # a stop leaves a durable run to go on later: its caller is told so; any other run gets to end
            final = await self._wait_unless(stop if started.resumable else None, started.run_id)
        except anyio.get_cancelled_exc_class():
            if not (self.stopping and started.resumable):  # a stop leaves a durable run to resume; else: cancelled
                with anyio.CancelScope(shield=True):
                    await self.cancel(started.run_id, "cancelled by the client")
            raise
        if final is None:
            raise RunKept(started.run_id)
        return final

    def keep(self, result: RunResult, owner: str | None = None) -> None:
        """Record a run that ran outside the service (a specialist's own tool call) as it is now; not resumable, so
        a restart marks it interrupted if it was still running."""
        record = RunRecord(run_id=result.run_id, status=result.status, request=result.request, mode=result.mode,
                           executor_id=self.executor_id, resumable=False, app_version=self.app_version,
                           started_at=result.started_at, updated_at=now(), result=result, owner=owner)  # fmt: skip
        self.store.put(record)

    async def _begin(
        self,
        request: RunRequest,
        engine: Engine | None,
        owner: str | None,
        on_event: EventSink | None,
        run_id: str | None,
        resumable: bool,
    ) -> tuple[RunRecord, RunInput]:
        engine = engine or self.engine
        run_id = run_id or uuid.uuid4().hex
        resumable = resumable and self.durable is not None
        history = await self.history(request.thread, owner) if request.thread else ThreadHistory()
        started = now()
        run = RunInput(run_id=run_id, request=request.request, mode=request.mode, budgets=request.budgets,
                       thread=request.thread, history=history, started_at=started, team_hash=engine.team_hash,
                       checkpoints=list(request.checkpoints))  # fmt: skip
        record = RunRecord(run_id=run_id, status="running", request=request.request, thread=request.thread,
                           mode=request.mode, executor_id=self.executor_id, resumable=resumable,
                           workflow_id=run_id if resumable else None, app_version=self.app_version,
                           started_at=started, updated_at=started, owner=owner, executions=1)  # fmt: skip
        self._live[run_id] = Live(Progress(record), engine, on_event)
        return record, run

    def _refused(self, exc: BaseException) -> ConfigError:
        """A run the runs database would not record: said as the start-up problems are (nothing ran)."""
        from mcp_team.runs.database import is_damaged, is_full, reason_of

        assert self.durable is not None
        fix = "" if is_damaged(exc) or is_full(exc) else "fix the database (disk space, permissions) and "
        return ConfigError(
            f"the run could not be started: the runs database {self.durable.config.redacted_url} refused it "
            f"({reason_of(exc)}). Nothing ran; {fix}start it again"
        )

    # --- following ----------------------------------------------------------------------------
    async def get(self, run_id: str) -> RunRecord | None:
        if (live := self._live.get(run_id)) is not None:
            if live.progress.record.finished:
                return live.progress.record
            if self.durable is not None and await self._cancelled_elsewhere(run_id):
                # Cancelled by another process a moment ago; this one stops it within a second (runs/cancels.py).
                # Whoever reads it meanwhile is told what was recorded, not that it still runs.
                return await anyio.to_thread.run_sync(self.store.stored, run_id)
            return live.progress.shown()
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
        return await self.store.page(limit=limit, offset=offset, thread=thread, keep=keep, deep=deep)

    async def wait(self, run_id: str, timeout: float | None = None) -> RunRecord | None:
        """The record once the run has finished, or as it is when `timeout` seconds have passed. A run of this
        process is waited on in memory (its final record is stored before it ends); another process's is followed
        in the store."""
        latest = None
        with anyio.move_on_after(timeout):
            if (live := self._live.get(run_id)) is not None:
                await live.done.wait()
                if (record := await self.get(run_id)) is not None and record.finished:
                    return record
            async for record in self.store.subscribe(run_id, final=True):
                latest = record if record.finished else None
        return latest or await self.get(run_id)  # on timeout, the record as it is now

    def subscribe(self, run_id: str) -> AsyncIterator[RunRecord]:
        """The record now and after each change (for `resources/subscribe`), until the run has finished."""
        return self.store.subscribe(run_id, poll=CANCEL_POLL)

    async def _cancelled_elsewhere(self, run_id: str) -> bool:
        return bool(await anyio.to_thread.run_sync(self.store.cancelled_among, [run_id]))

    async def history(self, thread: str, owner: str | None = None) -> ThreadHistory:
        """The thread's earlier turns: of `owner`'s runs only (a thread id is a name anyone may choose; another
        principal's runs of the same name are not this one's conversation)."""
        records = await anyio.to_thread.run_sync(
            lambda: self.store.list(limit=1000, thread=thread, status=["complete", "partial"], oldest_first=True)
        )
        mine = [r for r in records if r.owner == owner]
        return build_history([(r.run_id, r.request, r.result.answer if r.result else "") for r in mine])

    async def is_over(self, run_id: str) -> bool:
        """Whether `run_id`'s record is finished (or unknown): nothing of it will run here again."""
        record = await anyio.to_thread.run_sync(self.store.get, run_id)
        return record is None or record.finished

    async def _wait_unless(self, stop: anyio.Event | None, run_id: str) -> RunRecord | None:
        """The run's final record; None as soon as `stop` is set."""
        if stop is None:
            return await self.wait(run_id)
        final: list[RunRecord | None] = []
        async with anyio.create_task_group() as tg:

            async def wait() -> None:
                final.append(await self.wait(run_id))
                tg.cancel_scope.cancel()

            tg.start_soon(wait)
            await stop.wait()
            tg.cancel_scope.cancel()
        return final[0] if final else None

    # --- cancelling and answering -------------------------------------------------------------
    async def cancel(self, run_id: str, reason: str = "cancelled by request") -> RunRecord | None:
        """Cancel: a run here stops its calls at once while DBOS records the cancel (nothing resumes it after a
        restart); returns once its cancelled record is stored. One of another process stops within a second; one
        that has finished is left as it is. `CancelRefused`: DBOS refused, and cancelling again finishes it."""
        if (live := self._live.get(run_id)) is not None and not live.progress.record.finished:
            live.cancel_reason = reason
            live.scope.cancel()  # before any await: a read or DBOS's write once outlasted the rest of a busy run
            try:
                if self.durable is not None:
                    await self.durable.cancel_here(live.progress.record)
            finally:
                live.workflow_cancelled.set()
            await live.done.wait()
            return await self.get(run_id)
        record = await self.get(run_id)
        if record is None or record.finished:
            return await self.durable.finished_cancel(record) if self.durable is not None else record
        if self.durable is None:  # recorded running, but no task of this process runs it: it never will
            final = Progress(record).finish("cancelled", reason=reason)
            await self.store.write(final)
            return final
        return await self.durable.cancel_elsewhere(record, reason)

    async def answer(
        self, run_id: str, decision: Decision, name: str | None = None, round_: int | None = None
    ) -> Checkpoint:
        """Answer the checkpoint run `run_id` waits at (the one named `name`, in round `round_`, when given), here
        or on the replica running it. Returns the checkpoint answered; `NotWaiting` (saying why) when it waits at
        none. A run of this process may come to its checkpoint while its record is read (a resumed run's replay,
        on a busy machine): it is looked for here once more, never sent to the other replicas."""
        try:
            return self.checkpoints.answer(run_id, decision, name, round_)
        except approvals.NotWaiting:
            record = await self.get(run_id)
            if self.durable is None or record is None:
                raise
            if (back_to := self._resuming_at(run_id, record)) is not None:
                return await self._answer_once_back(run_id, back_to, decision, name, round_)
            if run_id in self._live:
                return self.checkpoints.answer(run_id, decision, name, round_)
            return await self.durable.answer_elsewhere(record, decision, name, round_)

    def _resuming_at(self, run_id: str, record: RunRecord) -> Checkpoint | None:
        """The checkpoint run `run_id` waited at before a restart, while this process resumes it and its replay has not
        come back there yet (its record showed it waiting there: a client answers what it was shown)."""
        if (live := self._live.get(run_id)) is not None:
            return live.back_to
        # recovered at this process's start, its workflow not begun again yet
        mine = record.executor_id == self.executor_id and not record.finished
        return record.waiting if mine else None

    async def _answer_once_back(
        self, run_id: str, back_to: Checkpoint, decision: Decision, name: str | None, round_: int | None
    ) -> Checkpoint:
        """Answer `back_to` once the resumed run waits there again (its replay takes milliseconds, a busy process
        longer), within `ANSWER_WITHIN` seconds; refused at once when the answer names another checkpoint or round,
        and as soon as the run ends. Another checkpoint first (a fan-out's branch asking again what its answer, given
        just before the kill, had not recorded) is no reason to refuse: the client answers what it was shown."""
        if name not in (None, back_to.name) or round_ not in (None, back_to.round):
            raise approvals.NotWaiting(run_id)
        with anyio.move_on_after(ANSWER_WITHIN):
            while True:
                changed = self.checkpoints.changed(run_id)  # taken before the look: a change after it is seen
                try:
                    return self.checkpoints.answer(run_id, decision, back_to.name, back_to.round)
                except approvals.NotWaiting:
                    if await self.is_over(run_id):
                        raise
                await changed.wait()
        raise approvals.NotWaiting(run_id, f"it is resuming after a restart and did not come back to checkpoint "
                                   f"'{back_to.name}' within {ANSWER_WITHIN:g} s; try again")  # fmt: skip


class RunKept(Exception):
    """The process stopped before the run ended: it is kept, and goes on at the next start (`run_id`)."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.run_id = run_id


def _database_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("sqlalchemy")


def _ephemeral_id() -> str:
    """The executor id of an ephemeral service: nothing resumes its runs, so it only says where they ran."""
    return f"{socket.gethostname() or 'host'}-ephemeral"
