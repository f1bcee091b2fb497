"""The single-agent baseline is fair (its own prompt, no reviewer's format) and `eval` sets the team against it
case by case, with a verdict line (issue 33)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_team.evals.baseline import single_agent
from mcp_team.specialists import DEFAULT_TEAM
from mcp_team.specialists.verdict import FORMAT_INSTRUCTIONS
from support import cli_here

pytestmark = [pytest.mark.process]

SUITE = """\
name = "two cases"

[[cases]]
name = "product"
request = "Calculate 6*7."
expect = { called = ["analyst"], only = true, contains = ["42"] }

[[cases]]
name = "haiku"
request = "Write a haiku about bees."
expect = { called = ["writer"], only = true }
"""


def test_the_single_agents_prompt_is_its_own_without_the_reviewers_format() -> None:
    agent = single_agent(DEFAULT_TEAM)
    assert "VERDICT" not in agent.instructions and FORMAT_INSTRUCTIONS not in agent.instructions
    assert not agent.returns_verdict
    for member in DEFAULT_TEAM:
        assert member.system_prompt not in agent.system_prompt  # no member's prompt, only what each does
        if not member.returns_verdict:
            assert member.description in agent.system_prompt
    assert {t.name for t in agent.tools} == {t.name for s in DEFAULT_TEAM for t in s.tools}


def test_eval_prints_each_case_side_by_side_and_a_verdict(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE)
    report = tmp_path / "report.json"
    proc = cli_here(
        "eval", str(suite), "--model", "offline", "--baseline", "single-agent", "--quiet", "--report", str(report),
        COLUMNS="200",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Per case: the team and a single agent" in out
    paired = [line for line in out.splitlines() if "✓" in line]  # the rows of the per-case table
    assert len(paired) == 2 and "✓ analyst" in paired[0] and "✓ writer" in paired[1]  # the team's routing, right
    assert all(line.count("pass") == 2 for line in paired)  # the team's answer and the single agent's
    verdict = next(line for line in out.splitlines() if line.startswith("Verdict on offline:"))
    assert "answers pass 100% (team, routing 100% right) against 100% (single agent)" in verdict
    assert "the tokens" in verdict and "the wall time" in verdict
    data = json.loads(report.read_text())
    assert data["totals"]["routing_rate"] == 1.0 and data["baseline"]["totals"]["routing_rate"] is None
    single_answers = [r["answer"] for c in data["baseline"]["cases"] for r in c["runs"]]
    assert single_answers and not any(a.lstrip().startswith("VERDICT") for a in single_answers)
