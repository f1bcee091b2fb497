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
