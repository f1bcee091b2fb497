"""A server started with a setting it can only find wrong once it is up says what to fix to the client, and
keeps serving what does not need it; no traceback reaches its log.

A server whose model cannot be built (a specialist's API key variable missing from the client's env, as a
Claude Desktop or IDE config easily leaves it) starts, stays up, and says what to fix on every call that needs
the model; it never ends itself with a traceback once the run service opens (the first durable call over
stdio, a second after start over HTTP). Driven as a user's client drives it: `mcp-team serve` over stdio and
`serve --http`, with the SDK's client, on both protocol revisions."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TextIO, cast

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

from support import HANG_GUARD, MCP_TEAM, clean_env, plain_http_async, serve_http_process

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]

REVISIONS = pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
MISSING = "MCP_TEAM_TEST_NO_SUCH_KEY"  # clean_env drops every MCP_TEAM_ variable: it is unset in the server
TEAM = f"""
[[specialists]]
name = "poet"
description = "Writes short poems."
prompt = "Write a short poem."
model = "openai:gpt-4o-mini"
api_key_env = "{MISSING}"
"""


def _env() -> dict[str, str]:
    # A key for the supervisor (never used: nothing reaches a model), none for the poet's own variable.
    return clean_env(ANTHROPIC_API_KEY="sk-ant-not-a-real-key")


def _team(tmp_path: Path) -> str:
    path = tmp_path / "team.toml"
    path.write_text(TEAM)
    return str(path)


async def _uses_the_server(client: Client) -> None:
    """What a user's client does first: list the runs, try a run and a background run, then go on using it."""
    with anyio.fail_after(HANG_GUARD):
        runs = await client.read_resource("team://runs")  # opens the run service, which asks for the model
        assert '"runs"' in runs.contents[0].text  # type: ignore[union-attr]
        for tool, args in (("run_team", {"request": "a poem"}), ("start_run", {"request": "a poem"})):
            result = await client.call_tool(tool, args)
            text = result.content[0].text  # type: ignore[union-attr]
            assert result.is_error and f"its API key variable {MISSING} is not set" in text, text
        assert {t.name for t in (await client.list_tools()).tools} >= {"run_team", "poet"}
        again = await client.call_tool("run_team", {"request": "another poem"})
        assert again.is_error and MISSING in again.content[0].text  # type: ignore[union-attr]


@asynccontextmanager
async def _stdio(mode: str, team: str) -> AsyncIterator[tuple[Client, Path]]:
    with tempfile.NamedTemporaryFile("w+", suffix=".log") as errlog:
        params = StdioServerParameters(command=MCP_TEAM, args=["serve", "--team", team], env=_env())
        async with Client(stdio_client(params, errlog=cast(TextIO, errlog)), mode=mode) as client:
            yield client, Path(errlog.name)


@REVISIONS
async def test_stdio_server_with_an_unbuildable_model_stays_up_and_says_why(mode: str, tmp_path: Path) -> None:
    async with _stdio(mode, _team(tmp_path)) as (client, errlog):
        await _uses_the_server(client)
        log = errlog.read_text()
    assert "Traceback" not in log and "please report" not in log, log


@REVISIONS
async def test_http_server_with_an_unbuildable_model_stays_up_and_says_why(mode: str, tmp_path: Path) -> None:
    err = tmp_path / "serve.err"
    with serve_http_process("--team", _team(tmp_path), env=_env(), stderr=err) as (base, proc):
        async with Client(f"{base}/mcp", mode=mode) as client:
            await _uses_the_server(client)
        async with plain_http_async(timeout=HANG_GUARD) as http:
            assert (await http.get(f"{base}/healthz")).status_code == 200
        assert proc.poll() is None, err.read_text()
    log = err.read_text()
    assert "Traceback" not in log and "please report" not in log, log


@REVISIONS
async def test_run_resources_say_why_durable_runs_are_unavailable(mode: str, tmp_path: Path) -> None:
    """A state directory that cannot be made (here under a file): the run resources name it and the flag to
    change, as the run tools do; they answered "Error reading resource team://runs" and logged a traceback."""
    (tmp_path / "a-file").write_text("")
    state = tmp_path / "a-file" / "state"
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_STATE_DIR=str(state))
    with tempfile.NamedTemporaryFile("w+", suffix=".log") as errlog:
        params = StdioServerParameters(command=MCP_TEAM, args=["serve"], env=env)
        async with Client(stdio_client(params, errlog=cast(TextIO, errlog)), mode=mode) as client:
            with anyio.fail_after(HANG_GUARD):
                for uri in ("team://runs", "team://runs/0123456789abcdef"):
                    with pytest.raises(MCPError) as refused:
                        await client.read_resource(uri)
                    said = str(refused.value)
                    assert f"the state directory {state} cannot be created" in said and "--state-dir" in said, said
                specialists = await client.read_resource("team://specialists")  # what needs no run store still works
                assert "researcher" in specialists.contents[0].text  # type: ignore[union-attr]
        log = await anyio.Path(errlog.name).read_text()
    assert "Traceback" not in log, log
