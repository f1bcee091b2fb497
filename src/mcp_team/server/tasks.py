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
created it; another principal gets "task not found" and `tasks/list` lists only the caller's. Without
auth (stdio, a loopback HTTP server) there is one user: any client that knows a task id can read it,
as `team://runs` already lists every run; ids are 128-bit random.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import mcp_types as types
from mcp import MCPError
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import Extension, MethodBinding, require_client_extension
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata
from pydantic import Field, ValidationError

from mcp_team.handoffs import RunResult
from mcp_team.handoffs.schema import validation_problems
from mcp_team.telemetry.content import redact_value

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

EXTENSION = "io.modelcontextprotocol/tasks"
LEGACY = frozenset({"2025-11-25"})  # the only handshake revision that has tasks
MODERN = frozenset({"2026-07-28"})
TASK_TOOL = "run_team"
POLL_MS = 1000  # a run takes seconds to minutes
PAGE = 50  # tasks per tasks/list page
RELATED = "io.modelcontextprotocol/related-task"
KEEP = frozenset({"content", "structuredContent", "isError"})
LEGACY_CAPABILITY: dict[str, Any] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


OnEnd = Callable[["TaskRun"], Awaitable[None]]


@dataclass(frozen=True)
class TaskRun:
    """A run as the task layer sees it. `status` is the run's: running, complete, partial, failed,
    cancelled or interrupted (it could not go on, e.g. its process stopped)."""

    run_id: str
    status: str
    created_at: datetime
    updated_at: datetime
    owner: str | None = None
    reason: str | None = None
    result: RunResult | None = None

    @property
    def finished(self) -> bool:
        return self.status != "running"


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
        """Runs of `owner` (None: runs without an owner), newest first."""
        ...


def principal() -> str | None:
    """Who is calling, when the server checks tokens (the authorization context tasks are bound to)."""
    token = get_access_token()
    if token is None:
        return None
    subject = getattr(token, "subject", None)
    return f"{token.client_id}:{subject}" if subject else token.client_id


# --- the wire --------------------------------------------------------------------------------------
def task_status(run: TaskRun, modern: bool) -> str:
    if run.status == "running":
        return "working"
    if run.status in ("complete", "partial"):
        return "completed"
    if run.status == "cancelled":
        return "cancelled"
    if run.status == "failed":  # the tool's error: 2026 reports it as a completed task with an isError result
        return "completed" if modern else "failed"
    return "failed"  # interrupted: the run could not go on, a protocol-level failure


def status_message(run: TaskRun) -> str:
    handoffs = run.result.handoffs if run.result else []
    done = sum(1 for h in handoffs if h.status != "running")
    if run.status == "running":
        return f"running: {done} handoff(s) finished, {len(handoffs) - done} in progress"
    if run.reason:
        return f"{run.status}: {run.reason}"
    return f"{run.status} after {len(handoffs)} handoff(s)"


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def task_wire(run: TaskRun, *, modern: bool, detailed: bool = False) -> dict[str, Any]:
    """The task as each revision spells it; `detailed` (2026 tasks/get) inlines the result or error."""
    wire: dict[str, Any] = {
        "taskId": run.run_id,
        "status": task_status(run, modern),
        "statusMessage": status_message(run),
        "createdAt": _iso(run.created_at),
        "lastUpdatedAt": _iso(run.updated_at),
        ("ttlMs" if modern else "ttl"): None,  # runs are kept: no expiry
        ("pollIntervalMs" if modern else "pollInterval"): POLL_MS,
    }
    if modern and detailed:
        if wire["status"] == "completed":
            wire["result"] = tool_result(run)
        elif wire["status"] == "failed":
            wire["error"] = interrupted_error(run).error.model_dump(mode="json", exclude_none=True)
    return wire


_RUN_TEAM: FuncMetadata | None = None


def _run_team_metadata() -> FuncMetadata:
    """`run_team`'s argument validation and result conversion, as the SDK does them for a plain call."""
    global _RUN_TEAM
    if _RUN_TEAM is None:
        from mcp_team.server.tools import run_team

        _RUN_TEAM = func_metadata(run_team, skip_names=["ctx"])
    return _RUN_TEAM


