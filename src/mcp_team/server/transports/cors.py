"""CORS on `/mcp`, for a host that runs in a browser page on another origin (an MCP client in a web app).

Off by default (`MCP_TEAM_CORS`). When on, `/mcp` answers preflight requests and marks its answers for the origins
the server allows already (`MCP_TEAM_ALLOWED_ORIGINS`, and loopback), the same list its Origin check uses, and lets
such a page read the MCP headers of an answer (the session id, the protocol version, an auth challenge). Starlette's
`CORSMiddleware` does the work; only `/mcp` goes through it (the run pages are same-origin).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

MCP_PATH = "/mcp"
# What an MCP client sends beyond the CORS-safelisted headers, and what it must read of an answer.
REQUEST_HEADERS = (
    "Authorization",
    "Content-Type",
    "Mcp-Session-Id",
    "Mcp-Protocol-Version",
    "Mcp-Name",
    "Last-Event-ID",
)
EXPOSED_HEADERS = ("Mcp-Session-Id", "Mcp-Protocol-Version", "WWW-Authenticate")


def origin_pattern(origins: Sequence[str]) -> str:
    """One regular expression for `origins`, written as the Origin check takes them: exact, or `scheme://host:*`
    for any port."""
    parts = [re.escape(o[:-2]) + r":[0-9]+" if o.endswith(":*") else re.escape(o) for o in origins]
    return "|".join(parts) or "(?!)"


class McpCors:
    """A middleware (`app.add_middleware(McpCors, origins=...)`): CORS answered on `/mcp` for `origins`."""

    def __init__(self, app: ASGIApp, origins: Sequence[str]) -> None:
        self.app = app
        self.cors = CORSMiddleware(
            app,
            allow_origin_regex=origin_pattern(origins),
            allow_methods=("GET", "POST", "DELETE"),
            allow_headers=REQUEST_HEADERS,
            expose_headers=EXPOSED_HEADERS,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].rstrip("/") == MCP_PATH:
            await self.cors(scope, receive, send)
        else:
            await self.app(scope, receive, send)
