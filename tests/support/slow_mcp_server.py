"""A team whose external MCP server is slow to exit (it ignores its stdin closing and SIGTERM), and what it notes."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from support import ECHO_MCP_SERVER_FILE, HANG_GUARD

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
