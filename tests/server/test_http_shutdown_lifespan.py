"""A second SIGTERM while `mcp-team serve --http` is ending its app (the team's external MCP servers closing, the run
service stopping: after the held calls were dealt with) ends the process at once, exit 0: it forced nothing there,
and the process waited for the slowest part of that shutdown (a server that ignores its stdin closing and SIGTERM
holds it until the SDK kills it, seconds later). That server does not outlive it: the exit skips the SDK's
teardown, so the process kills it first."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import anyio
import pytest
from test_http_shutdown import exited

from support import ECHO_MCP_SERVER_FILE, HANG_GUARD, clean_env, serve_http_process

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals (CI is Linux)"),
    pytest.mark.process,
]

KILLED_WITHIN = 10.0  # seconds for a SIGKILLed process to be seen gone: generous, it takes milliseconds

# The test MCP server over stdio, slow to exit: once its stdin closes it notes "eof" and sleeps on, noting each
# SIGTERM instead of dying of it (the SDK's stop closes stdin, waits 2 s, sends SIGTERM, waits 2 s, kills).
SLOW_TO_EXIT = """
import os, runpy, signal, sys, time
marks = sys.argv[1]
def note(word):
    with open(marks, "a") as out:
        out.write(word + "\\n")
note(f"pid {os.getpid()}")
signal.signal(signal.SIGTERM, lambda *_: note("term"))
sys.argv = [sys.argv[2]]
runpy.run_path(sys.argv[0], run_name="__main__")
note("eof")
time.sleep(600)
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def team_file(tmp_path: Path, marks: Path) -> Path:
    team = tmp_path / "team.toml"
    team.write_text(f"""
[[mcp_servers]]
name = "slow"
command = {json.dumps(sys.executable)}
args = ["-c", {json.dumps(SLOW_TO_EXIT)}, {json.dumps(str(marks))}, {json.dumps(ECHO_MCP_SERVER_FILE)}]
allowed_tools = ["add"]

[[specialists]]
name = "adder"
description = "Adds numbers with the slow server."
prompt = "Add the numbers with your add tool."
tools = ["slow/add"]
""")
    return team


def noted(marks: Path) -> list[str]:
    return marks.read_text().splitlines() if marks.exists() else []


def wait_for_eof(marks: Path) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while "eof" not in noted(marks):
        assert time.monotonic() < deadline, f"hang guard: the server's stdin never closed: {noted(marks)}"
        time.sleep(0.02)


async def test_a_second_sigterm_while_the_team_closes_ends_the_process_at_once(tmp_path: Path) -> None:
    marks, err = tmp_path / "marks", tmp_path / "stderr"
    env = clean_env(MCP_TEAM_MODEL="offline")
    try:
        with serve_http_process("--ephemeral", "--team", str(team_file(tmp_path, marks)), env=env, stderr=err) as (
            _,
            proc,
        ):
            proc.send_signal(signal.SIGTERM)  # no call held: the app's shutdown begins, and closes the server
            wait_for_eof(marks)
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


def external_pid(marks: Path) -> int:
    return next(int(mark.removeprefix("pid ")) for mark in noted(marks) if mark.startswith("pid "))


def gone(pid: int) -> bool:
    """The process has exited: no longer in /proc, or a zombie (orphans are reaped by pid 1, which in a
    container may never reap them)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return True
    return stat[stat.rfind(b")") + 2 :].startswith(b"Z")
