"""The one door to the MCP SDK's low-level server behind an `MCPServer` (mcp 2.3).

`MCPServer` has no public way to reach the `mcp.server.lowlevel.Server` it wraps, and four things this server
does need it: a request handler wrapped to answer a client's mistakes exactly (surface/strict.py), the
handlers of `resources/subscribe` and `unsubscribe` (updates/run_updates.py), `logging/setLevel`
(surface/log_level.py), the `listChanged` capabilities it declares (transports/middleware.py), and the
session loop the stdio gate runs (transports/stdio.py). Everything else uses `MCPServer`'s public API.
tests/server/test_sdk_lowlevel.py fails on an SDK release that moves or changes what is used here.
"""

from __future__ import annotations

from typing import Any

from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer


def lowlevel_of(server: MCPServer[Any]) -> Server[Any]:
    """The low-level server `server` registers its handlers on (the SDK's private `_lowlevel_server`)."""
    found = getattr(server, "_lowlevel_server", None)
    if not isinstance(found, Server):  # an SDK release that changed it: say so, not an AttributeError later
        raise RuntimeError(
            "this version of the MCP SDK has no MCPServer._lowlevel_server; mcp-team supports mcp>=2.3,<3 "
            "(server/lowlevel.py says what it needs)"
        )
    return found
