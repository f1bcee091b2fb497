"""The runs behind MCP Tasks (`TaskRuns` for `tasks`): the durable run service, or, on an `--ephemeral`
server, the server's in-memory runs.

Either way a task's run goes on in the background, outliving the request and the connection that
started it: a durable one is a DBOS workflow (it also outlives the process: it resumes after a restart,
on any replica), an ephemeral one a task in the server's lifespan. Its record is the run record of
`team://runs/{id}`. A cancel stops its in-flight model and tool calls at once (the run's cancel scope)
and returns once the cancelled record is saved. Task runs count against `MCP_TEAM_MAX_RUNS` like other runs.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server.mcpserver.exceptions import ToolError

from mcp_team.handoffs import Budgets, RunResult, Team
from mcp_team.handoffs.checkpoints import checkpoint_problems
from mcp_team.server.durability import RunRequest
from mcp_team.server.limits import client_budgets
from mcp_team.server.state import ServerState
from mcp_team.server.task_wire import POLL_MS, TaskRun
from mcp_team.server.tasks import OnEnd, TaskRuns
from mcp_team.server.views import live_record

if TYPE_CHECKING:
    from mcp_team.runs.service import Runs
    from mcp_team.runs.types import RunRecord

log = logging.getLogger("mcp_team.server")
BUDGETS = ("max_handoffs", "max_model_calls", "max_tokens", "deadline_seconds")
MAX_LISTED = 5000  # runs looked through for one principal's tasks/list


class ServerTaskRuns:
    """The task runs of a server: on the durable run service when it has one, else in memory."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self.durable, self.memory = DurableTaskRuns(state), MemoryTaskRuns(state)

    @property
    def current(self) -> TaskRuns:
        return self.durable if self.state.durability is not None else self.memory

    def serves_tasks(self) -> bool:
        return self.current.serves_tasks()

    async def start(self, arguments: dict[str, Any], owner: str | None, on_end: OnEnd | None = None) -> TaskRun:
        return await self.current.start(arguments, owner, on_end)

    async def get(self, run_id: str) -> TaskRun | None:
        return await self.current.get(run_id)

    async def wait(self, run_id: str) -> TaskRun | None:
        return await self.current.wait(run_id)

    async def cancel(self, run_id: str) -> TaskRun | None:
        return await self.current.cancel(run_id)

    async def list(self, owner: str | None, offset: int, limit: int) -> list[TaskRun]:
        return await self.current.list(owner, offset, limit)

    def stop(self) -> None:
        self.durable.stop()
        self.memory.stop()


class _Base:
    def __init__(self, state: ServerState) -> None:
        self.state = state
        self._waiting: set[anyio.CancelScope] = set()

    def serves_tasks(self) -> bool:
        return self.state.model_settings.configured_backend() not in (None, "sampling")

    async def wait(self, run_id: str) -> TaskRun | None:
        raise NotImplementedError

    def stop(self) -> None:
        for scope in list(self._waiting):
            scope.cancel()

    def _prepare(self, arguments: dict[str, Any], running: int) -> tuple[Team, RunRequest]:
        """What `run_team` checks before it runs (`ToolError` saying what to change), and the team to run;
        `running` is how many runs count against MCP_TEAM_MAX_RUNS now."""
        state = self.state
        request: str = arguments["request"]
        state.limits.check_request(request)
        budgets = client_budgets(state.run_settings.budgets, **{k: arguments.get(k) for k in BUDGETS})
        models = state.own_models()
        if models is None:
            raise ToolError("this server runs run_team as a task only on a model of its own")
        if running >= state.limits.max_runs:
            raise ToolError(
                f"busy: this server already has {running} run(s) in progress, its limit "
                f"(MCP_TEAM_MAX_RUNS={state.limits.max_runs}); retry later"
            )
        checkpoints = arguments.get("checkpoints") or []
        if problems := checkpoint_problems(checkpoints, [s.name for s in state.specialists]):
            raise ToolError("invalid checkpoints: " + "; ".join(problems))
        team = Team(models, state.specialists, state.run_settings)
        asked = RunRequest(request, arguments.get("mode"), budgets, arguments.get("thread"))
        asked.checkpoints = tuple(checkpoints)  # a task's run waits for answer_checkpoint (issue 13)
        return team, asked

    def _on_end(self, run_id: str, on_end: OnEnd | None) -> None:
        """Hand the run to `on_end` once it has finished, unless the server stops first (`stop`)."""
        group = self.state.rounds.task_group
        if on_end is None or group is None:
            return
        scope = anyio.CancelScope()
        self._waiting.add(scope)

        async def wait() -> None:
            try:
                with scope:
                    if (run := await self.wait(run_id)) is not None:
                        await on_end(run)
            except Exception:  # a store that went away at shutdown: nothing left to tell
                log.debug("stopped waiting on run %s", run_id, exc_info=True)
            finally:
                self._waiting.discard(scope)

        group.start_soon(wait)


