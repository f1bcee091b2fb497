"""What the tests of `mcp-team serve --http` stopping share: their calls' request and headers, and their waits."""

from __future__ import annotations

import json
import subprocess

import anyio
import mcp_types as types
import pytest
from mcp import Client

from support import HANG_GUARD

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
REQUEST = "Research bees, calculate 2+2, write a short report and review it"


async def exited(proc: subprocess.Popen[bytes]) -> int:
    """The process's exit code; fails the test (and kills it) if it is still running after the hang guard."""
    try:
        return await anyio.to_thread.run_sync(lambda: proc.wait(timeout=HANG_GUARD))
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"mcp-team serve --http still running {HANG_GUARD:.0f} s after SIGTERM")


async def until_running(client: Client, runs: int = 1) -> None:
    """Until the server lists `runs` runs in progress: the calls sent are being served (no progress comes before
    the first model call ends, and a signal sent before a call arrives would find no call to hold)."""
    with anyio.fail_after(HANG_GUARD):
        while True:
            contents = (await client.read_resource("team://runs")).contents[0]
            assert isinstance(contents, types.TextResourceContents)
            if sum(run["status"] == "running" for run in json.loads(contents.text)["runs"]) >= runs:
                return
            await anyio.sleep(0.1)
