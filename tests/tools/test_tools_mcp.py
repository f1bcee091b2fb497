"""Tools from external MCP servers: config validation, the pool's lifetime, wrapped calls, and every failure mode.

The external server is `tests/fixtures/echo_mcp_server.py`, started with `sys.executable` over stdio (and once
over streamable HTTP on 127.0.0.1).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import ValidationError

from mcp_team.llm import ModelSet, ToolResultBlock
from mcp_team.llm.scripted import ScriptedModel, text, tool_calls
from mcp_team.specialists import Specialist, Tool, ToolFailed, run_specialist
from mcp_team.specialists.mcp_config import McpServerConfig, local_name
from mcp_team.specialists.mcp_tools import McpToolPool
from support import HANG_GUARD, free_port

FIXTURE = str(Path(__file__).parents[1] / "fixtures" / "echo_mcp_server.py")

pytestmark = [pytest.mark.anyio, pytest.mark.process]


def echo_server(name: str = "echo", **fields: Any) -> McpServerConfig:
    return McpServerConfig(name=name, command=sys.executable, args=[FIXTURE], **fields)


def by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


async def failure(tool: Tool, **args: Any) -> str:
    with pytest.raises(ToolFailed) as info:
        await tool.run(args)
    return str(info.value)


# --- configuration ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "MCP server 'x': give `command` (a stdio server) or `url` (a streamable HTTP server)"),
        ({"command": "srv", "url": "http://h/mcp"}, "give either `command` (a stdio server) or `url`"),
        ({"command": "srv", "headers": {"A": "b"}}, "`headers` apply only to a `url` server"),
        ({"url": "http://h/mcp", "args": ["-v"]}, "`args` and `env` apply only to a `command` server"),
        ({"url": "file:///tmp/sock"}, "`url` must be an http:// or https:// URL"),
        ({"command": "  "}, "`command` is empty"),
        ({"command": "srv", "transport": "sse"}, "Extra inputs are not permitted"),
    ],
)
def test_config_needs_exactly_one_transport(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        McpServerConfig(name="x", **fields)


def test_config_and_pool_reject_bad_names() -> None:
    with pytest.raises(ValidationError, match="name"):
        McpServerConfig(name="bad name", command="srv")
    with pytest.raises(ValueError, match="MCP server names must be unique; repeated: a"):
        McpToolPool([McpServerConfig(name="a", command="x"), McpServerConfig(name="a", url="http://h/mcp")])


def test_local_names() -> None:
    plain = McpServerConfig(name="s", command="srv")
    prefixed = McpServerConfig(name="s", command="srv", tool_prefix="gh_")

    assert local_name(plain, "search") == "search"
    assert local_name(prefixed, "search") == "gh_search"
    assert local_name(plain, "files.read/v2") == "files_read_v2"
    assert local_name(plain, "x" * 100) == "x" * 64


# --- a running server -------------------------------------------------------------------------------------------


async def test_wrapped_tools_call_the_server() -> None:
    async with McpToolPool([echo_server(allowed_tools=["echo", "add", "fail"])]) as pool:
        assert pool.status() == {"echo": "running"}
        tools = by_name(pool.tools("echo"))

        assert list(tools) == ["echo", "add", "fail"]  # die and header are not allowed
        assert tools["add"].description == "Add two integers."
        assert tools["add"].input_schema["required"] == ["a", "b"]
        assert await tools["echo"].run({"text": "hello"}) == "hello"
        assert await tools["add"].run({"a": 2, "b": 40}) == "42"
        assert await failure(tools["fail"]) == "MCP server 'echo': Error executing tool fail: this tool always fails"
        assert "validation error" in (await failure(tools["add"], a="two", b=1)).lower()

        assert [t.name for t in pool.tools("echo", ["add"])] == ["add"]
        with pytest.raises(ValueError, match="MCP server 'echo' does not allow die; its allowed_tools are: echo"):
            pool.tools("echo", ["die"])
        with pytest.raises(ValueError, match="unknown MCP server 'other'; the configured servers are: echo"):
            pool.tools("other")


async def test_names_the_server_lacks_are_a_team_file_error() -> None:
    async with McpToolPool([echo_server(tool_prefix="e_")]) as pool:
        assert [t.name for t in pool.tools("echo")] == ["e_echo", "e_add", "e_env", "e_fail", "e_die", "e_header"]
        with pytest.raises(ValueError, match="MCP server 'echo' has no tool search; it offers: echo, add"):
            pool.tools("echo", ["search"])


async def test_a_crashed_server_fails_its_tools_and_the_pool_still_closes_fast() -> None:
    pool = McpToolPool([echo_server()])
    async with pool:
        tools = by_name(pool.tools("echo"))

        first = await failure(tools["die"])
        second = await failure(tools["echo"], text="still there?")

        assert first.startswith("MCP server 'echo' is not available: the connection was lost")
        assert second == first
        assert pool.status()["echo"].startswith("the connection was lost; its process has probably exited")
    # Closing did not wait on the dead server (a hang would end at pytest's timeout).
    assert (await failure(tools["add"], a=1, b=2)).startswith("MCP server 'echo' is not available")


async def test_servers_that_fail_to_start_do_not_fail_the_pool() -> None:
    configs = [
        echo_server(allowed_tools=["add"]),
        McpServerConfig(name="missing", command="/nonexistent/mcp-server", allowed_tools=["search", "fetch"]),
        McpServerConfig(
            name="crashes", command=sys.executable, args=["-c", "import sys; sys.exit('no API key configured')"]
        ),
        McpServerConfig(name="silent", command=sys.executable, args=["-c", "import time; time.sleep(30)"]),
        McpServerConfig(name="nothing", url=f"http://127.0.0.1:{free_port()}/mcp"),
    ]
    # The echo server (a fresh Python importing the MCP SDK) must start within the pool's start timeout, which
    # the silent server always runs out: 10 s leaves a loaded machine room, at the cost of that wait.
    async with McpToolPool(configs, start_timeout=10) as pool:
        status = pool.status()
        assert status["echo"] == "running"
        assert status["missing"] == "command not found: /nonexistent/mcp-server"
        assert status["crashes"].startswith("the server exited before it finished starting (")
        assert status["crashes"].endswith("its stderr ends: no API key configured")
        assert status["silent"] == "did not start within 10 s"
        assert status["nothing"].startswith(f"cannot connect to {configs[4].url}: ConnectError")

        missing = by_name(pool.tools("missing"))  # the granted names, from allowed_tools
        assert list(missing) == ["search", "fetch"]
        assert "not available: command not found" in missing["search"].description
        assert await failure(missing["search"], q="x") == (
            "MCP server 'missing' is not available: command not found: /nonexistent/mcp-server"
        )
        stubs = pool.tools("crashes", ["lookup"])  # names listed in the team file
        assert [t.name for t in stubs] == ["lookup"]
        assert "no API key configured" in await failure(stubs[0])
        assert pool.tools("silent") == []  # no names known
        assert await by_name(pool.tools("echo"))["add"].run({"a": 1, "b": 1}) == "2"  # the rest still works


async def test_a_specialist_uses_an_external_tool(spans: Any) -> None:
    async with McpToolPool([echo_server(allowed_tools=["add"])]) as pool:
        analyst = Specialist(
            name="analyst", description="Adds.", system_prompt="Add numbers.", tools=tuple(pool.tools("echo"))
        )
        model = ScriptedModel([tool_calls(("add", {"a": 19, "b": 23})), text("19 + 23 = 42")])

        result = await run_specialist(analyst, "What is 19 + 23?", ModelSet.single(model))

    assert (result.status, result.output) == ("completed", "19 + 23 = 42")
    assert model.requests[1].messages[-1].blocks == [ToolResultBlock(tool_use_id="call_0", content="42")]
    assert spans.one("execute_tool add").status.is_ok


# --- streamable HTTP ----------------------------------------------------------------------------------------------


async def test_http_server_with_headers_and_its_death() -> None:
    port = free_port()
    process = await anyio.open_process(
        [sys.executable, FIXTURE, "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        with anyio.fail_after(HANG_GUARD):
            while True:
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await anyio.sleep(0.05)
        config = McpServerConfig(name="remote", url=f"http://127.0.0.1:{port}/mcp", headers={"X-Team": "blue"})
        async with McpToolPool([config]) as pool:
            tools = by_name(pool.tools("remote"))
            assert await tools["header"].run({"name": "X-Team"}) == "blue"
            assert await tools["add"].run({"a": 1, "b": 2}) == "3"

            process.kill()
            await process.wait()

            assert (await failure(tools["echo"], text="x")).startswith(
                "MCP server 'remote' is not available: the connection was lost"
            )
    finally:
        if process.returncode is None:
            process.kill()
        await process.aclose()
