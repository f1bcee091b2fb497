"""A 2025-11-25 session's GET stream that its client resumed (a GET with Last-Event-ID, after the first one dropped)
is ended cleanly on SIGTERM, as the first one is: the process exits 0 and the client reads the stream to its end,
not cut off mid-stream nor held open until it leaves."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from support import HANG_GUARD, clean_env, initialize, plain_http_async, serve_http_process
from support.http_shutdown import HEADERS, exited

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]
QUICK = "Say hello"  # the offline supervisor answers it at once


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Events:
    """The SSE events of one open stream, as (id, data) pairs, read one at a time."""

    def __init__(self, response: httpx2.Response) -> None:
        self.lines = response.aiter_lines()

    async def next(self) -> tuple[str | None, str]:
        event_id, data = None, ""
        async for line in self.lines:
            if line.startswith("id:"):
                event_id = line.removeprefix("id:").strip()
            elif line.startswith("data:"):
                data += line.removeprefix("data:").strip()
            elif not line and (event_id is not None or data):
                return event_id, data
        raise EOFError("the stream ended")

    async def until(self, word: str) -> tuple[str, bool]:
        """The id of the next event whose data has `word`, and whether a priming event (an id, no data) came first:
        the server sends one when it resumes the stream live, not when it only replays what was missed."""
        primed = False
        while True:
            event_id, data = await self.next()
            primed = primed or not data
            if word in data:
                assert event_id is not None, data
                return event_id, primed


@asynccontextmanager
async def get_stream(http: httpx2.AsyncClient, base: str, session: dict[str, str], **extra: str
                     ) -> AsyncIterator[Events]:  # fmt: skip
    headers = {**session, "Accept": "text/event-stream", **extra}
    async with http.stream("GET", f"{base}/mcp", headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        yield Events(response)


async def test_sigterm_ends_a_resumed_get_stream(tmp_path: Path) -> None:
    env = clean_env(MCP_TEAM_MODEL="offline")
    with serve_http_process("--ephemeral", env=env, stderr=tmp_path / "stderr") as (base, proc):
        async with plain_http_async(timeout=HANG_GUARD) as http:
            init = await http.post(f"{base}/mcp", json=initialize(), headers=HEADERS)
            session = {**HEADERS, "mcp-session-id": init.headers["mcp-session-id"]}
            session["mcp-protocol-version"] = "2025-11-25"
            ids = iter(range(2, 100))

            async def post(method: str, params: dict[str, Any] | None = None) -> None:
                message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
                if not method.startswith("notifications/"):
                    message["id"] = next(ids)
                answer = await http.post(f"{base}/mcp", json=message, headers=session)
                assert answer.status_code in (200, 202), answer.text
                await answer.aread()

            async def a_run_finishes() -> None:  # team://runs changes: told on the session's GET stream
                await post("tools/call", {"name": "run_team", "arguments": {"request": QUICK}})

            await post("notifications/initialized")
            await post("resources/subscribe", {"uri": "team://runs"})
            with anyio.fail_after(HANG_GUARD):
                async with get_stream(http, base, session) as first:
                    await a_run_finishes()
                    last, _ = await first.until("notifications/resources/updated")
                # The first stream is gone (the client dropped it). Resumed from its last event, a live stream takes
                # its place once the server has let the first go; until then a resumption only replays, and ends.
                while True:
                    async with get_stream(http, base, session, **{"last-event-id": last}) as resumed:
                        await a_run_finishes()
                        try:
                            last, live = await resumed.until("notifications/resources/updated")
                        except EOFError:  # a replay, ended before the run did
                            live = False
                        if not live:
                            await anyio.sleep(0.1)
                            continue
                        proc.send_signal(signal.SIGTERM)
                        # Read to its end: a body cut off (the connection closed mid-stream) raises RemoteProtocolError.
                        with pytest.raises(EOFError):
                            while True:
                                await resumed.next()
                        break
            assert await exited(proc) == 0
    assert "Traceback" not in (tmp_path / "stderr").read_text()
