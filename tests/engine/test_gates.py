"""Quality gates (issue 13): a member's output is checked before anyone reads it, and sent back like REVISE."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from mcp_team.handoffs import RunSettings, Team
from mcp_team.handoffs.gates import Gates
from mcp_team.llm import ModelSet
from mcp_team.llm.faults import FaultyModel, parse_faults
from mcp_team.llm.offline import OfflineModel
from support import HANG_GUARD, MCP_TEAM, clean_env

pytestmark = [pytest.mark.process]

REQUEST = "Research bees and write a short report"


def gated_team(gates: Gates, **settings: object) -> Team:
    return Team(ModelSet.single(OfflineModel()), settings=RunSettings(gates={"writer": gates}, **settings))  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_failed_gate_sends_the_work_back_and_the_revision_that_passes_stands(spans) -> None:
    # The offline writer quotes its context; only a revision has "Your previous answer" in it.
    result = await gated_team(Gates(required_patterns=["previous answer"])).run(REQUEST)

    writers = [h for h in result.handoffs if h.target == "writer"]
    assert [(h.id, h.status) for h in writers] == [("h2", "completed"), ("h2.2", "completed")]
    assert writers[0].verdict is not None and writers[0].verdict.verdict == "REVISE"
    assert "required_patterns" in writers[0].verdict.reasons[0]
    assert writers[1].retry_of == "h2" and "did not pass the team's quality gates" in writers[1].task
    assert result.status == "complete", result.answer
    gate_spans = spans.named("quality_gate writer")
    assert len(gate_spans) == 2 and not gate_spans[1].status.description


@pytest.mark.anyio
async def test_a_gate_that_never_passes_uses_the_revision_cap_and_the_run_is_partial() -> None:
    result = await gated_team(Gates(required_sections=["Sources"], max_words=5), max_revisions=1).run(REQUEST)

    writers = [h for h in result.handoffs if h.target == "writer"]
    assert len(writers) == 2  # the first draft and one revision: the cap
    assert result.status == "partial"
    (failure,) = [f for f in result.failures if not f.recovered]
    assert failure.kind == "review_not_passed" and failure.specialist == "writer"
    assert "the review did not pass" in result.answer and "'Sources' section" in result.answer
    assert "max_words" in result.answer


def test_gates_check_each_rule() -> None:
    gates = Gates(max_words=8, required_sections=["Sources"], required_patterns=[r"\d{4}"], min_sources=2)
    assert gates.check("Bees date from 1947.\n## Sources\n[1] https://example.com/a") == []
    problems = gates.check("Bees are many things, far too many words here.")
    assert [p.split(":")[0] for p in problems] == [
        "quality gate max_words",
        "quality gate required_sections",
        "quality gate required_patterns",
        "quality gate min_sources",
    ]


def test_the_team_file_declares_gates_and_a_bad_pattern_is_named(tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    subprocess.run([MCP_TEAM, "init", str(team)], check=True, env=clean_env(), timeout=HANG_GUARD)
    text = team.read_text()
    writer = text.index('name = "writer"')
    head, tail = text[:writer], text[writer:]
    end = tail.index("\n[[specialists]]")
    team.write_text(head + tail[:end] + '\ngates = { required_sections = ["Sources"] }\n' + tail[end:])
    run = subprocess.run(
        [MCP_TEAM, "run", "--json", "--team", str(team), REQUEST],
        capture_output=True, text=True, timeout=HANG_GUARD, env=clean_env(MCP_TEAM_MODEL="offline"),
    )  # fmt: skip
    assert run.returncode == 3, run.stderr  # partial
    result = json.loads(run.stdout)
    assert [f["kind"] for f in result["failures"] if not f["recovered"]] == ["review_not_passed"]

    team.write_text(team.read_text().replace('required_sections = ["Sources"]', 'required_patterns = ["("]'))
    check = subprocess.run(
        [MCP_TEAM, "check", "--team", str(team)], capture_output=True, text=True, timeout=HANG_GUARD, env=clean_env()
    )
    assert check.returncode == 2
    assert "gates.required_patterns" in check.stderr + check.stdout and "not a valid regular expression" in (
        check.stderr + check.stdout
    )


@pytest.mark.anyio
async def test_the_reviewer_and_the_gate_paths_count_and_word_revisions_alike() -> None:
    # The same case both ways: a review that never passes, with two revisions allowed. The reviewer's path said
    # "after 3 revision(s) (cap 2)" (it counted the third REVISE, which no revision answered), the gate's "after 2
    # revision(s)"; both made two.
    by_reviewer = await Team(
        ModelSet.single(FaultyModel(OfflineModel(), parse_faults("revise:reviewer"))),
        settings=RunSettings(max_revisions=2),
    ).run("Write a short report on bees and review it")
    by_gate = await gated_team(Gates(required_sections=["Sources"]), max_revisions=2).run(REQUEST)
    for result in (by_reviewer, by_gate):
        (failure,) = [f for f in result.failures if f.kind == "review_not_passed"]
        assert "the last verdict was REVISE after 2 revisions (max_revisions = 2)" in failure.reason, failure.reason
    reviews = [h for h in by_reviewer.handoffs if h.target == "reviewer" and h.verdict is not None]
    assert len(reviews) == 3 and len([h for h in by_reviewer.handoffs if h.target == "writer"]) == 3
