"""Client side of MCP Tasks for the tests, on both revisions: a client extension that declares tasks
(2026-07-28) and hears status notifications (2025-11-25), and `TaskClient`, the task operations of
either revision through one `mcp.Client`."""

from __future__ import annotations

import json
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, NotificationBinding, ResultClaim
from pydantic import Field, TypeAdapter

EXTENSION = "io.modelcontextprotocol/tasks"
RELATED = "io.modelcontextprotocol/related-task"
ANY = TypeAdapter(dict[str, Any])
TERMINAL = ("completed", "failed", "cancelled")


# Seconds between polls of a task (the server suggests a second): 20 ms against a server in another process
# cost it and this one a second of CPU or more per run of a few seconds, in a CPU-bound suite.
POLL = 0.1


class TaskHandle(types.Result):
    """What a 2026-07-28 `tools/call` answers when it made a task."""

    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str
    created_at: str = Field(alias="createdAt")
    last_updated_at: str = Field(alias="lastUpdatedAt")
    ttl_ms: int | None = Field(alias="ttlMs")
    poll_interval_ms: int | None = Field(None, alias="pollIntervalMs")


async def _poll(handle: TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
    while True:
        task = await ctx.session.send_request(get_request(handle.task_id), ANY)
        if task["status"] in TERMINAL:
            return types.CallToolResult.model_validate(task["result"])
        await anyio.sleep(POLL)


class Tasks(ClientExtension):
    """A client that declares tasks (2026-07-28) and hears task status notifications (2025-11-25)."""

    identifier = EXTENSION

    def __init__(self) -> None:
        self.statuses: list[types.TaskStatusNotificationParams] = []
        self.heard = anyio.Event()

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=_poll)]

    def notifications(self) -> list[NotificationBinding[Any]]:
        return [NotificationBinding(method="notifications/tasks/status", params_type=types.TaskStatusNotificationParams,
                                    handler=self._heard)]  # fmt: skip

    async def _heard(self, params: types.TaskStatusNotificationParams) -> None:
        self.statuses.append(params)
        self.heard.set()


def get_request(task_id: str) -> types.GetTaskRequest:
    return types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))


class TaskClient:
    """The task operations of either revision, through one client."""

    def __init__(self, client: Client, mode: str) -> None:
        self.client, self.legacy = client, mode == "legacy"

    async def create(self, arguments: dict[str, Any], name: str = "run_team") -> dict[str, Any]:
        if self.legacy:
            # The SDK's send_request checks a 2025 tools/call result against CallToolResult, which a
            # CreateTaskResult is not: the raw request is the way (as the SDK's docs say).
            params = {"name": name, "arguments": arguments, "task": {"ttl": 60_000}}
            created = await self.client.session._dispatcher.send_raw_request("tools/call", params, {})
            return types.CreateTaskResult.model_validate(created).task.model_dump(by_alias=True)
        handle = await self.client.session.call_tool(name, arguments, allow_claimed=True)
        assert isinstance(handle, TaskHandle), handle
        return handle.model_dump(by_alias=True, exclude={"meta"})

    async def get(self, task_id: str) -> dict[str, Any]:
        return await self.client.session.send_request(get_request(task_id), ANY)

    async def cancel(self, task_id: str) -> dict[str, Any]:
        request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
        return await self.client.session.send_request(request, ANY)

    async def result(self, task_id: str) -> dict[str, Any]:
        request = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
        return await self.client.session.send_request(request, ANY)

    async def list(self, cursor: str | None = None) -> dict[str, Any]:
        request = types.ListTasksRequest(params=types.PaginatedRequestParams(cursor=cursor))
        return await self.client.session.send_request(request, ANY)

    async def final(self, task_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The task once it has ended, and the tool result it ended with (tasks/result on 2025-11-25, the
        result inlined by tasks/get on 2026-07-28)."""
        if self.legacy:
            result = await self.result(task_id)  # blocks until the run ends
            return await self.get(task_id), result
        while (task := await self.get(task_id))["status"] not in TERMINAL:  # noqa: ASYNC110 (polling is the API)
            await anyio.sleep(POLL)
        return task, task.get("result", {})

    async def record(self, run_id: str) -> dict[str, Any]:
        contents = (await self.client.read_resource(f"team://runs/{run_id}")).contents[0]
        assert isinstance(contents, types.TextResourceContents)
        loaded: dict[str, Any] = json.loads(contents.text)
        return loaded
