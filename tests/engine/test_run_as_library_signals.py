"""`main(["run", ...])` called by another program on its main thread leaves that program's SIGTERM handler as it
found it, its run interrupted by Ctrl-C or not. A run cancelled by a signal ignores SIGTERM while it is recorded
(cli/run.py), and a program with a handler of its own had SIGTERM ignored for good once `main` returned."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from support import HANG_GUARD, clean_env

pytestmark = [pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"), pytest.mark.process]

HOST = textwrap.dedent(
    """
    import signal, sys
    from mcp_team.cli.main import main

    def mine(signum, frame):
        print("the host's handler", flush=True)

    signal.signal(signal.SIGTERM, mine)
    code = main(["run", "--ephemeral", "--model", "offline", sys.argv[1]])
    print("main returned", code, flush=True)
    print("SIGTERM handler kept:", signal.getsignal(signal.SIGTERM) is mine, flush=True)
    """
)


def test_a_run_interrupted_in_a_host_program_leaves_its_sigterm_handler() -> None:
    env = clean_env(MCP_TEAM_OFFLINE_LATENCY_MS="1000")
    request = "Research the history of the transistor and write a short report."
    proc = subprocess.Popen([sys.executable, "-c", HOST, request], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        assert proc.stderr is not None
        for line in iter(proc.stderr.readline, ""):  # the run is under way (its signal handler set) at a handoff
            if "→ h1" in line:
                break
        else:
            pytest.fail(f"the run never started a handoff: exit {proc.wait(timeout=HANG_GUARD)}")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=HANG_GUARD)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=HANG_GUARD)
    assert "main returned 130" in out, (out, err)
    assert "SIGTERM handler kept: True" in out, (out, err)
