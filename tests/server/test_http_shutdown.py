"""`mcp-team serve --http` stops on SIGTERM while clients hold streams open, as hosts expect (systemd, Docker and
Kubernetes send SIGTERM, then SIGKILL some seconds later): a 2026-07-28 `subscriptions/listen` stream and a
2025-11-25 session's GET stream end cleanly, the process exits 0 (it waited for ever for the listen stream's
client to leave), and a durable run in flight is kept to resume; a call still held after `--shutdown-timeout`
is cut and said in one line."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from support import (
    HANG_GUARD,
    MCP_TEAM,
    clean_env,
    cli_here,
    initialize,
    plain_http_async,
    serve_http_process,
    stored_runs,
)
from support.http_shutdown import HEADERS, REQUEST, exited, until_running

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def legacy_get_stream(http: httpx2.AsyncClient, base: str) -> AsyncIterator[httpx2.Response]:
    """A 2025-11-25 session's standalone GET stream (server-to-client messages), open."""
    init = await http.post(f"{base}/mcp", json=initialize(), headers=HEADERS)
    session = {**HEADERS, "mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    await http.post(f"{base}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    async with http.stream("GET", f"{base}/mcp", headers={**session, "Accept": "text/event-stream"}) as response:
        assert response.status_code == 200, await response.aread()
        yield response


async def test_sigterm_ends_open_streams_keeps_the_run_and_exits_0(tmp_path: Path) -> None:
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="2000", MCP_TEAM_STATE_DIR=str(tmp_path))
    with serve_http_process(env=env) as (base, proc):
        async with (
            plain_http_async(timeout=HANG_GUARD) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http), mode="auto") as client,
        ):
            started = await client.call_tool("start_run", {"request": REQUEST})  # a durable run, in flight
            run_id = started.structured_content["run_id"]
            async with (
                legacy_get_stream(http, base) as get_stream,
                client.listen(resource_subscriptions=["team://runs", f"team://runs/{run_id}"]) as listening,
            ):
                proc.send_signal(signal.SIGTERM)
                with anyio.fail_after(HANG_GUARD):
                    async for _ in listening:  # ends on a graceful close; a dropped stream raises SubscriptionLost
                        pass
                    # read to its end: a body cut off (the connection closed mid-stream) raises RemoteProtocolError
                    async for _ in get_stream.aiter_bytes():
                        pass
                assert await exited(proc) == 0
    records = stored_runs(tmp_path / "runs.sqlite")
    # Not cancelled by the stop: kept running, for the next start to resume (test_serve_restart shows it does).
    assert [(r["run_id"], r["status"]) for r in records] == [(run_id, "running")], records


async def test_a_call_still_held_at_the_shutdown_timeout_is_cut_in_one_line(tmp_path: Path) -> None:
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="60000")  # a run that would go on
    err = tmp_path / "stderr"
    with serve_http_process("--ephemeral", "--shutdown-timeout", "1", env=env, stderr=err) as (base, proc):
        async with (
            plain_http_async(timeout=HANG_GUARD) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http), mode="auto") as client,
            anyio.create_task_group() as tg,
        ):

            async def call() -> None:
                with pytest.raises(Exception):  # noqa: B017 (cut: whatever the client makes of it)
                    await client.call_tool("run_team", {"request": REQUEST})

            tg.start_soon(call)
            await until_running(client)  # its model call takes a minute
            proc.send_signal(signal.SIGTERM)
            assert await exited(proc) == 0
    said = err.read_text()
    assert "1 call(s) still in progress 1 s after the stop were cut" in said and "MCP_TEAM_SHUTDOWN_TIMEOUT" in said
    assert "Traceback" not in said, said


REFUSED = {
    "inf": "MCP_TEAM_SHUTDOWN_TIMEOUT: Input should be a valid integer",
    "0.5": "MCP_TEAM_SHUTDOWN_TIMEOUT: Input should be a valid integer",
    "-1": "MCP_TEAM_SHUTDOWN_TIMEOUT: Input should be greater than or equal to 0",
    "86400": "MCP_TEAM_SHUTDOWN_TIMEOUT: Input should be less than or equal to 3600",
}
SERVE = ["serve", "--http", "--ephemeral", "--port", "0"]


def test_a_shutdown_timeout_it_cannot_keep_is_refused_before_serving() -> None:
    # `inf` passed `ge=0` and failed only once serving, as an unexpected OverflowError; a fraction was rounded up.
    given = "inf"
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_SHUTDOWN_TIMEOUT=given)
    done = subprocess.run([MCP_TEAM, *SERVE], env=env, capture_output=True, text=True, timeout=HANG_GUARD)
    assert done.returncode == 2 and REFUSED[given] in done.stderr, done.stderr
    assert "serving" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(("given", "says"), [(g, s) for g, s in REFUSED.items() if g != "inf"])
def test_each_shutdown_timeout_it_cannot_keep_is_refused_saying_why(given: str, says: str) -> None:
    """The other values in this process (`support.cli_here`; the test above is the real process): what is
    checked is the message and the exit code, and a process each cost two seconds of start-up."""
    done = cli_here(*SERVE, MCP_TEAM_MODEL="offline", MCP_TEAM_SHUTDOWN_TIMEOUT=given)
    assert done.returncode == 2 and says in done.stderr, done.stderr
    assert "serving" not in done.stderr and "Traceback" not in done.stderr
