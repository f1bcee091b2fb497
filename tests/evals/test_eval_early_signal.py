"""`mcp-team eval` stopped by SIGTERM while it starts (importing its commands, reading its suite, loading its team),
before any case ran, ends as `run` does then: exit 130 and "mcp-team: cancelled", no traceback. It was killed by the
signal's default action: 143 in the shell and nothing said (a CI job cancelled in its first second).

Not a race: the command waits, at the point under test, on something the test holds. A suite or team file that
is a named pipe keeps the command reading it until the test writes or closes it; tests/support/paused_start.py stops it
at the first import of the commands."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import HANG_GUARD, MCP_TEAM, clean_env

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="named pipes and POSIX signals (CI is Linux)"),
    pytest.mark.process,
]

SUITE = '[[cases]]\nname = "bees"\nrequest = "Research bees and write a haiku"\nexpect.called = ["researcher"]\n'
PAUSED_START = str(Path(__file__).parents[1] / "support" / "paused_start.py")


def _held_open(fifo: Path, proc: subprocess.Popen[bytes]) -> int:
    """The pipe's writing end, opened once the command has opened it to read: from then on the command waits in
    read() for the file's text, which never comes until the test closes this end."""
    deadline = time.monotonic() + HANG_GUARD  # a guard against a hang only
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: nothing has opened it to read yet
                raise
        if proc.poll() is not None or time.monotonic() > deadline:
            _, err = proc.communicate(timeout=HANG_GUARD)
            pytest.fail(f"the command never read {fifo.name}: exit {proc.returncode}\n{err.decode()}")
        time.sleep(0.001)


def _assert_cancelled_before_any_case(proc: subprocess.Popen[bytes], report: Path) -> None:
    out, err = (b.decode() for b in proc.communicate(timeout=HANG_GUARD))
    assert proc.returncode == 130, (proc.returncode, err)  # -15 (143 in a shell) before the fix
    assert err.splitlines()[-1] == "mcp-team: cancelled", err
    assert "Traceback" not in err and "ERROR" not in err, err
    assert out == "" and not report.exists(), out  # no case ran: no table, no report of nothing


@pytest.mark.parametrize("waiting_on", ["suite", "team"])
def test_sigterm_while_eval_reads_its_files(tmp_path: Path, waiting_on: str) -> None:
    suite, team, report = tmp_path / "suite.toml", tmp_path / "team.toml", tmp_path / "report.json"
    suite.write_text(SUITE)
    team.write_text("")  # the default team
    os.unlink(suite if waiting_on == "suite" else team)
    fifo = suite if waiting_on == "suite" else team
    os.mkfifo(fifo)
    args = [MCP_TEAM, "eval", str(suite), "--team", str(team), "--model", "offline", "--report", str(report)]
    proc = subprocess.Popen(args, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    writer = _held_open(fifo, proc)
    try:
        proc.send_signal(signal.SIGTERM)
        _assert_cancelled_before_any_case(proc, report)
    finally:
        os.close(writer)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=HANG_GUARD)


def test_sigterm_while_eval_imports_its_commands(tmp_path: Path) -> None:
    """The earliest point: before the fix, `eval` had no handler of its own until its cases began."""
    suite, report = tmp_path / "suite.toml", tmp_path / "report.json"
    suite.write_text(SUITE)
    env = clean_env(MCP_TEAM_TEST_PAUSE_AT="mcp_team.cli.eval")  # the commands' modules (main is in mcp_team.cli)
    args = [sys.executable, PAUSED_START, "eval", str(suite), "--model", "offline", "--report", str(report)]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    said = proc.stderr.readline().decode()
    assert said == "paused\n", said + proc.stderr.read().decode()
    proc.send_signal(signal.SIGTERM)
    _assert_cancelled_before_any_case(proc, report)


def test_sigterm_once_every_run_finished_leaves_the_eval_whole(tmp_path: Path) -> None:
    """A SIGTERM as the eval closes the team's external MCP servers, its runs all finished, cuts nothing short: the
    report is the whole eval's, exit 0. It said 'interrupted: 1 of 1 run(s) finished' and exited 130."""
    from support import ADDER_TEAM

    suite, team, closed = tmp_path / "suite.toml", tmp_path / "team.toml", tmp_path / "closed"
    suite.write_text('[[cases]]\nname = "poem"\nrequest = "Write a poem about bees"\n')
    server_env = f'env = {{ ECHO_CLOSED_FILE = "{closed}" }}\n'
    team.write_text(
        ADDER_TEAM.replace('allowed_tools = ["add", "echo"]\n', f'allowed_tools = ["add", "echo"]\n{server_env}')
    )
    assert server_env in team.read_text()
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_STATE_DIR=str(tmp_path / "state"))
    proc = subprocess.Popen([MCP_TEAM, "eval", str(suite), "--team", str(team)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + HANG_GUARD  # a guard against a hang only
    while not closed.exists():  # the echo server's stdin closed: the eval is closing its team, every run done
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate(timeout=HANG_GUARD)
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)
    out, err = (b.decode() for b in proc.communicate(timeout=HANG_GUARD))
    assert proc.returncode == 0, (proc.returncode, out, err)
    assert "interrupted" not in out + err and "1/1 cases pass" in " ".join(out.split()), (out, err)
