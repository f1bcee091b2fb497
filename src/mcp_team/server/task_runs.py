"""Runs started as tasks, in this process's memory (`TaskRuns` for `tasks`).

A task's run goes on in the server's lifespan task group, so it outlives the request and the connection
that started it (not the process). Its record is the server's run record (`team://runs/{id}`), saved as it
goes; a cancel stops its in-flight model and tool calls at once (the run's cancel scope) and returns once
the cancelled record is saved.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver.exceptions import ToolError

from mcp_team.handoffs import RunEvent, RunResult, Team
from mcp_team.server.limits import client_budgets
from mcp_team.server.state import ServerState
from mcp_team.server.tasks import POLL_MS, TaskRun
from mcp_team.server.views import live_record


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


class MemoryTaskRuns:
    """Tasks over the server's in-memory runs."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self._tasks: dict[str, _Task] = {}

    def serves_tasks(self) -> bool:
        return self.state.model_settings.configured_backend() not in (None, "sampling")

    async def start(self, ctx: ServerRequestContext[Any, Any], arguments: dict[str, Any], owner: str | None) -> TaskRun:
        state = self.state
        request: str = arguments["request"]
        if not request.strip():
            raise ToolError("'request' is empty: say what the team should do")
        state.limits.check_request(request)
        budgets = client_budgets(
            state.run_settings.budgets,
            **{k: arguments.get(k) for k in ("max_handoffs", "max_model_calls", "max_tokens", "deadline_seconds")},
        )
        models = state.configured_models()
        group = state.rounds.task_group
        if models is None or group is None:
            raise ToolError("this server runs run_team as a task only on a model of its own")
        team = Team(models, state.specialists, state.run_settings)
        task = _Task(uuid.uuid4().hex, owner, datetime.now(UTC))
        self._tasks[task.run_id] = task
        work = state.slots.guarded(self._run, state.limits.max_runs)  # busy beyond MCP_TEAM_MAX_RUNS

        async def run() -> None:
            try:
                await work(team, task, request, arguments.get("mode"), budgets)
            except ToolError as exc:  # busy
                task.status, task.reason = "failed", str(exc)
            except Exception as exc:  # never a traceback to the client: the task says what happened
                task.status, task.reason = "failed", f"the run stopped on an error: {exc}"
            finally:
                task.updated_at = datetime.now(UTC)
                task.done.set()

        group.start_soon(run)
        found = await self.get(task.run_id)
        assert found is not None
        return found

    async def _run(self, team: Team, task: _Task, request: str, mode: Any, budgets: Any) -> None:
        async def on_event(event: RunEvent) -> None:
            task.updated_at = datetime.now(UTC)

        with task.scope:
            await team.run(
                request,
                mode=mode,
                budgets=budgets,
                on_event=live_record(self.state.save_run, on_event),
                on_finish=self.state.save_run,
                run_id=task.run_id,
            )

    async def get(self, run_id: str) -> TaskRun | None:
        task = self._tasks.get(run_id)
        record = self.state.store.get(run_id)
        if task is None:
            if record is None:
                return None
            return TaskRun(run_id, record.status, record.started_at, _updated(None, record), result=record)
        status = task.status  # "failed" when the run could not start or stopped on an error
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
        task.reason = "cancelled by request"
        task.scope.cancel()
        await task.done.wait()
        return await self.get(run_id)

    async def list(self, owner: str | None, offset: int, limit: int) -> list[TaskRun]:
        found = []
        for record in self.state.store.recent(10_000):
            run = await self.get(record.run_id)
            if run is not None and run.owner == owner:
                found.append(run)
        return found[offset : offset + limit]


def _updated(task: _Task | None, record: RunResult | None) -> datetime:
    moments = [m for m in (task and task.updated_at, task and task.created_at, record and record.ended_at) if m]
    if record is not None:
        moments.append(record.started_at)
    return max(moments)
