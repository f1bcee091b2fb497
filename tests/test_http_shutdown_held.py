"""A call a client holds when `mcp-team serve --http` gets SIGTERM, alike for 2025-11-25 clients (answers as SSE on
the POST) and 2026-07-28 ones: a durable run's call is answered with the run's id (the run goes on at the next
start), any other call gets up to `--shutdown-timeout` to end (sse-starlette ended 2025 POST streams about
0.5 s after the signal, racing the answer), and a second SIGTERM ends the wait at once."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from support import HANG_GUARD, clean_env, serve_http_process, stored_runs
from test_http_shutdown import REQUEST, exited, until_running

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
REVISIONS = ["legacy", "2026-07-28"]  # legacy: the 2025-11-25 handshake, its answers as SSE on the POST
QUICK = "Say hello"  # the offline supervisor answers it at once: one model call


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def text(result: CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, TextContent))


def wait_for(what: str, proc: subprocess.Popen[bytes], done: Callable[[], object]) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while not done():
        assert proc.poll() is None, f"the server exited while waiting for {what}"
        assert time.monotonic() < deadline, f"hang guard: still waiting for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("revision", REVISIONS)
async def test_a_held_durable_call_is_answered_with_its_run(tmp_path: Path, revision: str) -> None:
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="3000", MCP_TEAM_STATE_DIR=str(tmp_path))
    db = tmp_path / "runs.sqlite"
    with serve_http_process(env=env, stderr=tmp_path / "stderr") as (base, proc):
        async with (
            httpx2.AsyncClient(timeout=HANG_GUARD) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http), mode=revision) as client,
            anyio.create_task_group() as tg,
        ):
            answers: list[CallToolResult] = []

            async def call() -> None:  # a dropped stream raises here, and fails the test
                answers.append(await client.call_tool("run_team", {"request": REQUEST}))

            await client.list_tools()  # as call_tool does to check a result, while the server answers
            tg.start_soon(call)
            await anyio.to_thread.run_sync(wait_for, "the run to start", proc, lambda: stored_runs(db))
            await anyio.sleep(0.5)  # the model call is under way (it takes 3 s)
            proc.send_signal(signal.SIGTERM)
            assert await exited(proc) == 0
        [record] = stored_runs(db)
    [answer] = answers
    assert answer.is_error, answer
    assert f"run {record['run_id']} is kept and goes on when it starts again" in text(answer), text(answer)
    assert record["status"] == "running", record  # for the next start to resume (test_serve_restart shows it does)


@pytest.mark.parametrize("revision", REVISIONS)
async def test_a_held_call_ends_in_the_shutdown_timeout(tmp_path: Path, revision: str) -> None:
    # An ephemeral run (as a run on the client's model) is not kept: it gets the timeout to end with its answer.
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="2500")
    with serve_http_process("--ephemeral", "--shutdown-timeout", "60", env=env, stderr=tmp_path / "stderr") as (
        base,
        proc,
    ):
        async with (
            httpx2.AsyncClient(timeout=HANG_GUARD) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http), mode=revision) as client,
            anyio.create_task_group() as tg,
        ):
            answers: list[CallToolResult] = []

            async def call() -> None:
                answers.append(await client.call_tool("run_team", {"request": QUICK}))

            await client.list_tools()  # as call_tool does to check a result, while the server answers
            tg.start_soon(call)
            await until_running(client)  # its model call takes 2.5 s
            proc.send_signal(signal.SIGTERM)
            assert await exited(proc) == 0
    [answer] = answers
    assert not answer.is_error, text(answer)
    assert "Traceback" not in (tmp_path / "stderr").read_text()


async def test_a_second_sigterm_ends_the_wait_at_once(tmp_path: Path) -> None:
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="600000")  # a call that would go on
    err = tmp_path / "stderr"
    # The timeout is longer than the hang guard: only the second signal can end the wait in time.
    with serve_http_process("--ephemeral", "--shutdown-timeout", "600", env=env, stderr=err) as (base, proc):
        async with (
            httpx2.AsyncClient(timeout=HANG_GUARD) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http), mode="legacy") as client,
            anyio.create_task_group() as tg,
        ):
            cut = anyio.Event()

            async def call() -> None:
                with pytest.raises(Exception):  # noqa: B017 (cut: whatever the client makes of it)
                    await client.call_tool("run_team", {"request": QUICK})
                cut.set()

            await client.list_tools()  # as call_tool does to check a result, while the server answers
            tg.start_soon(call)
            await until_running(client)
            proc.send_signal(signal.SIGTERM)
            await anyio.sleep(2)  # longer than sse-starlette's own 0.5 s drain: the call is still held
            assert proc.poll() is None and not cut.is_set(), "the held call was cut before the shutdown timeout"
            proc.send_signal(signal.SIGTERM)
            assert await exited(proc) == 0
            with anyio.fail_after(HANG_GUARD):
                await cut.wait()
    said = err.read_text()
    assert "stopping now" in said and "Traceback" not in said, said
