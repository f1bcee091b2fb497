"""`mcp-team serve` in a subprocess, started the way users start it: stdio and streamable HTTP."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from support import (
    HANG_GUARD,
    MCP_TEAM,
    clean_env,
    cli_here,
    free_port,
    initialize,
    plain_http,
    plain_http_async,
    serve_http,
    stdio_lines,
)

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]

TOKEN = "test-token-4f1c9a7e"


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
async def test_stdio_server_started_as_the_claude_desktop_config_starts_it(mode: str) -> None:
    # README: {"command": "/abs/path/.venv/bin/mcp-team", "args": ["serve"], "env": {"MCP_TEAM_MODEL": "offline"}}
    params = StdioServerParameters(command=MCP_TEAM, args=["serve"], env=clean_env(MCP_TEAM_MODEL="offline"))
    progress: list[float] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(p)

    async with Client(params, mode=mode) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool(
            "run_team", {"request": "Research bees and calculate 2+2"}, progress_callback=on_progress
        )

    assert {"run_team", "plan_team", "researcher"} <= tools
    assert result.structured_content["status"] == "complete"
    assert progress == [1, 2, 3, 4]


def test_stdio_stdout_carries_only_protocol_messages() -> None:
    proc = subprocess.run(
        [MCP_TEAM, "serve"],
        input=stdio_lines(initialize()),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        env=clean_env(MCP_TEAM_MODEL="offline"),
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines, proc.stderr
    for line in lines:
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert json.loads(lines[0])["result"]["serverInfo"]["name"] == "mcp-team"
    assert "offline backend" in proc.stderr  # notices go to stderr


@pytest.mark.parametrize("stdin", ["", "not json\n"], ids=["nothing", "garbage"])
def test_a_durable_stdio_server_exits_when_its_client_leaves_before_a_request(stdin: str) -> None:
    # A client that dies at launch closes stdin: the server must not outlive it (its durable runs were never
    # wanted, so they are not even opened).
    env = clean_env(MCP_TEAM_MODEL="offline")
    proc = subprocess.run([MCP_TEAM, "serve"], input=stdin, capture_output=True, text=True, timeout=HANG_GUARD, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not any(Path(env["XDG_STATE_HOME"]).rglob("*.sqlite")), "nothing wanted the runs database"


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    """`mcp-team serve --http` with a token, shared by the module's HTTP checks."""
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_HTTP_TOKEN=TOKEN, MCP_TEAM_OFFLINE_LATENCY_MS="200")
    with serve_http(env=env) as base:
        yield base


def test_http_health_auth_and_host_checks(http_server: str) -> None:
    with plain_http(timeout=HANG_GUARD) as http:
        health = http.get(f"{http_server}/healthz")
        assert health.json() == {"ok": True, "server": "mcp-team"}

        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        no_token = http.post(f"{http_server}/mcp", json=ping, headers=headers)
        wrong = http.post(f"{http_server}/mcp", json=ping, headers={**headers, "Authorization": "Bearer nope"})
        assert no_token.status_code == 401 and wrong.status_code == 401
        assert "resource_metadata" in no_token.headers.get("www-authenticate", "")
        bad_host = http.post(
            f"{http_server}/mcp",
            json=ping,
            headers={**headers, "Authorization": f"Bearer {TOKEN}", "Host": "evil.example:80"},
        )
        assert bad_host.status_code == 421


async def test_http_call_with_progress_and_cancellation(http_server: str) -> None:
    progress: list[str] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    http = plain_http_async(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    async with http, Client(streamable_http_client(f"{http_server}/mcp", http_client=http), mode="legacy") as client:
        result = await client.call_tool("run_team", {"request": "Research bees"}, progress_callback=on_progress)
        assert result.structured_content["status"] == "complete"
        assert progress[0].startswith("researcher:") and "researcher done" in progress

        researching = anyio.Event()

        async def on_start(p: float, total: float | None, message: str | None) -> None:
            if (message or "").startswith("researcher:"):
                researching.set()  # the researcher is inside its 200 ms model call

        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: client.call_tool("run_team", {"request": "Research wasps"}, progress_callback=on_start)
            )
            await researching.wait()
            tg.cancel_scope.cancel()
        # The cancellation crosses HTTP to the server; poll its record (kept live while the run goes) until it is over.
        while not (runs := await _runs(client)) or (runs[0]["request"], runs[0]["status"]) != (  # noqa: ASYNC110
            "Research wasps",
            "cancelled",
        ):
            await anyio.sleep(0.05)

    assert runs[0]["status"] == "cancelled"


async def _runs(client: Client) -> list[dict]:
    return json.loads((await client.read_resource("team://runs")).contents[0].text)["runs"]


def test_non_loopback_bind_without_token_is_refused() -> None:
    # What the command says (the port-in-use refusal below keeps a real process): through `main`, here.
    proc = cli_here(
        "serve", "--http", "--ephemeral", "--host", "0.0.0.0", "--port", str(free_port()), MCP_TEAM_MODEL="offline"
    )
    assert proc.returncode == 2
    assert "MCP_TEAM_HTTP_TOKEN" in proc.stderr and "MCP_TEAM_ALLOWED_HOSTS" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_port_in_use_is_a_clear_error_before_anything_says_it_serves() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [MCP_TEAM, "serve", "--http", "--ephemeral", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=HANG_GUARD,
            env=clean_env(MCP_TEAM_MODEL="offline"),
        )
    assert proc.returncode == 2, proc.stderr
    assert "serving" not in proc.stderr and "Errno" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("mcp-team: error: ")]
    assert errors == [
        f"mcp-team: error: cannot serve on 127.0.0.1:{port}: the port is in use (address already in use), likely "
        "by another server; choose another with --port (or MCP_TEAM_PORT)"
    ], proc.stderr
