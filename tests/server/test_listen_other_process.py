"""A run that another process writes to the server's own SQLite state directory (`mcp-team run` next to
`mcp-team serve --http`) is followed by the server's subscribers of its record (`team://runs/{id}`) as a run of
its own is: a 2026-07-28 `subscriptions/listen` stream naming it hears each change until it finishes (the
server polls the run store for runs written elsewhere while a stream is open, on SQLite as with replicas on
PostgreSQL), and so does a 2025-11-25 `resources/subscribe`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from support import HANG_GUARD, MCP_TEAM, clean_env, plain_http_async, serve_http_process
from support.run_updates import Updates, listed, listening, status_of

# Slow model calls: the run goes on for seconds after it is first written, so it is followed while it runs (and
# ends while followed).
SLOW = ["--offline-latency-ms", "700", "--quiet"]
pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
async def test_a_run_mcp_team_run_writes_is_followed_by_the_server_s_subscribers(tmp_path: Path, mode: str) -> None:
    updates = Updates()
    env = clean_env(MCP_TEAM_MODEL="offline")
    with serve_http_process("--state-dir", str(tmp_path), env=env) as (base, _server):
        async with (
            plain_http_async(timeout=HANG_GUARD) as http,
            Client(
                streamable_http_client(f"{base}/mcp", http_client=http),
                mode=mode,
                message_handler=updates.handle if mode == "legacy" else None,
                cache=None,
            ) as client,
            await anyio.open_process(
                [MCP_TEAM, "run", "Research bees and write a report", "--state-dir", str(tmp_path), *SLOW],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=(tmp_path / "run.err").open("wb"),
            ) as cli,
        ):
            with anyio.fail_after(HANG_GUARD):
                while not (runs := await listed(client)):  # noqa: ASYNC110 - until `mcp-team run` wrote its run
                    await anyio.sleep(0.05)
            (run_id,) = runs
            uri = f"team://runs/{run_id}"
            if mode == "legacy":
                await client.subscribe_resource(uri)
                await until_complete(client, run_id, updates)
            else:
                async with listening(client, [uri], updates):
                    await until_complete(client, run_id, updates)
            assert await cli.wait() == 0, (tmp_path / "run.err").read_text()
    assert set(updates.uris) == {uri}, updates.uris


async def until_complete(client: Client, run_id: str, updates: Updates) -> None:
    """Wait for updates until, read after one of them, the run's record shows it complete: it is told of its
    last change too."""
    told = 0
    while await status_of(client, run_id) != "complete":
        told += 1
        await updates.at_least(told)
