"""`mcp-team serve --watch` over stdio, as an IDE runs it while its user edits team.toml: an edit of the team's
models (here a specialist's own model and key variable) is what the next call runs on, as README's "a good one
reloads the team" says; the models built for the first call were kept until a restart."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TextIO, cast

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from support import HANG_GUARD, MCP_TEAM, clean_env, free_port

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]

POET = """
[[specialists]]
name = "poet"
description = "Writes short poems."
prompt = "Write a short poem."
"""
MISSING = "MCP_TEAM_TEST_NO_SUCH_KEY"  # clean_env drops every MCP_TEAM_ variable: it is unset in the server
OWN_MODEL = f'model = "openai:gpt-4o-mini"\napi_key_env = "{MISSING}"\n'


async def test_an_edit_of_a_members_model_applies_to_the_next_call(tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    team.write_text(POET)
    # The team's model is Anthropic's at an address where nothing listens: a call fails at once, saying so,
    # without the network. (2025-11-25: the reload is told by notifications/tools/list_changed.)
    env = clean_env(ANTHROPIC_API_KEY="sk-ant-not-a-real-key", ANTHROPIC_BASE_URL=f"http://127.0.0.1:{free_port()}",
                    MCP_TEAM_MAX_RETRIES="0")  # fmt: skip
    reloaded = anyio.Event()

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            reloaded.set()

    params = StdioServerParameters(command=MCP_TEAM, args=["serve", "--watch", "--team", str(team)], env=env)
    with tempfile.NamedTemporaryFile("w+", suffix=".log") as errlog:
        client = Client(stdio_client(params, errlog=cast(TextIO, errlog)), mode="legacy", message_handler=on_message)
        async with client:
            with anyio.fail_after(HANG_GUARD):
                first = await client.call_tool("poet", {"task": "a poem"})
                assert first.is_error and "Anthropic" in first.content[0].text  # type: ignore[union-attr]

                team.write_text(POET + OWN_MODEL)  # the poet now runs on a model of its own, with its own key
                await reloaded.wait()
                second = await client.call_tool("poet", {"task": "a poem"})
            text = second.content[0].text  # type: ignore[union-attr]
            assert second.is_error and f"its API key variable {MISSING} is not set" in text, text
        logged = await anyio.Path(errlog.name).read_text()
        (line,) = [line for line in logged.splitlines() if "reloaded the team" in line]
        assert line.startswith("mcp-team: INFO reloaded the team from "), line  # news, not a WARNING
