"""A team whose external MCP server is slow to exit (it ignores its stdin closing and SIGTERM), and what it notes."""

from __future__ import annotations

import json
import shutil
import subprocess
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


def wait_for_eof(marks: Path, command: subprocess.Popen[bytes] | None = None, stderr: Path | None = None) -> None:
    """Until the server notes that its stdin closed. Failing, it says what `command` (the mcp-team that runs the
    server) was doing then: its stderr so far, and its threads' stacks (py-spy)."""
    deadline = time.monotonic() + HANG_GUARD
    while "eof" not in noted(marks):
        if time.monotonic() >= deadline:
            doing = _doing(command, stderr)
            raise AssertionError(f"hang guard: the server's stdin never closed: {noted(marks)}{doing}")
        time.sleep(0.02)


def _doing(command: subprocess.Popen[bytes] | None, stderr: Path | None) -> str:
    if command is None:
        return ""
    said = stderr.read_text(errors="replace")[-3000:] if stderr is not None and stderr.exists() else "(not kept)"
    where = "(it has exited)"
    if command.poll() is None:
        spy = shutil.which("py-spy", path=str(Path(sys.executable).parent))
        dump = subprocess.run([spy, "dump", "--pid", str(command.pid)], capture_output=True, text=True, timeout=60,
                              check=False) if spy else None  # fmt: skip
        where = (dump.stdout + dump.stderr)[-6000:] if dump is not None else "(py-spy is not installed)"
    return f"\nmcp-team (exit {command.poll()}) said:\n{said}\nits threads:\n{where}"


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
