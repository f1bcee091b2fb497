"""`mcp-team serve` over stdio, stopped by SIGTERM while its client keeps stdin open, exits at once after a grace
second (its stdin reader cannot be interrupted): the team's external MCP servers do not outlive it. That exit cut
short the SDK's teardown (close stdin, 2 s, SIGTERM, 2 s, SIGKILL), and a server that ignores its stdin closing
and SIGTERM was left running as an orphan."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import HANG_GUARD, MCP_TEAM, clean_env
from test_http_shutdown_lifespan import KILLED_WITHIN, external_pid, gone, noted, team_file

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals, /proc (CI is Linux)")


def test_a_sigterm_with_stdin_open_leaves_no_external_server_behind(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    env = clean_env(MCP_TEAM_MODEL="offline")
    proc = subprocess.Popen(
        [MCP_TEAM, "serve", "--team", str(team_file(tmp_path, marks))],
        env=env,
        stdin=subprocess.PIPE,  # kept open, as a client that sends SIGTERM first does
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + HANG_GUARD
        while not any(mark.startswith("pid ") for mark in noted(marks)):  # the team's server is up
            assert proc.poll() is None, f"mcp-team serve exited with {proc.returncode}"
            assert time.monotonic() < deadline, "hang guard: the team's external MCP server never started"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=HANG_GUARD) == 0
        slow = external_pid(marks)
        deadline = time.monotonic() + KILLED_WITHIN
        while not gone(slow):
            assert time.monotonic() < deadline, f"the external MCP server {slow} outlived mcp-team: {noted(marks)}"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=HANG_GUARD)
        assert proc.stdin is not None
        proc.stdin.close()
        for mark in noted(marks):
            if mark.startswith("pid "):  # left to finish on its own: not in a test run
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(mark.removeprefix("pid ")), signal.SIGKILL)
