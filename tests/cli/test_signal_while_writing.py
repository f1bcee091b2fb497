"""A SIGTERM while `run` or `eval` writes its answer or report, the work done, to a reader slower than the command
(a pipe into another program) leaves the output whole and the exit status the work's own. With PYTHONUNBUFFERED
set (as Docker images often set it; the tests set it too) stdout writes straight to the pipe, and the signal's
handler cut the write short: the rest was lost, the answer cut off mid-JSON, exit 0.

Not a race: the command's stdout is a pipe of one page (4096 bytes) that the test reads only after the signal, and
the output is longer, so once anything is in the pipe the command is in the middle of writing it, and stays there."""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import HANG_GUARD, MCP_TEAM, clean_env

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="sets a pipe's size (F_SETPIPE_SZ): Linux only"),
    pytest.mark.process,
]

PIPE_BYTES = 4096  # the smallest a pipe can be: one page
HELD = "the output fits in the pipe: the command was never held writing it"
REQUEST = "Research the history of the transistor, compute 12*(3+4)/2 and write a short report."


def _signalled_while_writing(args: list[str], tmp_path: Path) -> tuple[int, str, str]:
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_STATE_DIR=str(tmp_path / "state"))
    with open(read_end, "rb") as out:
        try:
            proc = subprocess.Popen([MCP_TEAM, *args], env=env, stdout=write_end, stderr=subprocess.PIPE)
        finally:
            os.close(write_end)
        try:
            ready, _, _ = select.select([out], [], [], HANG_GUARD)
            assert ready, "hang guard: the command wrote nothing"
            proc.send_signal(signal.SIGTERM)
            _wait_delivered(proc.pid, signal.SIGTERM)  # read after: the write must meet the signal, not the reader
            written = out.read()
            _, err = proc.communicate(timeout=HANG_GUARD)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=HANG_GUARD)
    return proc.returncode, written.decode(), err.decode()


def _wait_delivered(pid: int, sig: int) -> None:
    """Until `sig` no longer waits for the process (/proc/PID/status): taken by its handler, which a write it was
    blocked in returns from first, or discarded when sent, if ignored."""
    deadline = time.monotonic() + HANG_GUARD  # a guard against a hang only
    while True:
        status = Path(f"/proc/{pid}/status").read_text()
        pending = 0
        for line in status.splitlines():
            if line.startswith(("SigPnd:", "ShdPnd:")):
                pending |= int(line.split()[1], 16)
        if not pending >> (sig - 1) & 1:
            return
        assert time.monotonic() < deadline, "hang guard: the signal was never taken"
        time.sleep(0.001)


def test_a_run_answer_written_whole_through_a_sigterm(tmp_path: Path) -> None:
    code, out, err = _signalled_while_writing(["run", "--json", REQUEST], tmp_path)
    assert code == 0, (code, err)
    assert json.loads(out)["status"] == "complete"  # JSONDecodeError before the fix: cut after the pipe's 4096 bytes
    assert "Traceback" not in err, err
    assert len(out) > PIPE_BYTES, HELD


def test_an_eval_table_written_whole_through_a_sigterm(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    names = [f"case-{i:02}" for i in range(60)]  # a table longer than the pipe holds
    suite.write_text("".join(f'[[cases]]\nname = "{n}"\nrequest = "compute {i}+1"\n\n' for i, n in enumerate(names)))
    code, out, err = _signalled_while_writing(["eval", str(suite)], tmp_path)
    assert code == 0, (code, err)
    assert all(name in out for name in names), out[-500:]  # the last rows were lost before the fix
    # The table's title names the suite's path, and the table wraps it to its width: read across the wraps.
    assert "60/60 cases pass" in " ".join(out.split()) and "Traceback" not in err, err
    assert len(out) > PIPE_BYTES, HELD
