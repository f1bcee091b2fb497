"""`mcp-team run` stopped by SIGTERM during its start-up (imports, loading the team, launching the runs
database) ends as one stopped later does: exit 130 and one line, no run left running, no traceback. It was
killed by the signal's default action: exit 143, nothing said."""

from __future__ import annotations

import json
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import HANG_GUARD, MCP_TEAM, clean_env

REQUEST = "Research the history of the transistor, compute 12*(3+4)/2 and write a short report."
ATTEMPTS = 3  # where in the start-up the signal lands varies from one attempt to the next

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/PID/status: Linux only (CI is Linux)"),
    pytest.mark.process,
]


def _start(tmp_path: Path) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    env = clean_env(MCP_TEAM_STATE_DIR=str(tmp_path), MCP_TEAM_OFFLINE_LATENCY_MS="1000")
    proc = subprocess.Popen([MCP_TEAM, "run", "--model", "offline", REQUEST], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    return proc, env


def _catches_sigterm(pid: int) -> bool:
    """Whether the process has a handler for SIGTERM yet (the kernel's record of it, no timing involved)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) >> (signal.SIGTERM - 1) & 1)


def _assert_ended_as_a_later_signal_does(proc: subprocess.Popen[bytes], env: dict[str, str]) -> str:
    out, err = (b.decode() for b in proc.communicate(timeout=HANG_GUARD))
    assert proc.returncode == 130, (proc.returncode, err)  # -15 (143 in a shell) before the fix
    assert "Traceback" not in err and "ERROR" not in err, err
    summary = re.search(r"^cancelled: \d+ handoffs?, .*, run (\w+)$", err, re.MULTILINE)
    # Before the run started: the line a later signal gives then; after, the cancelled result and its summary.
    assert summary or err.splitlines()[-1] == "mcp-team: cancelled", err
    if summary:
        assert out.strip(), "the cancelled result is printed"
    listed = subprocess.run([MCP_TEAM, "runs", "--json"], env=env, capture_output=True, text=True, timeout=HANG_GUARD)
    runs = json.loads(listed.stdout)
    assert all(r["status"] == "cancelled" for r in runs), runs  # none left running, to resume unasked
    assert [r["run_id"] for r in runs] == ([summary.group(1)] if summary else []), (runs, err)
    return err


def test_sigterm_as_soon_as_the_command_can_take_one(tmp_path: Path) -> None:
    before_any_output = 0
    for attempt in range(ATTEMPTS):
        proc, env = _start(tmp_path / str(attempt))
        assert proc.stderr is not None
        deadline = time.monotonic() + HANG_GUARD  # a guard against a hang only
        while not _catches_sigterm(proc.pid):
            assert proc.poll() is None and time.monotonic() < deadline, "the command never took SIGTERM"
            time.sleep(0.001)
        # Nothing written yet: the handler was there before the start-up's work. (Before the fix, the first
        # handler came with the run's, after the team was loaded and the first line said.)
        before_any_output += not select.select([proc.stderr], [], [], 0)[0]
        proc.send_signal(signal.SIGTERM)
        _assert_ended_as_a_later_signal_does(proc, env)
    assert before_any_output, "every signal was sent after the command had written output"


def test_sigterm_once_the_command_said_its_first_line(tmp_path: Path) -> None:
    for attempt in range(ATTEMPTS):
        proc, env = _start(tmp_path / str(attempt))
        assert proc.stderr is not None
        first = proc.stderr.readline().decode()
        assert "offline backend" in first, first
        proc.send_signal(signal.SIGTERM)  # before the fix: while the run's handler was not yet there
        _assert_ended_as_a_later_signal_does(proc, env)


PAUSED_START = str(Path(__file__).parents[1] / "support" / "paused_start.py")


@pytest.mark.parametrize(
    "pause_at",
    [
        # importing the commands (typing, argparse...; cli/eval.py is the first): before the fix, no handler yet
        "mcp_team.cli.eval",
        "mcp_team.teamfile.loading",  # loading the team
    ],
)
def test_sigterm_at_a_given_point_of_the_start_up(tmp_path: Path, pause_at: str) -> None:
    """Not a race: the command waits at `pause_at` until the signal comes (tests/support/paused_start.py). Importing the
    commands took the first ~30 ms of `mcp-team run`, and a SIGTERM there killed it with 143, nothing said."""
    env = clean_env(MCP_TEAM_STATE_DIR=str(tmp_path), MCP_TEAM_TEST_PAUSE_AT=pause_at)
    proc = subprocess.Popen([sys.executable, PAUSED_START, "run", "--model", "offline", REQUEST], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stderr is not None
    first = proc.stderr.readline().decode()
    assert first == "paused\n", first + proc.stderr.read().decode()
    proc.send_signal(signal.SIGTERM)
    err = _assert_ended_as_a_later_signal_does(proc, env)
    assert err.splitlines()[-1] == "mcp-team: cancelled", err  # before the run: nothing of it to print


def test_sigterm_again_while_the_run_is_cancelled(tmp_path: Path) -> None:
    """SIGTERM sent again and again, as an impatient user or a supervisor may: the first cancels the run, the
    others wait for it to be recorded. One arriving while the run was cancelled killed the command with 143,
    the run left running (for the next `mcp-team run` to resume unasked)."""
    proc, env = _start(tmp_path)
    assert proc.stderr is not None
    for line in iter(proc.stderr.readline, b""):  # the run is under way once its first handoff starts
        if "→ h1" in line.decode():
            break
    deadline = time.monotonic() + HANG_GUARD  # a guard against a hang only
    while proc.poll() is None and time.monotonic() < deadline:
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.002)
    err = _assert_ended_as_a_later_signal_does(proc, env)
    assert re.search(r"^cancelled: ", err, re.MULTILINE), err  # the run's cancelled result, not a kill


def test_a_second_ctrl_c_while_the_command_says_it_was_cancelled(tmp_path: Path) -> None:
    """Ctrl-C twice early in the start-up: the first while the commands load, the second while `main` says it
    was cancelled (its first import of the exit codes, tests/support/paused_start.py pauses there). The second ended
    in a
    traceback; now it ends the process at once, as a second Ctrl-C does once a run is under way."""
    pause_at = "mcp_team.cli.eval,mcp_team.cli.common"  # the first command module, then the exit codes
    env = clean_env(MCP_TEAM_STATE_DIR=str(tmp_path), MCP_TEAM_TEST_PAUSE_AT=pause_at)
    proc = subprocess.Popen([sys.executable, PAUSED_START, "run", "--model", "offline", REQUEST], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stderr is not None
    for _ in range(2):
        said = proc.stderr.readline().decode()
        assert said == "paused\n", said + proc.stderr.read().decode()
        proc.send_signal(signal.SIGINT)
    _, err = (b.decode() for b in proc.communicate(timeout=HANG_GUARD))
    assert proc.returncode == -signal.SIGINT, (proc.returncode, err)  # the shell says 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


def test_a_second_ctrl_c_while_the_runs_database_closes(tmp_path: Path) -> None:
    """Ctrl-C once the run is under way (its cancel is recorded), then again as the command closes its runs
    database: SQLAlchemy's pool, closing a connection, caught that second KeyboardInterrupt and logged it as
    "mcp-team: ERROR Exception closing connection" with a traceback. The pause in SQLAlchemy's close is
    tests/support/paused_start.py's, armed by a file once the first Ctrl-C is sent: not a race."""
    armed = tmp_path / "armed"
    env = clean_env(MCP_TEAM_STATE_DIR=str(tmp_path / "state"), MCP_TEAM_OFFLINE_LATENCY_MS="1000",
                    MCP_TEAM_TEST_PAUSE_IN="sqlalchemy.engine.default:DefaultDialect.do_close",
                    MCP_TEAM_TEST_PAUSE_ARMED=str(armed))  # fmt: skip
    proc = subprocess.Popen([sys.executable, PAUSED_START, "run", "--model", "offline", REQUEST], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stderr is not None
    said = []
    for line in iter(proc.stderr.readline, b""):  # the run is under way once its first handoff starts
        said.append(line.decode())
        if "→ h1" in said[-1]:
            break
    armed.touch()
    proc.send_signal(signal.SIGINT)
    for line in iter(proc.stderr.readline, b""):
        said.append(line.decode())
        if said[-1] == "paused\n":
            break
    assert said[-1] == "paused\n", "".join(said)
    proc.send_signal(signal.SIGINT)
    _, rest = (b.decode() for b in proc.communicate(timeout=HANG_GUARD))
    err = "".join(said) + rest
    assert proc.returncode in (130, -signal.SIGINT), (proc.returncode, err)
    assert "Traceback" not in err and "ERROR" not in err and "KeyboardInterrupt" not in err, err
    assert err.splitlines()[-1] == "mcp-team: cancelled", err
    listed = subprocess.run([MCP_TEAM, "runs", "--json"], env=env, capture_output=True, text=True, timeout=HANG_GUARD)
    assert [r["status"] for r in json.loads(listed.stdout)] == ["cancelled"], listed.stdout  # recorded, for good


def test_a_ctrl_c_in_a_finalizer_is_not_said_as_an_exception(tmp_path: Path) -> None:
    """A Ctrl-C may land in a finalizer (a `__del__`, a generator closed as the command unwinds): Python printed
    it as "Exception ignored in ..." and a traceback, though the command says its own end. `main`, as the console
    script calls it, leaves a hook for the rest of the process; a finalizer's real fault is still said."""
    script = (
        "import sys\n"
        "from mcp_team.cli.main import main\n"
        "sys.argv = ['mcp-team', 'runs', '--json']\n"
        "main()\n"
        "class Finalized:\n"
        "    def __init__(self, exc): self.exc = exc\n"
        "    def __del__(self): raise self.exc\n"
        "Finalized(KeyboardInterrupt())\n"
        "Finalized(ValueError('a real fault'))\n"
    )
    env = clean_env(MCP_TEAM_STATE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=HANG_GUARD)
    assert proc.returncode == 0, proc.stderr
    assert "KeyboardInterrupt" not in proc.stderr, proc.stderr
    assert proc.stderr.count("Exception ignored") == 1 and "ValueError: a real fault" in proc.stderr, proc.stderr
