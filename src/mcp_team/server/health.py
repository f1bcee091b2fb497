"""`/healthz` (liveness) and `/readyz` (readiness) on an HTTP server, without auth (docs/operating.md).

- `/healthz`: 200 while the server is whole; 503 once its lifespan or a background task it cannot serve without
  has died (runs/health.py: the process is stopping then, exit 1). Restart on failure.
- `/readyz`: 200 when the server can take runs now: alive, the run service open, and (durable) the runs database
  took a small write within a few seconds; 503 saying why otherwise (opening, locked by another process, away,
  full, deleted). Send no traffic while it fails; it passes again once the database does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse

from mcp_team.runs.health import Liveness, described, probe_write
from mcp_team.server.state import ServerState


@asynccontextmanager
async def dies_loudly(liveness: Liveness) -> AsyncIterator[None]:
    """Around the lifespan's task group: a task of it that raised stops the server (exit 1), said in one line,
    instead of leaving it half alive (every /mcp request 500, /healthz 200). The error is not raised on: the
    process is stopping, and uvicorn would only log it again as a traceback."""
    try:
        yield
    except Exception as exc:
        liveness.fail(f"a background task of the server failed: {described(exc)}")


def add_health_routes(server: MCPServer[Any], state: ServerState) -> None:
    liveness = state.runs.liveness

    @server.custom_route("/healthz", methods=["GET"])
    async def healthz(_request: Request) -> JSONResponse:
        if not liveness.alive:
            return JSONResponse({"ok": False, "server": "mcp-team", "error": liveness.dead}, status_code=503)
        return JSONResponse({"ok": True, "server": "mcp-team"})

    @server.custom_route("/readyz", methods=["GET"])
    async def readyz(_request: Request) -> JSONResponse:
        problem = await not_ready(state)
        if problem is not None:
            return JSONResponse({"ready": False, "server": "mcp-team", "error": problem}, status_code=503)
        return JSONResponse({"ready": True, "server": "mcp-team"})


async def not_ready(state: ServerState) -> str | None:
    """Why the server cannot take runs now, or None."""
    runs = state.runs
    if not runs.liveness.alive:
        return runs.liveness.dead
    if runs.error is not None:
        return f"durable runs are unavailable: {runs.error}"
    if runs.refusing is not None:
        return runs.refusing
    if runs.service is None:
        return "the run service is opening" if not runs.stopped else "the server is stopping"
    if runs.config is None:
        return None
    config = runs.config
    return await anyio.to_thread.run_sync(probe_write, config.database_url, config.sqlite_path)
