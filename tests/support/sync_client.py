"""`mcp-team serve --http` on a state directory, and a synchronous client of it: MCP calls, status codes, waits."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx2

from support import HANG_GUARD, MCP_TEAM, clean_env, free_port, plain_http, wait_healthy

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class Mcp:
    """A 2025-11-25 session over plain HTTP (JSON answers read from the SSE body): small, and synchronous."""

    def __init__(self, base: str) -> None:
        self.url = f"{base}/mcp"
        self.http = plain_http(timeout=HANG_GUARD)
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}
        opened = self.http.post(self.url, headers=HEADERS, json=initialize)
        self.headers = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"],
                        "mcp-protocol-version": "2025-11-25"}  # fmt: skip
        self.http.post(self.url, headers=self.headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.n = 0

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """The tool's result: its structured content, or {"error": text} for an error result."""
        self.n += 1
        answer = self.http.post(self.url, headers=self.headers, json={
            "jsonrpc": "2.0", "id": self.n, "method": "tools/call", "params": {"name": tool, "arguments": arguments},
        })  # fmt: skip
        data = [line[5:] for line in answer.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        message = json.loads(data[-1])
        result = message["result"]
        if result.get("isError"):
            return {"error": result["content"][0]["text"]}
        return result["structuredContent"]  # type: ignore[no-any-return]

    def finished(self, request: str) -> str:
        """The id of a run of `request`, started with start_run and followed with get_run to its completion."""
        run_id = str(self.call("start_run", request=request)["run_id"])
        assert self.call("get_run", run_id=run_id, wait_seconds=50)["status"] == "complete"
        return run_id


def until(what: str, check: Any, proc: subprocess.Popen[bytes], log: Path) -> Any:
    """Poll `check` until it returns something truthy (the event awaited); fails after the hang guard."""
    deadline = time.monotonic() + HANG_GUARD
    while time.monotonic() < deadline:
        if (found := check()) is not None and found is not False:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what}: not seen in {HANG_GUARD:g} s (exit {proc.poll()}): {log.read_text()[-3000:]}")


def serve(state: Path, log: Path, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_STATE_DIR=str(state))
    proc = subprocess.Popen([MCP_TEAM, "serve", "--http", "--port", str(port), *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=log.open("wb"))  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    assert wait_healthy(base, proc), log.read_text()
    return proc, base


def status(http: httpx2.Client, url: str) -> int | None:
    try:
        return http.get(url, timeout=HANG_GUARD).status_code
    except httpx2.TransportError:
        return None
