"""The replica settings an operator writes in the environment: a number that is not a finite positive one is
refused in one line naming the variable. `MCP_TEAM_LEASE_SECONDS=nan` (or `inf`) was taken: a lease that never
expires, so the runs of a replica that died were never taken over, and nothing said why."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import cli_here

pytestmark = [pytest.mark.process]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "abc"])
def test_a_lease_that_would_never_expire_is_refused(tmp_path: Path, value: str) -> None:
    done = cli_here("runs", "--state-dir", str(tmp_path), MCP_TEAM_LEASE_SECONDS=value)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"mcp-team: error: MCP_TEAM_LEASE_SECONDS={value!r} is not a positive number; fix or unset it"
    )


@pytest.mark.parametrize("name", ["MCP_TEAM_GLOBAL_MAX_RUNS", "MCP_TEAM_RUNS_PER_REPLICA"])
def test_a_run_cap_that_is_no_whole_number_is_refused(tmp_path: Path, name: str) -> None:
    done = cli_here("runs", "--state-dir", str(tmp_path), **{name: "inf"})
    assert done.returncode == 2, done.stderr
    assert f"{name}='inf' is not a positive whole number" in done.stderr


def test_a_finite_lease_is_taken(tmp_path: Path) -> None:
    done = cli_here("runs", "--state-dir", str(tmp_path), MCP_TEAM_LEASE_SECONDS="2.5")
    assert done.returncode == 0, done.stderr


def test_a_replica_takes_four_runs_per_cpu_at_once_unless_told(tmp_path: Path) -> None:
    """Capped by default (a replica with no cap started every run it was asked for, and a second replica took
    only what it queued): four per CPU this process may use; the variable still decides when set."""
    import os

    from mcp_team.runs.config import resolve

    cpus = len(os.sched_getaffinity(0))
    assert resolve(state_dir=tmp_path, environ={}).runs_per_replica == max(4, 4 * cpus)
    assert resolve(state_dir=tmp_path, environ={"MCP_TEAM_RUNS_PER_REPLICA": "5"}).runs_per_replica == 5
    capped = {"MCP_TEAM_GLOBAL_MAX_RUNS": "1", "MCP_TEAM_RUNS_PER_REPLICA": "5"}
    assert resolve(state_dir=tmp_path, environ={"MCP_TEAM_GLOBAL_MAX_RUNS": "1"}).runs_per_replica == 1
    assert resolve(state_dir=tmp_path, environ=capped).runs_per_replica == 1  # no more than all replicas may run
