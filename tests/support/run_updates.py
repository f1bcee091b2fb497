"""Following runs as a client does: the updates it is told of team://runs and a run's record, on both revisions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from support import HANG_GUARD, plain_http_async

LISTING = "team://runs"


class Updates:
    """The `notifications/resources/updated` a client got, by URI, and waiting for more."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.phase = ""  # what the test was doing: each update is kept with the phase it arrived in
        self.phases: list[str] = []
        self._more = anyio.Event()

    def add(self, uri: str) -> None:
        self.uris.append(uri)
        self.phases.append(self.phase)
        self._more.set()

    async def handle(self, message: object) -> None:
        """A client's `message_handler` (2025-11-25: the notifications come on the session)."""
        if isinstance(message, types.ResourceUpdatedNotification):
            self.add(str(message.params.uri))

    async def at_least(self, count: int) -> None:
        with anyio.fail_after(HANG_GUARD):
            while len(self.uris) < count:
                self._more = anyio.Event()
                await self._more.wait()


@asynccontextmanager
async def listening(client: Client, uris: Sequence[str], updates: Updates) -> AsyncIterator[None]:
    """A 2026-07-28 listen stream of `client` whose filter names `uris`, its events in `updates`."""
    async with client.listen(resource_subscriptions=list(uris)) as stream, anyio.create_task_group() as tg:

        async def pump() -> None:
            async for event in stream:
                updates.add(getattr(event, "uri", ""))

        tg.start_soon(pump)
        yield
        tg.cancel_scope.cancel()


async def honored(client: Client, *uris: str) -> list[str]:
    """The URIs a listen naming `uris` is acknowledged for."""
    async with client.listen(resource_subscriptions=list(uris)) as stream:
        return list(stream.honored.resource_subscriptions or [])


class HeldApproval:
    """An elicitation callback that approves the plan checkpoint once the test lets it: until then the run waits."""

    def __init__(self) -> None:
        self.release = anyio.Event()

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        await self.release.wait()
        return types.ElicitResult(action="accept", content={"decision": "approve"})


@asynccontextmanager
async def connected(
    url: str, token: str, mode: str, updates: Updates, person: HeldApproval | None = None
) -> AsyncIterator[Client]:
    """A client session over streamable HTTP with `token`; 2025-11-25 updates go to `updates`; `person` answers
    the run's checkpoints."""
    handler = updates.handle if mode == "legacy" else None  # 2026-07-28: a listen stream takes them (`listening`)
    async with (
        plain_http_async(headers={"Authorization": f"Bearer {token}"}, timeout=HANG_GUARD) as http,
        Client(
            streamable_http_client(url, http_client=http),
            mode=mode,
            message_handler=handler,
            elicitation_callback=person,
        ) as client,
    ):
        yield client


async def listed(client: Client) -> dict[str, str]:
    """run id: status, as team://runs shows them now."""
    contents = (await client.read_resource(LISTING)).contents[0]
    assert isinstance(contents, types.TextResourceContents)
    return {r["run_id"]: r["status"] for r in json.loads(contents.text)["runs"]}


async def until_listed(client: Client, updates: Updates, run_id: str, statuses: set[str], told: int = 0) -> None:
    """Wait for updates (after the first `told`) until, read after one of them, the listing shows `run_id` in one
    of `statuses`."""
    while True:
        told += 1
        await updates.at_least(told)
        if (await listed(client)).get(run_id) in statuses:
            return


async def status_of(client: Client, run_id: str) -> str:
    contents = (await client.read_resource(f"team://runs/{run_id}")).contents[0]
    assert isinstance(contents, types.TextResourceContents)
    return str(json.loads(contents.text)["status"])
