"""The prompts refuse what the tools taking the same text refuse (README, "Limits and errors": a blank request or
task), over `mcp-team serve`'s stdio with the SDK's client, on both protocol revisions."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters

from support import HANG_GUARD, MCP_TEAM, clean_env

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]

BLANK = {
    "supervisor, empty request": ("supervisor", {"request": ""}, "argument 'request' is empty"),
    "supervisor, blank request": ("supervisor", {"request": " \n\t"}, "argument 'request' is empty"),
    "specialist, empty task": ("researcher", {"task": ""}, "argument 'task' is empty"),
    "specialist, blank task, a context": ("writer", {"task": "  ", "context": "notes"}, "argument 'task' is empty"),
}


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
async def test_prompts_refuse_a_blank_request_or_task(mode: str, subtests: pytest.Subtests) -> None:
    params = StdioServerParameters(command=MCP_TEAM, args=["serve"], env=clean_env(MCP_TEAM_MODEL="offline"))
    async with Client(params, mode=mode) as client:
        with anyio.fail_after(HANG_GUARD):
            for case, (prompt, arguments, said) in BLANK.items():
                with subtests.test(case):
                    with pytest.raises(MCPError) as refused:
                        await client.get_prompt(prompt, arguments)
                    assert refused.value.error.code == -32602 and f"prompt {prompt}: {said}" in str(refused.value)
            # A request with something in it still gets its messages.
            good = await client.get_prompt("researcher", {"task": "bees"})
            assert "bees" in good.messages[0].content.text  # type: ignore[union-attr]