class DurableTaskRuns(_Base):
    """Tasks over the durable run service (`runs.service.Runs`)."""

    async def start(self, arguments: dict[str, Any], owner: str | None, on_end: OnEnd | None = None) -> TaskRun:
        runs = await self._service()
        team, asked = self._prepare(arguments, runs.running)  # the run service's count, as start_run's
        engine = self.state.engine.engine_for(team)
        record = await runs.start(asked.request, mode=asked.mode, budgets=asked.budgets, thread=asked.thread,
                                  engine=engine, owner=owner, checkpoints=asked.checkpoints)  # fmt: skip
        self._on_end(record.run_id, on_end)
        return _from_record(record)

    async def get(self, run_id: str) -> TaskRun | None:
        return _maybe(await (await self._service()).get(run_id))

    async def wait(self, run_id: str) -> TaskRun | None:
        return _maybe(await (await self._service()).wait(run_id))

    async def cancel(self, run_id: str) -> TaskRun | None:
        from mcp_team.runs.cancels import CancelRefused  # here: the service is open, so DBOS is loaded already

        runs = await self._service()
        try:
            return _maybe(await runs.cancel(run_id, "cancelled by the client (tasks/cancel)"))
        except CancelRefused as exc:  # a locked or read-only database: the cancel is recorded, not finished
            raise MCPError(types.INTERNAL_ERROR, str(exc.retried_with("Send tasks/cancel again"))) from None

    async def list(self, owner: str | None, offset: int, limit: int) -> list[TaskRun]:
        runs = await self._service()
        if owner is None:  # no auth: one user, whose tasks are all the runs
            return [_from_record(r) for r in await runs.list(limit=limit, offset=offset)]
        mine = await runs.list(limit=limit, offset=offset, keep=lambda r: r.owner == owner, deep=MAX_LISTED)
        return [_from_record(r) for r in mine]

    async def _service(self) -> Runs:
        durability = self.state.durability
        assert durability is not None
        try:
            return await durability.service()
        except ToolError as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from None


def _maybe(record: RunRecord | None) -> TaskRun | None:
    return None if record is None else _from_record(record)


def _from_record(record: RunRecord) -> TaskRun:
    waiting = record.waiting.name if record.waiting is not None else None
    return TaskRun(record.run_id, record.status, record.started_at, record.updated_at, record.owner, record.reason,
                   record.result, waiting)  # fmt: skip


@dataclass
class _Task:
    run_id: str
    owner: str | None
    created_at: datetime
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    status: str = "running"  # until the run's own record says otherwise
    reason: str | None = None
    updated_at: datetime | None = None


class MemoryTaskRuns(_Base):
    """Tasks over the in-memory runs of an `--ephemeral` server (they end with the process)."""

    def __init__(self, state: ServerState) -> None:
        super().__init__(state)
        self._tasks: dict[str, _Task] = {}

    async def start(self, arguments: dict[str, Any], owner: str | None, on_end: OnEnd | None = None) -> TaskRun:
        team, asked = self._prepare(arguments, self.state.slots.running)  # counted with run_team's calls
        if asked.thread is not None:
            raise ToolError("'thread' needs durable runs, which this server has off (--ephemeral)")
        group = self.state.rounds.task_group
        assert group is not None, "the server's lifespan has not started"
        task = _Task(uuid.uuid4().hex, owner, datetime.now(UTC))
        self._tasks[task.run_id] = task
        self.state.slots.running += 1  # given back when the run ends
        group.start_soon(self._run, team, task, asked.request, asked.mode, asked.budgets)
        self._on_end(task.run_id, on_end)
        found = await self.get(task.run_id)
        assert found is not None
        return found

    async def _run(self, team: Team, task: _Task, request: str, mode: Any, budgets: Budgets | None) -> None:
        async def on_event(_event: Any) -> None:
            task.updated_at = datetime.now(UTC)

        try:
            with task.scope:
                await team.run(request, mode=mode, budgets=budgets, on_event=live_record(self.state.save_run, on_event),
                               on_finish=self.state.save_run, run_id=task.run_id)  # fmt: skip
        except Exception as exc:  # never a traceback to the client: the task says what happened
            task.status, task.reason = "failed", f"the run stopped on an error: {exc}"
        finally:
            self.state.slots.running -= 1
            task.updated_at = datetime.now(UTC)
            task.done.set()

    async def get(self, run_id: str) -> TaskRun | None:
        task = self._tasks.get(run_id)
        record = self.state.store.get(run_id)
        if task is None:
            if record is None:
                return None
            return TaskRun(run_id, record.status, record.started_at, _updated(None, record), result=record)
        status = task.status  # "failed" when the run stopped on an error
        if status == "running" and record is not None:
            status = record.status
        return TaskRun(run_id, status, task.created_at, _updated(task, record), task.owner, task.reason, record)

    async def wait(self, run_id: str) -> TaskRun | None:
        task = self._tasks.get(run_id)
        if task is not None:
            await task.done.wait()
        # a run not started as a task: its record is all there is to watch
        while (run := await self.get(run_id)) is not None and not run.finished:  # noqa: ASYNC110
            await anyio.sleep(POLL_MS / 1000)
        return run

    async def cancel(self, run_id: str) -> TaskRun | None:
        task = self._tasks.get(run_id)
        if task is None:
            raise MCPError(
                types.INVALID_PARAMS,
                f"Cannot cancel task: run {run_id} was started by a plain run_team call; cancel that call to stop it",
            )
        task.reason = "cancelled by the client (tasks/cancel)"
        task.scope.cancel()
        await task.done.wait()
        return await self.get(run_id)

    def stop(self) -> None:
        """Ephemeral runs end with the server."""
        super().stop()
        for task in self._tasks.values():
            task.reason = task.reason or "the server stopped"
            task.scope.cancel()

    async def list(self, owner: str | None, offset: int, limit: int) -> list[TaskRun]:
        found = [run for r in self.state.store.recent(MAX_LISTED) if (run := await self.get(r.run_id)) is not None]
        return [run for run in found if owner is None or run.owner == owner][offset : offset + limit]


def _updated(task: _Task | None, record: RunResult | None) -> datetime:
    moments = [m for m in (task and task.updated_at, task and task.created_at, record and record.ended_at) if m]
    if record is not None:
        moments.append(record.started_at)
    return max(moments)
