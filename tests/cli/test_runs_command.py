"""What an operator of durable runs does from the command line: name a process's executor id (`--executor-id`, as
the messages say), resume the runs of a process that died by taking its id with `mcp-team run` (as the run's
note says), and cancel a run that had already ended (a success, as the `cancel_run` tool's is)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support import HANG_GUARD, MCP_TEAM, clean_env, cli_here

pytestmark = [pytest.mark.process]


def test_a_dead_processs_run_is_resumed_by_mcp_team_run_with_its_executor_id(tmp_path: Path) -> None:
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_STATE_DIR=str(tmp_path))
    # Its first model call takes 30 s: killed in it, the run is left `running` with no process.
    proc = subprocess.Popen([MCP_TEAM, "run", "--quiet", "--executor-id", "box-7", "Write a haiku"],
                            env={**env, "MCP_TEAM_OFFLINE_LATENCY_MS": "30000"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stderr is not None
    try:
        line = proc.stderr.readline()
        while "mcp-team: run " not in line:
            assert line, "the run never started"
            line = proc.stderr.readline()
        run_id = line.split("mcp-team: run ", 1)[1].split()[0]
    finally:
        proc.kill()
        proc.wait()

    # The note says what resumes it, naming the id to take (it said only `mcp-team serve`).
    note = "`mcp-team run` or `serve` starts with --executor-id box-7"
    shown = cli_here("runs", "show", run_id, MCP_TEAM_STATE_DIR=str(tmp_path))
    assert shown.returncode == 0 and "(its process, box-7, has ended)" in shown.stdout, shown
    assert note in shown.stdout, shown.stdout
    assert note in cli_here("runs", MCP_TEAM_STATE_DIR=str(tmp_path)).stdout
    # And in JSON, for a script: which process, and that it is gone (it had only `process_gone`).
    data = json.loads(cli_here("runs", "show", "--json", run_id, MCP_TEAM_STATE_DIR=str(tmp_path)).stdout)
    assert (data["executor_id"], data["process_gone"]) == ("box-7", True), data
    listed = json.loads(cli_here("runs", "--json", MCP_TEAM_STATE_DIR=str(tmp_path)).stdout)
    assert [(r["run_id"], r["executor_id"]) for r in listed] == [(run_id, "box-7")], listed

    # Doing what it says resumes it. This request takes four rounds of model calls more than the resumed one (four
    # specialists one after the other, the analyst calling a tool), at 1 s a call: the resumed run, picked up from
    # DBOS's queue within its poll (a second), ends first, so this command sees it end. (One round more was too
    # little: a clean-clone CI run saw the resumed run still running.)
    longer = "Research the history of the transistor, compute 12*(3+4)/2, write a short report, then review it."
    again = subprocess.run([MCP_TEAM, "run", "--quiet", "--executor-id", "box-7", longer],
                           env={**env, "MCP_TEAM_OFFLINE_LATENCY_MS": "1000"}, capture_output=True, text=True,
                           timeout=HANG_GUARD)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert f"also resuming 1 unfinished run(s) an earlier process left: {run_id}" in again.stderr, again.stderr
    resumed = json.loads(cli_here("runs", "show", "--json", run_id, MCP_TEAM_STATE_DIR=str(tmp_path)).stdout)
    assert (resumed["status"], resumed["process_gone"]) == ("complete", False), (resumed, again.stderr)


def test_an_executor_id_given_as_a_flag_is_checked_as_the_messages_say(tmp_path: Path) -> None:
    """The messages about ids name `--executor-id`: the flag exists on `run` and `serve`, and is checked."""
    bad = cli_here("run", "--executor-id", "no good", "--model", "offline", "hi", MCP_TEAM_STATE_DIR=str(tmp_path))
    assert bad.returncode == 2, bad
    assert bad.stderr == (
        "mcp-team: error: executor id 'no good' is not valid: use up to 100 letters, digits, '_', '.', ':' or '-', "
        "starting with a letter or digit (--executor-id / MCP_TEAM_EXECUTOR_ID)\n"
    )
    assert not list(tmp_path.iterdir())  # refused before anything was kept
    helped = subprocess.run([MCP_TEAM, "serve", "--help"], env=clean_env(), capture_output=True, text=True,
                            timeout=HANG_GUARD)  # fmt: skip
    assert helped.returncode == 0 and "--executor-id ID" in helped.stdout, helped


def test_cancelling_a_run_that_had_already_ended_succeeds_and_says_so(tmp_path: Path) -> None:
    """Idempotent, as `cancel_run` returns the finished record: `runs cancel ID || alert` in a script must not
    alert for a run that ended before the cancel came (it exited 2, as for a wrong command line)."""
    run = subprocess.run([MCP_TEAM, "run", "--quiet", "Write a haiku"],
                         env=clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_STATE_DIR=str(tmp_path)),
                         capture_output=True, text=True, timeout=HANG_GUARD)  # fmt: skip
    assert run.returncode == 0, run.stderr
    run_id = run.stderr.split("mcp-team: run ", 1)[1].split()[0]
    for _ in range(2):  # and again: nothing changes
        cancel = cli_here("runs", "cancel", run_id, MCP_TEAM_STATE_DIR=str(tmp_path))
        assert (cancel.returncode, cancel.stdout) == (0, ""), cancel
        assert cancel.stderr == f"mcp-team: run {run_id} had already ended (complete); nothing to cancel\n"
    shown = json.loads(cli_here("runs", "show", "--json", run_id, MCP_TEAM_STATE_DIR=str(tmp_path)).stdout)
    assert shown["status"] == "complete" and shown["reason"] is None, shown
    missing = cli_here("runs", "cancel", "nope", MCP_TEAM_STATE_DIR=str(tmp_path))
    assert missing.returncode == 1 and "no run 'nope'" in missing.stderr, missing  # a wrong id still fails
