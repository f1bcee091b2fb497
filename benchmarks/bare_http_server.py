"""The baseline of the load benchmark's held shape: a one-tool `MCPServer` over streamable HTTP, nothing else.

`python benchmarks/bare_http_server.py PORT SECONDS` serves `run_team(request)`, which only sleeps SECONDS and
says when it started and ended, with the SDK's defaults and the same uvicorn: what the MCP SDK itself holds
for a `tools/call` left open, whatever the tool does (`load.py --sdk-baseline`).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse

server = MCPServer("bare")


@server.tool()
async def run_team(request: str) -> dict[str, Any]:
    """Sleep, then answer."""
    started = datetime.now(UTC).isoformat()
    await anyio.sleep(float(sys.argv[2]))
    return {"status": "complete", "started_at": started, "ended_at": datetime.now(UTC).isoformat()}


@server.custom_route("/healthz", methods=["GET"])
async def healthz(_request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


if __name__ == "__main__":
    app = server.streamable_http_app(json_response=False)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