def validate_arguments(arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """`run_team`'s arguments validated as a plain call validates them; -32602 naming what is wrong."""
    metadata = _run_team_metadata()
    given = dict(arguments or {})
    accepted = set(metadata.arg_model.model_json_schema(by_alias=True).get("properties", {}))
    if unknown := sorted(set(given) - accepted):
        raise MCPError(
            types.INVALID_PARAMS, f"unknown argument(s) for {TASK_TOOL}: {', '.join(unknown)}; it accepts: "
            f"{', '.join(sorted(accepted))}"
        )  # fmt: skip
    try:
        return metadata.validate_arguments(given)
    except ValidationError as exc:
        raise MCPError(
            types.INVALID_PARAMS, f"invalid arguments for {TASK_TOOL}: {'; '.join(validation_problems(exc))}"
        ) from None


def tool_result(run: TaskRun) -> dict[str, Any]:
    """What a plain `run_team` call would have returned for this finished run (redacted like it)."""
    result = run.result
    if run.status in ("complete", "partial") and result is not None:
        converted = _run_team_metadata().convert_result(result)
        wire = converted.model_dump(by_alias=True, mode="json", exclude_none=True)
    else:
        wire = types.CallToolResult(
            content=[types.TextContent(type="text", text=f"Error executing tool {TASK_TOOL}: {_failure(run)}")],
            is_error=True,
        ).model_dump(by_alias=True, mode="json", exclude_none=True)
    # The result as data, without the envelope of the response it came in (resultType, _meta).
    return {k: redact_value(v) if k in ("content", "structuredContent") else v for k, v in wire.items() if k in KEEP}


def _failure(run: TaskRun) -> str:
    where = f"run {run.run_id}, see team://runs/{run.run_id}"
    if run.status == "cancelled":
        return f"the run was cancelled ({where}): {run.reason or 'cancelled by request'}"
    result = run.result
    reasons = "; ".join(f"{f.specialist}: {f.kind}: {f.reason}" for f in (result.failures if result else []))
    return f"the team could not answer ({where}). {reasons or run.reason or (result.answer if result else '')}"


def interrupted_error(run: TaskRun) -> MCPError:
    return MCPError(
        types.INTERNAL_ERROR,
        f"the run could not go on: {run.reason or 'it stopped'}. Its finished handoffs are at "
        f"team://runs/{run.run_id}; start it again",
    )


def not_found(task_id: str) -> MCPError:
    return MCPError(
        types.INVALID_PARAMS,
        f"Failed to retrieve task: Task not found: no task {task_id[:200]!r} for this client (a task id is the "
        f"run id that tools/call answered with)",
    )


# --- the methods -----------------------------------------------------------------------------------
class TaskIdParams(types.RequestParams):
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
        modern = _modern(ctx)
        run = await _owned(self.runs.get(params.task_id), params.task_id)
        return task_wire(run, modern=modern, detailed=True)

    async def cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        modern = _modern(ctx)
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
        _modern(ctx)
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
        found = await self.runs.list(principal(), offset, PAGE + 1)
        page: dict[str, Any] = {"tasks": [task_wire(r, modern=False) for r in found[:PAGE]]}
        if len(found) > PAGE:
            page["nextCursor"] = _cursor(offset + PAGE)
        return page


async def start_task(runs: TaskRuns, arguments: Any, on_end: OnEnd | None = None) -> TaskRun:
    validated = validate_arguments(arguments)
    try:
        return await runs.start(validated, principal(), on_end)
    except ToolError as exc:  # a limit or budget the caller must change
        raise MCPError(types.INVALID_PARAMS, str(exc)) from None


def _declares(ctx: ServerRequestContext[Any, Any]) -> bool:
    caps = ctx.session.client_capabilities
    return bool(caps and caps.extensions and EXTENSION in caps.extensions)


def _modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    if ctx.protocol_version in LEGACY:
        return False
    require_client_extension(ctx, EXTENSION)  # -32021 for a client that did not declare tasks
    return True


async def _owned(pending: Any, task_id: str) -> TaskRun:
    """The run, if it exists and belongs to the caller; "not found" otherwise (never whose it is)."""
    run: TaskRun | None = await pending
    if run is None or run.owner != principal():
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
def legacy_tasks(server: MCPServer[Any], extension: TasksExtension) -> ServerMiddleware[Any]:
    """Middleware for the 2025-11-25 side: task-augmented `tools/call`, the `tasks` capability at
    `initialize` and `execution.taskSupport` in `tools/list`. It answers by itself, outside the SDK's
    per-revision result check (which would refuse a `CreateTaskResult` for `tools/call`)."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        if ctx.method == "tools/call" and ctx.protocol_version in LEGACY and params.get("task") is not None:
            runs = extension.runs
            if runs.serves_tasks():  # else the spec's rule: a server that declares no tasks runs it as a plain call
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
