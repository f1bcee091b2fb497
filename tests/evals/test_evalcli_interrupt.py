"""An eval stopped by Ctrl-C or SIGTERM (a cancelled CI job) keeps what finished: the table of those runs on
stdout, the --json report with `"interrupted": true` and the cases that did not finish, exit 130. Before, the
runs that had finished were lost with the rest. Real processes: the signal is the subject."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from support import HANG_GUARD, MCP_TEAM, clean_env

pytestmark = [pytest.mark.process]

SUITE = "".join(
    f'[[cases]]\nname = "{name}"\nrequest = "Research {name} and write a haiku"\nexpect.called = ["researcher"]\n\n'
    for name in ("bees", "wasps", "ants")
)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_eval_reports_the_runs_that_finished(tmp_path: Path, sig: signal.Signals) -> None:
    suite, report = tmp_path / "suite.toml", tmp_path / "report.json"
    suite.write_text(SUITE)
    # One case at a time, each call slow: the second case is under way when the first one's line is read.
    env = clean_env(MCP_TEAM_MAX_CONCURRENCY="1", MCP_TEAM_OFFLINE_LATENCY_MS="1000")
    proc = subprocess.Popen([MCP_TEAM, "eval", str(suite), "--model", "offline", "--report", str(report)], env=env,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "✓ bees" in line:
            break
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=HANG_GUARD)
    err = "".join(seen) + err

    assert proc.returncode == 130, err
    assert "interrupted: 1 of 3 run(s) finished" in out and "bees" in out, out
    assert "mcp-team: interrupted: 1 of 3 run(s) finished; the report shows those" in err, err
    assert "Traceback" not in err and "ERROR" not in err, err
    data = json.loads(report.read_text())
    assert data["interrupted"] is True and data["passed"] is False
    assert [c["name"] for c in data["cases"]] == ["bees"] and data["cases"][0]["passed"] is True
    assert data["not_finished"] == ["wasps", "ants"]


def test_an_eval_against_a_single_agent_interrupted_compares_only_what_both_finished(tmp_path: Path) -> None:
    # The single agent's runs come after all the team's: stopped during them, the side-by-side set the team's whole
    # suite against the single agent's first case.
    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE)
    env = clean_env(MCP_TEAM_MAX_CONCURRENCY="1", MCP_TEAM_OFFLINE_LATENCY_MS="300")
    args = [MCP_TEAM, "eval", str(suite), "--model", "offline", "--baseline", "single-agent"]
    proc = subprocess.Popen(args, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "✓ single agent: bees" in line or "✗ single agent: bees" in line:
            break
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=HANG_GUARD)
    err = "".join(seen) + err
    assert proc.returncode == 130, err
    assert "on the 1 run(s) both finished before the interrupt" in " ".join(out.split()), out
    assert "Traceback" not in err, err
