"""What server/lowlevel.py takes from the MCP SDK's private parts still holds on the installed release: this fails
on an SDK release that moves or changes them, before a user meets it."""

from __future__ import annotations

import inspect

import mcp_types as types
import pytest
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer

from mcp_team.server.app import build_server
from mcp_team.server.lowlevel import lowlevel_of
from mcp_team.teamfile.loading import load_team


def test_the_low_level_server_is_reached_and_has_what_we_use() -> None:
    inner = lowlevel_of(MCPServer("probe"))
    assert isinstance(inner, Server)
    for name in ("get_request_handler", "add_request_handler", "create_initialization_options", "run"):
        assert callable(getattr(inner, name)), name
    entry = inner.get_request_handler("tools/call")
    assert entry is not None and callable(entry.handler) and entry.params_type is types.CallToolRequestParams
    assert list(inspect.signature(inner.add_request_handler).parameters)[:3] == ["method", "params_type", "handler"]


def test_our_server_registers_what_it_needs_through_it() -> None:
    inner = lowlevel_of(build_server(team=load_team(None)))
    for method in ("resources/subscribe", "resources/unsubscribe", "logging/setLevel", "subscriptions/listen"):
        assert inner.get_request_handler(method) is not None, method


def test_a_server_without_it_is_a_clear_error() -> None:
    class Changed:  # what a later SDK's MCPServer might look like
        pass

    with pytest.raises(RuntimeError, match=r"mcp>=2\.3,<3"):
        lowlevel_of(Changed())  # type: ignore[arg-type]
