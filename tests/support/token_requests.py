"""2026-07-28 MCP requests posted over plain HTTP with a bearer token, and the challenge of a refused one."""

from __future__ import annotations

import re
from typing import Any

import httpx2

from support import plain_http

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
MODERN = {**HEADERS, "mcp-protocol-version": "2026-07-28"}


def mcp_request(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A 2026-07-28 request (stateless: no session to open first)."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}}  # fmt: skip
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": meta}}


def post(url: str, token: str | None, message: dict[str, Any]) -> httpx2.Response:
    headers = {**MODERN, "mcp-method": message["method"]}
    if message["method"] == "tools/call":
        headers["mcp-name"] = message["params"]["name"]
    elif message["method"] == "resources/read":
        headers["mcp-name"] = message["params"]["uri"]
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    with plain_http(timeout=60) as http:
        return http.post(url, json=message, headers=headers)


def challenge(response: httpx2.Response) -> dict[str, str]:
    """The parameters of a `Bearer` WWW-Authenticate."""
    header = response.headers.get("www-authenticate", "")
    assert header.startswith("Bearer "), header
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


LIST_TOOLS = mcp_request("tools/list")
