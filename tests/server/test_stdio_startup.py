"""What a client's user sees when `mcp-team serve` is started with a setting it cannot use: the server refuses to
start with one line naming the setting (exit 2), rather than starting and failing every call."""

from __future__ import annotations

import subprocess

import pytest

from support import HANG_GUARD, MCP_TEAM, clean_env, initialize, stdio_lines

pytestmark = [pytest.mark.process]


@pytest.mark.parametrize("how", ["flag", "env"])
def test_serve_refuses_a_fault_that_does_not_parse(how: str) -> None:
    args, env = (["--fault", "ratelimit"], {}) if how == "flag" else ([], {"MCP_TEAM_FAULTS": "ratelimit"})
    proc = subprocess.run(
        [MCP_TEAM, "serve", *args],
        input=stdio_lines(initialize()),  # a client's first line: without the check the server answered it
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        env=clean_env(MCP_TEAM_MODEL="offline", **env),
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = [line for line in proc.stderr.splitlines() if line.startswith("mcp-team: error:")]
    assert lines == [lines[0]] and "--fault / MCP_TEAM_FAULTS: bad fault 'ratelimit'" in lines[0], proc.stderr
    assert "rate_limit" in lines[0] and "Traceback" not in proc.stderr
