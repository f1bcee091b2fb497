"""A prompt's arguments are held to the limits of the tools that take the same text (server/surface/prompts.py): the
`supervisor` prompt's request to run_team's (`MCP_TEAM_MAX_REQUEST_CHARS`), a specialist prompt's task and
context to its tool's (`MCP_TEAM_MAX_REQUEST_CHARS`, `MCP_TEAM_MAX_CONTEXT_CHARS`); over one, `prompts/get` is
-32602 naming the argument, its size, the limit and its setting. Through an in-process client, both revisions."""

from __future__ import annotations

import mcp_types as types
import pytest
from mcp import Client, MCPError

from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


@pytest.fixture(params=["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def refusal(client: Client, prompt: str, arguments: dict[str, str]) -> str:
    """The message of the -32602 `prompts/get` answers."""
    with pytest.raises(MCPError) as refused:
        await client.get_prompt(prompt, arguments)
    assert refused.value.error.code == types.INVALID_PARAMS, refused.value.error
    return refused.value.error.message


async def test_prompt_arguments_over_the_limits_are_refused_naming_them(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The settings the messages name are the ones that set the limits (read when the server is built).
    monkeypatch.setenv("MCP_TEAM_MAX_REQUEST_CHARS", "500")
    monkeypatch.setenv("MCP_TEAM_MAX_CONTEXT_CHARS", "1000")
    async with Client(build_server(ModelSettings(model="offline")), mode=mode) as client:
        request = await refusal(client, "supervisor", {"request": "r" * 501})
        task = await refusal(client, "writer", {"task": "t" * 501})
        context = await refusal(client, "writer", {"task": "Write a haiku", "context": "c" * 1001})
        within = [
            await client.get_prompt("supervisor", {"request": "r" * 500}),
            await client.get_prompt("writer", {"task": "t" * 500, "context": "c" * 1000}),
        ]
    assert request == (
        "prompt supervisor: argument 'request' is 501 characters, over this server's limit of 500 "
        "(MCP_TEAM_MAX_REQUEST_CHARS): send a shorter request, e.g. a summary or the part that matters, or ask the "
        "server's operator to raise the limit"
    )
    assert task.startswith("prompt writer: argument 'task' is 501 characters, over this server's limit of 500 ")
    assert "(MCP_TEAM_MAX_REQUEST_CHARS): send a shorter task" in task
    assert context.startswith(
        "prompt writer: argument 'context' is 1,001 characters, over this server's limit of 1,000 "
    )
    assert "(MCP_TEAM_MAX_CONTEXT_CHARS): send a shorter context" in context
    assert all(len(result.messages) == 1 for result in within)
    texts = [m.content.text for result in within for m in result.messages if isinstance(m.content, types.TextContent)]
    assert "r" * 500 in texts[0] and "t" * 500 in texts[1] and "c" * 1000 in texts[1]
