"""Where a command exits at once, the team's external MCP servers do not outlive it. The exit cuts short the SDK's
teardown (close stdin, 2 s, SIGTERM, 2 s, SIGKILL), and a server that ignores its stdin closing and SIGTERM was
left running as an orphan: `serve` over stdio stopped by SIGTERM while its client keeps stdin open (it exits a
grace second later: its stdin reader cannot be interrupted), and `run` ended by a second Ctrl-C as it cancels its
run. (`serve --http`: test_http_shutdown_lifespan.py.)"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import HANG_GUARD, MCP_TEAM, clean_env
from support.slow_mcp_server import KILLED_WITHIN, external_pid, gone, noted, team_file, wait_for_eof

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="POSIX signals, /proc (CI is Linux)"),
    pytest.mark.process,
]


def test_serve_stopped_with_stdin_open_leaves_no_external_server_behind(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    with command(marks, "serve", "--team", str(team_file(tmp_path, marks))) as proc:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=HANG_GUARD) == 0
        assert_killed(marks)


SLOW_EXIT = [sys.executable, str(Path(__file__).parents[1] / "support" / "slow_exit.py")]


@pytest.mark.parametrize("launcher", [[MCP_TEAM], SLOW_EXIT], ids=["mcp-team", "slow-exit"])
def test_run_ended_by_a_second_ctrl_c_leaves_no_external_server_behind(tmp_path: Path, launcher: list[str]) -> None:
    """Slow exit (tests/support/slow_exit.py): the exit held back a second, as a busy machine may hold it, so that what
    the command's threads do once the killed server is gone is said. asyncio's child watcher said "Loop ... that
    handles pid ... is closed" and the server's transport, freed, "Exception ignored ... Event loop is closed"
    with a traceback: seen on a loaded CI machine without the hold."""
    marks = tmp_path / "marks"
    said = tmp_path / "stderr"
    args = ("run", "--ephemeral", "--team", str(team_file(tmp_path, marks)), "add 1 and 2")
    with command(marks, *args, stderr=said, launcher=launcher) as proc:
        wait_for_line(said, "→ h1", proc)  # the run is under way (its server may be up well before, under load)
        proc.send_signal(signal.SIGINT)  # the run is cancelled, and its servers closed: slowly
        wait_for_eof(marks, proc, said)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=HANG_GUARD) == 130
        assert_killed(marks)
    # Said in one line: asyncio's shutdown logged the exception the interrupted run's task ended with, traceback too.
    assert said.read_text().splitlines()[-1] == "mcp-team: cancelled", said.read_text()
    assert "Traceback" not in said.read_text() and "ERROR" not in said.read_text(), said.read_text()


@pytest.mark.parametrize("launcher", [[MCP_TEAM], SLOW_EXIT], ids=["mcp-team", "slow-exit"])
def test_run_ended_by_a_ctrl_c_as_its_servers_start_leaves_none_behind(tmp_path: Path, launcher: list[str]) -> None:
    """Ctrl-C as soon as the team's external server is up: the team's tools may still be listed (the run not yet
    started) or the run under way, as the machine is loaded or not; either way exit 130, no server left, and
    nothing asyncio says.
    Under load, the servers' start cut short left the server running past the closed event loop, and asyncio said
    "Loop ... that handles pid ... is closed" after "mcp-team: cancelled"."""
    marks = tmp_path / "marks"
    said = tmp_path / "stderr"
    args = ("run", "--ephemeral", "--team", str(team_file(tmp_path, marks)), "add 1 and 2")
    with command(marks, *args, stderr=said, launcher=launcher) as proc:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=HANG_GUARD) == 130, said.read_text()
        assert_killed(marks)
    text = said.read_text()
    assert "Traceback" not in text and "ERROR" not in text and "WARNING" not in text, text
    if "→ h1" not in text:  # cancelled before the run started: that, in one line
        assert text.splitlines()[-1] == "mcp-team: cancelled", text


def wait_for_line(said: Path, text: str, proc: subprocess.Popen[bytes]) -> None:
    """Until the command's stderr (the file `said`) holds `text`."""
    deadline = time.monotonic() + HANG_GUARD
    while text not in said.read_text(errors="replace"):
        assert proc.poll() is None, f"mcp-team exited with {proc.returncode}: {said.read_text()}"
        assert time.monotonic() < deadline, f"hang guard: never said {text!r}: {said.read_text()}"
        time.sleep(0.02)


@contextlib.contextmanager
def command(
    marks: Path, *args: str, stderr: Path | None = None, launcher: list[str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """`mcp-team *args` (its stderr kept in the file `stderr`; started by `launcher`, `mcp-team` by default), once
    the team's external server (noting to `marks`) is up; killed after, with it."""
    with contextlib.ExitStack() as files:
        err = subprocess.DEVNULL if stderr is None else files.enter_context(stderr.open("wb"))
        proc = subprocess.Popen(
            [*(launcher or [MCP_TEAM]), *args],
            env=clean_env(MCP_TEAM_MODEL="offline"),
            stdin=subprocess.PIPE,  # kept open, as a client that sends SIGTERM first does
            stdout=subprocess.DEVNULL,
            stderr=err,
        )  # the child holds its own copy of the file: the parent's closes here
    try:
        deadline = time.monotonic() + HANG_GUARD
        while not any(mark.startswith("pid ") for mark in noted(marks)):
            assert proc.poll() is None, f"mcp-team {args[0]} exited with {proc.returncode}"
            assert time.monotonic() < deadline, "hang guard: the team's external MCP server never started"
            time.sleep(0.02)
        yield proc
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


def assert_killed(marks: Path) -> None:
    slow = external_pid(marks)
    deadline = time.monotonic() + KILLED_WITHIN
    while not gone(slow):
        assert time.monotonic() < deadline, f"the external MCP server {slow} outlived mcp-team: {noted(marks)}"
        time.sleep(0.05)
