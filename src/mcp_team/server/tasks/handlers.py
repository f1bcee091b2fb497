"""MCP Tasks for `run_team` on both protocol revisions. A task is a run: the task id is the run id, so
`team://runs/{id}` and the run tools show what `tasks/get` shows, and cancelling one cancels the other.

- 2025-11-25 (core, experimental): `initialize` declares `capabilities.tasks` and `tools/list` gives
  `run_team` `execution.taskSupport: "optional"`. A `tools/call` with `task` answers at once with a
  `CreateTaskResult`; then `tasks/get`, `tasks/result` (blocks until the run ends, then answers exactly
  what the plain call would have: the run's result, `isError` for a failed run), `tasks/list` (paginated)
  and `tasks/cancel` (-32602 once the task has ended). The session that created a task gets
  `notifications/tasks/status` when it ends. A failed run is a `failed` task, as this revision says.
- 2026-07-28 (extension `io.modelcontextprotocol/tasks`, SEP-2663): the server decides; a `run_team` call
  from a client that declares the extension (for the session or in the request's `_meta`) answers
  `resultType: "task"`. `tasks/get` inlines the result (a failed run is `completed` with `isError`, as
  this revision says) or, for a run that could not go on, the error; `tasks/cancel` acks `{}` whatever the
  state; `tasks/update` acks (a run never asks for input). A client that did not declare the extension
  gets -32021 from tasks/*, and `run_team` as a plain call. No `tasks/result` or `tasks/list` (-32601).

The SDK (mcp 2.3) has no task runtime. The 2026 side is an `Extension` (SEP-2133): methods plus a
`tools/call` interceptor. The 2025 side is server middleware, because the SDK checks a 2025 `tools/call`
result against `CallToolResult` after any interceptor, which a `CreateTaskResult` is not.

Tasks run on the server's own model. Without one (the client's model through sampling), the server
declares no tasks and `run_team` runs as a plain call, as before.

Access (the spec's "authorization context"): with auth on, a task belongs to the principal that
created it; another principal gets "task not found" and `tasks/list` lists only the caller's, except to an
operator (OAuth's operator scope), who sees every one. Without auth (stdio, a loopback HTTP server) there is
one user: any client that knows a task id can read it, as `team://runs` already lists every run; ids are
128-bit random.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import mcp_types as types
from mcp import MCPError
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import Extension, MethodBinding, require_client_extension
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types.jsonrpc import HEADER_MISMATCH
from pydantic import Field

from mcp_team.server.auth import caller, principal, visible
from mcp_team.server.surface.strict import tool_error_text
from mcp_team.server.tasks.wire import (
    TASK_TOOL,
    TaskRun,
    interrupted_error,
    not_found,
    task_status,
    task_wire,
    tool_result,
    validate_arguments,
)

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

EXTENSION = "io.modelcontextprotocol/tasks"
LEGACY = frozenset({"2025-11-25"})  # the only handshake revision that has tasks
MODERN = frozenset({"2026-07-28"})
PAGE = 50  # tasks per tasks/list page
RELATED = "io.modelcontextprotocol/related-task"
LEGACY_CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


OnEnd = Callable[[TaskRun], Awaitable[None]]


class TaskRuns(Protocol):
    """What tasks need of the run service."""

    def serves_tasks(self) -> bool:
        """Whether runs can start as tasks (the server has a model of its own)."""
        ...

    async def start(self, arguments: dict[str, Any], owner: str | None, on_end: OnEnd | None = None) -> TaskRun:
        """Start a run of `run_team`'s validated `arguments`; return once `get` finds it. A `ToolError`
        (a limit, a budget above the operator's) says what the caller must change. `on_end` gets the run
        when it has finished (unless the server stops first)."""
        ...

    def stop(self) -> None:
        """The server is stopping: stop waiting on runs (a durable run goes on at the next start)."""
        ...

    async def get(self, run_id: str) -> TaskRun | None: ...

    async def wait(self, run_id: str) -> TaskRun | None:
        """The run once it has finished."""
        ...

    async def cancel(self, run_id: str) -> TaskRun | None:
        """Stop the run (its in-flight model and tool calls at once) and return it, cancelled."""
        ...

    async def list(self, owner: str | None, offset: int, limit: int) -> list[TaskRun]:
        """Runs of `owner` (None: every run: no auth, one user; or an operator), newest first."""
        ...


# --- the methods -----------------------------------------------------------------------------------
class TaskIdParams(types.RequestParams, defer_build=True):
    task_id: str = Field(alias="taskId", min_length=1)


class UpdateParams(TaskIdParams):
    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


class TasksExtension(Extension):
    """The 2026-07-28 tasks extension, and the tasks/* methods of both revisions."""

    identifier = EXTENSION

    def __init__(self, runs: TaskRuns) -> None:
        self.runs = runs

    def stop(self) -> None:
        """The server is stopping (its lifespan ends)."""
        self.runs.stop()

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskIdParams, self.get),
            MethodBinding("tasks/cancel", TaskIdParams, self.cancel),
            MethodBinding("tasks/update", UpdateParams, self.update, MODERN),
            MethodBinding("tasks/result", TaskIdParams, self.result, LEGACY),
            MethodBinding("tasks/list", types.PaginatedRequestParams, self.list, LEGACY),
        ]

    async def intercept_tool_call(
        self, params: types.CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """2026-07-28: `run_team` from a client that declared the extension becomes a task."""
        runs = self.runs
        if ctx.protocol_version in LEGACY or params.name != TASK_TOOL or not _declares(ctx) or not runs.serves_tasks():
            return await call_next(ctx)  # never a task for a client that did not declare tasks
        try:
            run = await start_task(runs, params.arguments)
        except MCPError as exc:
            if exc.code != types.INVALID_PARAMS:
                raise
            # Arguments a plain call refuses: no task, and the plain call's tool error says what is wrong.
            return await call_next(ctx)
        return {"resultType": "task", **task_wire(run, modern=True)}

    async def get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        modern = _modern(ctx, params.task_id)
        run = await _owned(self.runs.get(params.task_id), params.task_id)
        return task_wire(run, modern=modern, detailed=True)

    async def cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        modern = _modern(ctx, params.task_id)
        runs = self.runs
        run = await _owned(runs.get(params.task_id), params.task_id)
        if run.finished:
            if modern:
                return {}  # 2026: idempotent
            raise MCPError(
                types.INVALID_PARAMS, f"Cannot cancel task: already in terminal status {task_status(run, False)!r}"
            )
        cancelled = await runs.cancel(run.run_id)  # the run has stopped when this returns
        return {} if modern else task_wire(cancelled or run, modern=False)

    async def update(self, ctx: ServerRequestContext[Any, Any], params: UpdateParams) -> dict[str, Any]:
        _modern(ctx, params.task_id)
        await _owned(self.runs.get(params.task_id), params.task_id)
        return {}  # a run never asks its client for input, so there is nothing to take

    async def result(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        """2025-11-25: block until the run ends, then answer what the plain call would have."""
        runs = self.runs
        run = await _owned(runs.get(params.task_id), params.task_id)
        if not run.finished:
            run = await _owned(runs.wait(run.run_id), params.task_id)
        if run.status == "interrupted":
            raise interrupted_error(run)
        return {**tool_result(run), "_meta": {RELATED: {"taskId": run.run_id}}}

    async def list(self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams) -> dict[str, Any]:
        offset = _offset(params.cursor)
        me = caller()  # an operator lists every run (owner None: all of them)
        found = await self.runs.list(None if me.operator else me.principal, offset, PAGE + 1)
        page: dict[str, Any] = {"tasks": [task_wire(r, modern=False) for r in found[:PAGE]]}
        if len(found) > PAGE:
            page["nextCursor"] = _cursor(offset + PAGE)
        return page


async def start_task(runs: TaskRuns, arguments: Any, on_end: OnEnd | None = None) -> TaskRun:
    validated = validate_arguments(arguments)
    try:
        return await runs.start(validated, principal(), on_end)
    except ToolError as exc:  # a limit or budget the caller must change, in the words of a plain call's error
        raise MCPError(types.INVALID_PARAMS, tool_error_text(TASK_TOOL, str(exc))) from None


def _declares(ctx: ServerRequestContext[Any, Any]) -> bool:
    caps = ctx.session.client_capabilities
    return bool(caps and caps.extensions and EXTENSION in caps.extensions)


def _modern(ctx: ServerRequestContext[Any, Any], task_id: str) -> bool:
    if ctx.protocol_version in LEGACY:
        return False
    require_client_extension(ctx, EXTENSION)  # -32021 for a client that did not declare tasks
    # SEP-2663 routing header: over HTTP, `Mcp-Name` names the task; one that disagrees with the body is refused
    # (the SDK checks it only for the spec's own methods). A client that sends none is let through.
    headers = getattr(ctx.request, "headers", None)
    name = headers.get(MCP_NAME_HEADER) if headers is not None else None
    if name is not None and decode_header_value(name) != task_id:
        raise MCPError(HEADER_MISMATCH, "the Mcp-Name header does not match the request body's 'taskId'")
    return True


async def _owned(pending: Any, task_id: str) -> TaskRun:
    """The run, if it exists and belongs to the caller; "not found" otherwise (never whose it is)."""
    run: TaskRun | None = await pending
    if run is None or not visible(run.owner):
        raise not_found(task_id)
    return run


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"tasks:{offset}".encode()).decode()


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    try:
        kind, _, number = base64.urlsafe_b64decode(cursor.encode()).decode().partition(":")
        if kind == "tasks" and number.isdigit():
            return int(number)
    except (ValueError, UnicodeDecodeError):
        pass
    raise MCPError(types.INVALID_PARAMS, "invalid tasks/list cursor: pass the nextCursor of the previous page as given")


# --- 2025-11-25 ------------------------------------------------------------------------------------
def _check_task_params(task: object) -> None:
    """`task` of a task-augmented call is an object (`{}` or `{"ttl": ms}`): "yes" or a negative ttl is the
    client's mistake to name, not a task to create."""
    ttl = task.get("ttl") if isinstance(task, Mapping) else None
    whole = (isinstance(ttl, int) and not isinstance(ttl, bool)) or (isinstance(ttl, float) and ttl.is_integer())
    if not isinstance(task, Mapping) or (ttl is not None and not (whole and ttl >= 0)):
        raise MCPError(
            types.INVALID_PARAMS,
            f'invalid params: `task` must be an object, {{}} or {{"ttl": milliseconds}} (a whole number, 0 or '
            f"more), got {json.dumps(task)[:100]}",
        )


def legacy_tasks(server: MCPServer[Any], extension: TasksExtension) -> ServerMiddleware[Any]:
    """Middleware for the 2025-11-25 side: task-augmented `tools/call`, the `tasks` capability at
    `initialize` and `execution.taskSupport` in `tools/list`. It answers by itself, outside the SDK's
    per-revision result check (which would refuse a `CreateTaskResult` for `tools/call`)."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        if ctx.method == "tools/call" and ctx.protocol_version in LEGACY and params.get("task") is not None:
            runs = extension.runs
            if runs.serves_tasks():  # else the spec's rule: a server that declares no tasks runs it as a plain call
                _check_task_params(params["task"])
                name = params.get("name")
                if name == TASK_TOOL:
                    run = await start_task(runs, params.get("arguments"), _status_notifier(ctx))
                    return {"task": task_wire(run, modern=False)}
                if any(tool.name == name for tool in await server.list_tools()):
                    raise MCPError(
                        types.METHOD_NOT_FOUND,
                        f"tool {name!r} does not run as a task (its execution.taskSupport is forbidden): "
                        f"call it without `task`; only {TASK_TOOL} does",
                    )
        result = await call_next(ctx)
        if not isinstance(result, dict) or not extension.runs.serves_tasks():
            return result
        if ctx.method == "initialize" and result.get("protocolVersion") in LEGACY:
            result["capabilities"] = {**result.get("capabilities", {}), "tasks": LEGACY_CAPABILITY}
        elif ctx.method == "tools/list" and ctx.protocol_version in LEGACY:
            for tool in result.get("tools", []):
                if tool.get("name") == TASK_TOOL:
                    tool["execution"] = {"taskSupport": "optional"}
        return result

    return middleware


def _status_notifier(ctx: ServerRequestContext[Any, Any]) -> OnEnd | None:
    """`notifications/tasks/status` to the session that created a task, when it ends (best effort: a
    client that went away misses it, and polls)."""
    connection = getattr(ctx.session, "_connection", None)  # lives as long as the client; not public in 2.3
    if connection is None:
        return None

    async def notify(run: TaskRun) -> None:
        await connection.notify("notifications/tasks/status", task_wire(run, modern=False))  # never raises

    return notify
