"""A call a client holds when `mcp-team serve --http` gets SIGTERM, alike for 2025-11-25 clients (answers as SSE on
the POST) and 2026-07-28 ones: a durable run's call is answered with the run's id (the run goes on at the next
start), any other call gets up to `--shutdown-timeout` to end (sse-starlette ended 2025 POST streams about
0.5 s after the signal, racing the answer), and a second SIGTERM ends the wait at once."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
from anyio.abc import TaskGroup
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from support import HANG_GUARD, clean_env, plain_http_async, serve_http_process, stored_runs
from support.http_shutdown import REQUEST, exited, until_running

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]
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


@asynccontextmanager
async def both_revisions(http: httpx2.AsyncClient, base: str) -> AsyncIterator[dict[str, Client]]:
    """A client of each revision on one server, by revision. The held-call tests hold a call of each at once on
    one server (what they check is each call's answer, alike for either revision): one server start, not two."""
    async with (
        Client(streamable_http_client(f"{base}/mcp", http_client=http), mode=REVISIONS[0]) as legacy,
        Client(streamable_http_client(f"{base}/mcp", http_client=http), mode=REVISIONS[1]) as current,
    ):
        yield {REVISIONS[0]: legacy, REVISIONS[1]: current}


async def hold_calls(clients: dict[str, Client], tg: TaskGroup, request: str) -> dict[str, CallToolResult]:
    """A `run_team` call of `request` held by each client (a dropped stream raises in it, and fails the test);
    the answers, filled in by revision as they come."""
    answers: dict[str, CallToolResult] = {}
    for revision, client in clients.items():
        await client.list_tools()  # as call_tool does to check a result, while the server answers

        async def call(revision: str = revision, client: Client = client) -> None:
            answers[revision] = await client.call_tool("run_team", {"request": request})

        tg.start_soon(call)
    return answers


async def test_a_held_durable_call_is_answered_with_its_run(tmp_path: Path) -> None:
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="3000", MCP_TEAM_STATE_DIR=str(tmp_path))
    db = tmp_path / "runs.sqlite"
    with serve_http_process(env=env, stderr=tmp_path / "stderr") as (base, proc):
        async with (
            plain_http_async(timeout=HANG_GUARD) as http,
            both_revisions(http, base) as clients,
            anyio.create_task_group() as tg,
        ):
            answers = await hold_calls(clients, tg, REQUEST)
            both = lambda: len(stored_runs(db)) == len(REVISIONS)  # noqa: E731
            await anyio.to_thread.run_sync(wait_for, "both runs to start", proc, both)
            await anyio.sleep(0.5)  # the model calls are under way (each takes 3 s)
            proc.send_signal(signal.SIGTERM)
            assert await exited(proc) == 0
        records = stored_runs(db)
    assert sorted(answers) == sorted(REVISIONS), answers
    kept = set()
    for revision, answer in answers.items():
        assert answer.is_error, (revision, answer)
        said = text(answer)
        kept_words = "is kept and goes on when it starts again"
        run_id = next((r["run_id"] for r in records if f"run {r['run_id']} {kept_words}" in said), None)
        assert run_id is not None, (revision, said)
        kept.add(run_id)
    assert len(kept) == len(REVISIONS), answers  # each answered with its own run
    for record in records:  # for the next start to resume (test_serve_restart shows it does)
        assert record["status"] == "running", record


async def test_a_held_call_ends_in_the_shutdown_timeout(tmp_path: Path) -> None:
    # An ephemeral run (as a run on the client's model) is not kept: it gets the timeout to end with its answer.
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="2500")
    args = ("--ephemeral", "--shutdown-timeout", "60")
    with serve_http_process(*args, env=env, stderr=tmp_path / "stderr") as (base, proc):
        async with (
            plain_http_async(timeout=HANG_GUARD) as http,
            both_revisions(http, base) as clients,
            anyio.create_task_group() as tg,
        ):
            answers = await hold_calls(clients, tg, QUICK)
            await until_running(clients[REVISIONS[0]], len(REVISIONS))  # their model calls take 2.5 s
            proc.send_signal(signal.SIGTERM)
            assert await exited(proc) == 0
    assert sorted(answers) == sorted(REVISIONS), answers
    for revision, answer in answers.items():
        assert not answer.is_error, (revision, text(answer))
    assert "Traceback" not in (tmp_path / "stderr").read_text()


async def test_a_second_sigterm_ends_the_wait_at_once(tmp_path: Path) -> None:
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="600000")  # a call that would go on
    err = tmp_path / "stderr"
    # The timeout is longer than the hang guard: only the second signal can end the wait in time.
    with serve_http_process("--ephemeral", "--shutdown-timeout", "600", env=env, stderr=err) as (base, proc):
        async with (
            plain_http_async(timeout=HANG_GUARD) as http,
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
