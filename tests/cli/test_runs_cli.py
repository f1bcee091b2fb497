"""`mcp-team runs` as a user types it: options before or after the action and the id, a state directory
this user may only read, and output into a pipe whose reader has gone (`runs show ID | head -1`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import HANG_GUARD, MCP_TEAM, clean_env, cli_here

pytestmark = [pytest.mark.process]


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A state directory with one finished run in it, and the run's id."""
    state = tmp_path_factory.mktemp("state")
    run = subprocess.run([MCP_TEAM, "run", "--quiet", "--state-dir", str(state), "Write a haiku"],
                         env=clean_env(MCP_TEAM_MODEL="offline"), capture_output=True, text=True,
                         timeout=HANG_GUARD)  # fmt: skip
    assert run.returncode == 0, run.stderr
    return state, run.stderr.split("mcp-team: run ", 1)[1].split()[0]


def runs(
    *args: str, prefix: list[str] | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(prefix or []), MCP_TEAM, "runs", *args], env=env or clean_env(), capture_output=True,
                          text=True, timeout=HANG_GUARD)  # fmt: skip


def test_options_go_before_or_after_the_action_and_the_id(kept: tuple[Path, str]) -> None:
    """Where an option goes is the parser's business: the first case in a process, the rest in this one."""
    state, run_id = kept
    for i, args in enumerate(
        (
            ["--json", "--state-dir", str(state), "show", run_id],
            ["show", "--json", run_id, "--state-dir", str(state)],
            ["show", "--state-dir", str(state), "--json", run_id],
            ["--state-dir", str(state), "show", run_id, "--json"],
        )
    ):
        shown = runs(*args) if i == 0 else cli_here("runs", *args)
        assert shown.returncode == 0, (args, shown.stderr)
        assert json.loads(shown.stdout)["status"] == "complete", args
    for args in (["--state-dir", str(state)], ["list", "--limit", "1", "--state-dir", str(state)],
                 ["--limit", "1", "--state-dir", str(state), "list"]):  # fmt: skip
        listed = cli_here("runs", *args)
        assert listed.returncode == 0 and listed.stdout.startswith(f"{run_id}  complete"), (args, listed)
    cancel = cli_here("runs", "cancel", "--state-dir", str(state), run_id)
    assert cancel.returncode == 0 and "had already ended (complete); nothing to cancel" in cancel.stderr, cancel
    missing = cli_here("runs", "show", "--state-dir", str(state))
    assert missing.returncode == 2 and "the following arguments are required: ID" in missing.stderr


def test_a_closed_stdout_ends_the_command_quietly(kept: tuple[Path, str]) -> None:
    """`mcp-team runs show ID | head -1`: the reader is gone before the command writes."""
    state, run_id = kept
    for args in (["show", run_id], ["list"], ["show", "--json", run_id]):
        proc = subprocess.Popen([MCP_TEAM, "runs", "--state-dir", str(state), *args], env=clean_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the only reader: every write to the pipe now fails with EPIPE
        stderr = proc.stderr.read().decode()
        assert proc.wait(timeout=HANG_GUARD) == 141, (args, stderr)  # 128 + SIGPIPE, as `yes | head -1` ends
        assert stderr == "", (args, stderr)


@pytest.fixture
def read_only_state(kept: tuple[Path, str]) -> Iterator[tuple[Path, list[str]]]:
    """A copy of the kept state directory that the `mcp-team` the test starts can read but not write, and the
    prefix that starts it so. Not root: the directory's write bits are cleared. Root writes anywhere, so the
    command runs as the user `nobody` (setpriv), with the copy owned by root and world-readable."""
    state, _ = kept
    with tempfile.TemporaryDirectory() as parent:
        copy = Path(parent) / "state"
        shutil.copytree(state, copy)
        if os.geteuid() != 0:
            os.chmod(copy, 0o555)
            yield copy, []
            os.chmod(copy, 0o755)
            return
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.fail("running as root without setpriv (util-linux): cannot run mcp-team as a user who cannot write")
        prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        for path in (Path(parent), copy):
            os.chmod(path, 0o755)
        os.chmod(copy / "runs.sqlite", 0o644)
        probe = subprocess.run([*prefix, MCP_TEAM, "--help"], capture_output=True, timeout=HANG_GUARD)
        if probe.returncode != 0:
            pytest.fail(f"the user nobody cannot start {MCP_TEAM}: {probe.stderr.decode()[:200]}")
        yield copy, prefix


def test_listing_and_showing_work_on_a_state_directory_this_user_cannot_write(
    kept: tuple[Path, str], read_only_state: tuple[Path, list[str]]
) -> None:
    _, run_id = kept
    state, prefix = read_only_state
    before = sorted(p.name for p in state.iterdir())
    listed = runs("--state-dir", str(state), prefix=prefix)
    assert listed.returncode == 0 and listed.stdout.startswith(f"{run_id}  complete"), listed
    shown = runs("show", "--json", run_id, "--state-dir", str(state), prefix=prefix)
    assert shown.returncode == 0 and json.loads(shown.stdout)["status"] == "complete", shown
    # Cancelling writes: still refused, with the reason.
    cancel = runs("cancel", run_id, "--state-dir", str(state), prefix=prefix)
    assert cancel.returncode == 2 and f"the state directory {state} is not writable" in cancel.stderr, cancel
    assert sorted(p.name for p in state.iterdir()) == before


def test_a_run_whose_process_died_is_shown_as_waiting_for_a_server(tmp_path: Path) -> None:
    # After kill -9 its record still says running (a server resumes it): without a word it looked alive.
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_OFFLINE_LATENCY_MS="30000", MCP_TEAM_STATE_DIR=str(tmp_path))
    proc = subprocess.Popen([MCP_TEAM, "run", "--quiet", "Write a haiku"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stderr is not None
    try:
        line = proc.stderr.readline()  # "mcp-team: run ID (see: ...)": the run is kept and started
        while "mcp-team: run " not in line:
            assert line, "the run never started"
            line = proc.stderr.readline()
        run_id = line.split("mcp-team: run ", 1)[1].split()[0]
        alive = json.loads(cli_here("runs", "list", "--json", **env).stdout)  # the listing is in a process below
        assert [(r["run_id"], r["status"], r["process_gone"]) for r in alive] == [(run_id, "running", False)]
    finally:
        proc.kill()
        proc.wait()
    listed = runs("list", env=env)
    assert (
        "running" in listed.stdout
        and "(no process: resumes from its last finished step once `mcp-team serve` runs on this state directory, "
        "or `mcp-team run` or `serve` starts with --executor-id "
        in listed.stdout
    )
    shown = cli_here("runs", "show", run_id, **env)
    assert (
        "no process runs it now" in shown.stdout
        and "has ended): no process: resumes from its last finished step once `mcp-team serve` runs" in shown.stdout
    )
    assert json.loads(cli_here("runs", "show", run_id, "--json", **env).stdout)["process_gone"] is True
