"""An operator's OTLP collector that is down, then up: a stdio server's runs go on, the outage is said in one
line naming the endpoint and why (not the SDK's warning per retry and error per batch, after every tool call),
and its end in another once spans reach the collector again."""

from __future__ import annotations

import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import TextIO, cast

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from support import HANG_GUARD, MCP_TEAM, clean_env, free_port
from support.otlp_receiver import OTLPReceiver

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]

SDK_LINES = ("Transient error", "Failed to export", "Traceback")


async def _until_said(path: Path, words: tuple[str, ...]) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while True:
        said = await anyio.Path(path).read_text()
        if any(w in said for w in words):
            return
        assert time.monotonic() < deadline, f"the server never said any of {words}: {said}"
        await anyio.sleep(0.1)


async def test_a_collector_that_is_down_is_said_once_and_its_return_once(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there until the collector "comes back" below
    env = clean_env(MCP_TEAM_MODEL="offline", OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}")
    receiver = OTLPReceiver()
    collector: ThreadingHTTPServer | None = None
    err_path = tmp_path / "serve.err"
    try:
        with open(err_path, "w") as errlog:  # noqa: ASYNC230
            params = StdioServerParameters(command=MCP_TEAM, args=["serve", "--ephemeral"], env=env)
            async with Client(stdio_client(params, errlog=cast(TextIO, errlog)), mode="legacy") as client:
                for request in ("Research bees", "Research wasps"):  # the server flushes after each call
                    result = await client.call_tool("run_team", {"request": request})
                    assert not result.is_error, result.content  # runs do not depend on the collector
                # the exporter retries a batch for a while: the collector comes back once a batch was given up
                await _until_said(err_path, ("traces cannot be exported", "Failed to export"))
                collector = ThreadingHTTPServer(("127.0.0.1", port), receiver._handler())
                threading.Thread(target=collector.serve_forever, daemon=True).start()
                result = await client.call_tool("run_team", {"request": "Research ants"})
                assert not result.is_error, result.content
                receiver.wait_for(lambda spans: any(s["name"] == "invoke_agent supervisor" for s in spans))
    finally:
        if collector is not None:
            collector.shutdown()
            collector.server_close()
    said = err_path.read_text()
    down = [line for line in said.splitlines() if "traces cannot be exported" in line]
    assert len(down) == 1, said
    assert f"http://127.0.0.1:{port}/v1/traces" in down[0] and "Connection refused" in down[0], down[0]
    assert not [line for line in said.splitlines() if line.startswith(SDK_LINES) or any(s in line for s in SDK_LINES)]
    assert sum("traces reach the OTLP endpoint" in line for line in said.splitlines()) == 1, said
