"""A second SIGTERM while `mcp-team serve --http` is ending its app (the team's external MCP servers closing, the run
service stopping: after the held calls were dealt with) ends the process at once, exit 0: it forced nothing there,
and the process waited for the slowest part of that shutdown (a server that ignores its stdin closing and SIGTERM
holds it until the SDK kills it, seconds later). That server does not outlive it: the exit skips the SDK's
teardown, so the process kills it first."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import anyio
import pytest

from support import clean_env, serve_http_process
from support.http_shutdown import exited
from support.slow_mcp_server import KILLED_WITHIN, external_pid, gone, noted, team_file, wait_for_eof

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals (CI is Linux)"),
    pytest.mark.process,
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_second_sigterm_while_the_team_closes_ends_the_process_at_once(tmp_path: Path) -> None:
    marks, err = tmp_path / "marks", tmp_path / "stderr"
    env = clean_env(MCP_TEAM_MODEL="offline")
    try:
        with serve_http_process("--ephemeral", "--team", str(team_file(tmp_path, marks)), env=env, stderr=err) as (
            _,
            proc,
        ):
            proc.send_signal(signal.SIGTERM)  # no call held: the app's shutdown begins, and closes the server
            wait_for_eof(marks, proc, err)
            proc.send_signal(signal.SIGTERM)
            assert await exited(proc) == 0
        # The exit skipped the SDK's teardown, which would have killed the server: it is killed, not left behind.
        slow = external_pid(marks)
        deadline = time.monotonic() + KILLED_WITHIN
        while not gone(slow):
            assert time.monotonic() < deadline, f"the external MCP server {slow} outlived mcp-team: {noted(marks)}"
            await anyio.sleep(0.05)
    finally:
        for mark in noted(marks):
            if mark.startswith("pid "):  # left to finish on its own: not in a test run
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(mark.removeprefix("pid ")), signal.SIGKILL)
    said = err.read_text()
    # Said only where the stop is cut short; without it the process waits for the SDK to kill the slow server.
    assert "stopping now" in said and "Traceback" not in said, said
