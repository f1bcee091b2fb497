"""A SIGTERM that comes once a command has finished, as the interpreter exits, changes nothing: its output is whole
and its exit status is its own. It killed the command with 143 (Python gives the signals it handled their default
action back before it unloads its modules, a tenth of a second and more), so a script read a finished `run` or
`eval` as a killed one. Supervisors send it then: an MCP client closes `serve`'s stdin, then sends SIGTERM; a
host or a person sends `serve --http` a second SIGTERM to mean "now"; a CI job is cancelled as its step ends.

Not a race: tests/support/paused_start.py stops the command as the interpreter unloads its modules (past its last line,
past the point where Python put the signals' default actions back), until the test says it may go on."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support import HANG_GUARD, clean_env, free_port, initialize, stdio_lines, wait_healthy

pytestmark = [pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"), pytest.mark.process]

PAUSED_START = str(Path(__file__).parents[1] / "support" / "paused_start.py")
SUITE = '[[cases]]\nname = "sums"\nrequest = "compute 12*(3+4)/2"\nexpect.called = ["analyst"]\n'


def _start(args: list[str], tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    go_on = tmp_path / "go-on"
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_STATE_DIR=str(tmp_path / "state"),
                    MCP_TEAM_TEST_PAUSE_AT_EXIT=str(go_on))  # fmt: skip
    proc = subprocess.Popen([sys.executable, PAUSED_START, *args], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    return proc, go_on


def _signalled_as_it_exits(proc: subprocess.Popen[bytes], go_on: Path) -> tuple[int, str, str]:
    """SIGTERM once the command is exiting, then its exit goes on; its status, stdout and stderr."""
    assert proc.stderr is not None
    said = []
    for line in iter(proc.stderr.readline, b""):
        if line == b"exiting\n":
            break
        said.append(line.decode())
    else:
        pytest.fail(f"the command never reached its exit: {proc.wait(timeout=HANG_GUARD)}\n{''.join(said)}")
    proc.send_signal(signal.SIGTERM)
    go_on.touch()
    out, err = (b.decode() for b in proc.communicate(timeout=HANG_GUARD))
    return proc.returncode, out, "".join(said) + err


def test_a_finished_run_signalled_as_it_exits(tmp_path: Path) -> None:
    proc, go_on = _start(["run", "--json", "compute 12*(3+4)/2"], tmp_path)
    code, out, err = _signalled_as_it_exits(proc, go_on)
    assert code == 0, (code, err)  # -15 (143 in a shell) before the fix
    result = json.loads(out)  # the whole result
    assert result["status"] == "complete" and "42" in result["answer"], result
    assert "complete: 1 handoff" in err and "Traceback" not in err, err


def test_a_finished_eval_signalled_as_it_exits(tmp_path: Path) -> None:
    suite, report = tmp_path / "suite.toml", tmp_path / "report.json"
    suite.write_text(SUITE)
    proc, go_on = _start(["eval", str(suite), "--report", str(report)], tmp_path)
    code, out, err = _signalled_as_it_exits(proc, go_on)
    assert code == 0, (code, err)  # -15 before the fix
    assert "1/1 cases pass" in out, out
    assert json.loads(report.read_text())["passed"] is True
    assert "mcp-team: report written to" in err and "Traceback" not in err, err


def test_a_stdio_server_signalled_after_its_client_closed_stdin(tmp_path: Path) -> None:
    """What MCP clients do to stop a stdio server: close its stdin, then SIGTERM if it has not exited yet."""
    proc, go_on = _start(["serve"], tmp_path)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(stdio_lines(initialize()).encode())
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    assert answer["result"]["serverInfo"]["name"] == "mcp-team", answer
    proc.stdin.close()
    proc.stdin = None  # closed: not for communicate to flush
    code, _, err = _signalled_as_it_exits(proc, go_on)
    assert code == 0, (code, err)  # -15 before the fix
    assert "Traceback" not in err, err


def test_an_http_server_signalled_again_as_it_exits(tmp_path: Path) -> None:
    """The first SIGTERM stops the server (exit 0, test_http_shutdown.py); a second one, as it exits, is taken as
    any second one is (exit 0, at once), not as the end of a killed server."""
    port = free_port()
    proc, go_on = _start(["serve", "--http", "--port", str(port)], tmp_path)
    assert wait_healthy(f"http://127.0.0.1:{port}", proc), f"the server never served: exit {proc.poll()}"
    proc.send_signal(signal.SIGTERM)
    code, _, err = _signalled_as_it_exits(proc, go_on)
    assert code == 0, (code, err)  # -15 before the fix
    assert "Traceback" not in err, err
