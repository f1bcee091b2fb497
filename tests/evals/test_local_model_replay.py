"""The real small local model's own text, on every test run (issue 33): a suite recorded once on
Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) on llama.cpp's `llama-server`, team and single agent, replayed through
`mcp-team eval --model replay:DIR`.

That model writes every tool call as text (fenced, bare, in tags, after prose); the replay runs the engine on
what it wrote, so a change in how such text is read shows up here as a divergence or a changed figure.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_team.handoffs.planner import PLAN_TOOL
from mcp_team.handoffs.supervisor import handoff_tool
from mcp_team.handoffs.synthesis import FINALIZE_TOOL
from mcp_team.llm.answers import not_an_answer
from mcp_team.specialists import DEFAULT_TEAM
from support import cli_here

pytestmark = [pytest.mark.process]

HERE = Path(__file__).parents[1] / "recordings" / "qwen-1.5b"
SHAPES = [*(handoff_tool(s) for s in DEFAULT_TEAM), FINALIZE_TOOL, PLAN_TOOL]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("replay") / "report.json"
    proc = cli_here(
        "eval", str(HERE / "suite.toml"), "--model", f"replay:{HERE}", "--baseline", "single-agent",
        "--quiet", "--report", str(out), COLUMNS="200",
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr  # 1: some case failed its checks, as it did when recorded
    data: dict[str, Any] = json.loads(out.read_text())
    data["stdout"] = proc.stdout
    return data


def runs(report: dict[str, Any], which: str) -> list[tuple[str, dict[str, Any]]]:
    cases = report["cases"] if which == "team" else report["baseline"]["cases"]
    return [(c["request"], r) for c in cases for r in c["runs"]]


def test_every_recorded_case_replays(report: dict[str, Any]) -> None:
    assert len(report["cases"]) >= 20
    for which in ("team", "single"):
        errors = [r["error"] for _request, r in runs(report, which) if r["error"]]
        assert not errors, errors  # no divergence, no missing recording


@pytest.mark.parametrize("which", ["team", "single"])
def test_no_run_ends_complete_with_a_tool_call_tool_json_an_empty_or_echoed_answer(
    report: dict[str, Any], which: str
) -> None:
    for request, run in runs(report, which):
        if run["status"] != "complete":
            continue
        no = not_an_answer(run["answer"], request, SHAPES)
        assert no is None, (request, no.why if no else "", run["answer"][:300])


def test_the_replay_gives_the_figures_the_recorded_eval_printed(report: dict[str, Any]) -> None:
    """The figures of the eval as it ran on the model (report.json, written by `--json` then): the same runs,
    routing and answers; the tokens and calls of every run. Only wall time differs."""
    recorded = json.loads((HERE / "report.json").read_text())
    for ours, theirs in ((report, recorded), (report["baseline"], recorded["baseline"])):
        for key in ("runs", "model_calls", "tokens", "pass_rate", "answer_pass_rate", "routing_rate", "errors"):
            assert ours["totals"][key] == theirs["totals"][key], (key, ours["totals"], theirs["totals"])
    verdict = next(line for line in report["stdout"].splitlines() if line.startswith("Verdict on replay:"))
    team = report["totals"]
    assert f"answers pass {team['answer_pass_rate']:.0%} (team, routing {team['routing_rate']:.0%} right)" in verdict


def test_the_recorded_model_wrote_its_calls_as_text_and_they_ran(report: dict[str, Any]) -> None:
    recording = (HERE / "calc-product.jsonl").read_text().splitlines()
    result = json.loads(recording[-1])
    assert result["type"] == "result" and result["handoffs"]
    assert any(h.get("text_call") for h in result["handoffs"])  # read from the model's text, and run
    exchanges = [json.loads(line) for line in recording if '"exchange"' in line[:30]]
    assert not any(e["response"].get("stop_reason") == "tool_use" for e in exchanges if e.get("response"))
