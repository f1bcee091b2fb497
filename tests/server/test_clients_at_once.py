"""One server object served to several in-memory clients at once (as a script may do through the library API):
every client gets the same set-up (the run service, the team's tools) for as long as any client is connected,
and they leave cleanly in either order. Each `Client(server)` enters the server's lifespan again; the second
entry used to replace the first's run service, so the first's exit waited forever and the first's runs were
gone once the second left."""

from __future__ import annotations

from typing import Any, Literal

import anyio
import pytest
from anyio.abc import TaskStatus
from mcp import Client

from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server
from support import HANG_GUARD

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

REQUEST = "Write a haiku"


class Connected:
    """A client connected in a task of its own until told to leave (so either can leave first)."""

    def __init__(self, server: Any, mode: Literal["auto", "legacy"]) -> None:
        self.server, self.mode = server, mode
        self.leave, self.left = anyio.Event(), anyio.Event()
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        assert self._client is not None and not self.leave.is_set()
        return self._client

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with Client(self.server, mode=self.mode) as client:
            self._client = client
            task_status.started()
            await self.leave.wait()
        self.left.set()


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def run_one(client: Client) -> str:
    """The id of a finished run; once it returns, the server's run service is open and waits to be stopped."""
    ran = await call(client, "run_team", request=REQUEST)
    assert ran["status"] == "complete", ran
    return str(ran["run_id"])


ORDERS = pytest.mark.parametrize("first_leaves", [False, True], ids=["last-in-leaves-first", "first-in-leaves-first"])


async def connect_two(tg: anyio.abc.TaskGroup, server: Any) -> tuple[Connected, Connected, str]:
    """Two clients (2026-07-28 and 2025-11-25) connected at once, the second once the first's run service is fully
    open (the interleaving that hung), and the id of a run the first ran."""
    first, second = Connected(server, "auto"), Connected(server, "legacy")
    await tg.start(first.serve)
    run_id = await run_one(first.client)
    await tg.start(second.serve)
    return first, second, run_id


@ORDERS
async def test_two_clients_at_once_leave_in_either_order_and_a_third_gets_a_fresh_server(first_leaves: bool) -> None:
    server = build_server(ModelSettings(model="offline"))
    with anyio.fail_after(HANG_GUARD):  # a guard: the lifespan that hung waited forever
        async with anyio.create_task_group() as tg:
            first, second, _ = await connect_two(tg, server)
            assert (await second.client.list_tools()).tools
            leaving, staying = (first, second) if first_leaves else (second, first)
            leaving.leave.set()
            await anyio.wait_all_tasks_blocked()  # it has left, or waits to tear down after the other
            staying.leave.set()
        assert first.left.is_set() and second.left.is_set()

        async with Client(server) as third:  # a client after them: the server set up again, as for the first
            await run_one(third)


@ORDERS
async def test_a_run_started_by_one_client_is_read_after_the_other_client_left(first_leaves: bool) -> None:
    server = build_server(ModelSettings(model="offline"))
    with anyio.fail_after(HANG_GUARD):
        async with anyio.create_task_group() as tg:
            first, second, run_id = await connect_two(tg, server)
            assert (await call(second.client, "get_run", run_id=run_id))["status"] == "complete"
            tools = {tool.name for tool in (await second.client.list_tools()).tools}
            leaving, staying = (first, second) if first_leaves else (second, first)
            leaving.leave.set()
            await anyio.wait_all_tasks_blocked()
            # the run service and the team's tools are still the staying client's, whoever set them up
            assert (await call(staying.client, "get_run", run_id=run_id))["status"] == "complete"
            record = await staying.client.read_resource(f"team://runs/{run_id}")
            assert run_id in str(record.contents[0]), record
            assert {tool.name for tool in (await staying.client.list_tools()).tools} == tools
            assert await run_one(staying.client) != run_id  # and it starts new runs
            staying.leave.set()
