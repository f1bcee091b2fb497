"""The runs behind MCP Tasks (`TaskRuns` for `tasks`): the server's run service, durable or in memory.

A task's run goes on in the background, outliving the request and the connection that started it (a durable one
also outlives the process: it resumes after a restart, on any replica). Its record is the run record of
`team://runs/{id}`. A cancel stops its in-flight model and tool calls at once (the run's cancel scope) and
returns once the cancelled record is saved. Task runs count against `MCP_TEAM_MAX_RUNS` like other runs.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server.mcpserver.exceptions import ToolError

from mcp_team.errors import McpTeamError
from mcp_team.handoffs import Team
from mcp_team.runs.errors import CancelRefused
from mcp_team.server.state import ServerState
from mcp_team.server.surface.run_arguments import RunArguments, run_request
from mcp_team.server.tasks.handlers import OnEnd
from mcp_team.server.tasks.wire import TaskRun

if TYPE_CHECKING:
    from mcp_team.runs.service import Runs
    from mcp_team.runs.types import RunRecord

log = logging.getLogger("mcp_team.server")
MAX_LISTED = 5000  # runs looked through for one principal's tasks/list


class ServerTaskRuns:
    """The task runs of a server, on its run service."""

    def __init__(self, state: ServerState) -> None:
        self.state = state
        self._waiting: set[anyio.CancelScope] = set()

    def serves_tasks(self) -> bool:
        return self.state.model_settings.configured_backend() not in (None, "sampling")

    async def start(self, arguments: dict[str, Any], owner: str | None, on_end: OnEnd | None = None) -> TaskRun:
        from mcp_team.server.surface.tools import run_engine  # tools imports this module's users

        state = self.state
        runs = await self._service()
        asked = run_request(state, RunArguments(**arguments))  # run_team's checks: ToolError saying what to change
        models = state.own_models()
        if models is None:
            raise ToolError("this server runs run_team as a task only on a model of its own")
        if runs.running >= state.limits.max_runs:
            raise ToolError(
                f"busy: this server already has {runs.running} run(s) in progress, its limit "
                f"(MCP_TEAM_MAX_RUNS={state.limits.max_runs}); retry later"
            )
        team = Team(models, state.specialists, state.run_settings)
        try:
            record = await runs.start(asked, engine=run_engine(state, team), owner=owner,
                                      resumable=not state.model_settings.record_dir)  # fmt: skip
        except McpTeamError as exc:
            raise ToolError(str(exc)) from None
        self._on_end(record.run_id, on_end)
        return _from_record(record)

    async def get(self, run_id: str) -> TaskRun | None:
        return _maybe(await (await self._service()).get(run_id))

    async def wait(self, run_id: str) -> TaskRun | None:
        return _maybe(await (await self._service()).wait(run_id))

    async def cancel(self, run_id: str) -> TaskRun | None:
        runs = await self._service()
        try:
            return _maybe(await runs.cancel(run_id, "cancelled by the client (tasks/cancel)"))
        except CancelRefused as exc:  # a locked or read-only database: the cancel is recorded, not finished
            raise MCPError(types.INTERNAL_ERROR, str(exc.retried_with("Send tasks/cancel again"))) from None

    async def list(self, owner: str | None, offset: int, limit: int) -> list[TaskRun]:
        runs = await self._service()
        if owner is None:  # no auth (one user), or an operator: every run
            return [_from_record(r) for r in await runs.list(limit=limit, offset=offset)]
        mine = await runs.list(limit=limit, offset=offset, keep=lambda r: r.owner == owner, deep=MAX_LISTED)
        return [_from_record(r) for r in mine]

    def stop(self) -> None:
        """The server is stopping: stop waiting on runs (a durable run goes on at the next start)."""
        for scope in list(self._waiting):
            scope.cancel()

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

    async def _service(self) -> Runs:
        try:
            return await self.state.runs.get()
        except ToolError as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from None


def _maybe(record: RunRecord | None) -> TaskRun | None:
    return None if record is None else _from_record(record)


def _from_record(record: RunRecord) -> TaskRun:
    waiting = record.waiting.name if record.waiting is not None else None
    return TaskRun(record.run_id, record.status, record.started_at, record.updated_at, record.owner, record.reason,
                   record.result, waiting)  # fmt: skip
