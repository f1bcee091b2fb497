"""A judge for conflicting results (issue 13): once per conflict, and the answer follows its verdict."""

from __future__ import annotations

import pytest
from mcp import Client

from mcp_team.handoffs import RunResult, RunSettings, Team
from mcp_team.llm import ModelSet
from mcp_team.llm.faults import FaultyModel, parse_faults
from mcp_team.llm.offline import OfflineModel
from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server
from mcp_team.specialists import DEFAULT_TEAM, Specialist
from mcp_team.teamfile.loading import TeamSpec

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
REQUEST = "Research bees, calculate 2+2 and write a report"
JUDGE = Specialist(name="judge", description="Rules on conflicting results.", system_prompt="Decide who is right.")


@pytest.mark.parametrize("mode", ["planned", "adaptive"])
async def test_the_judge_rules_once_per_conflict_and_the_answer_follows_it(mode: str, spans) -> None:
    settings = ModelSettings(model="offline", faults="conflict:supervisor:1")
    team = TeamSpec.of([*DEFAULT_TEAM, JUDGE], RunSettings(judge="judge", mode=mode))
    async with Client(build_server(settings, team), mode="legacy") as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("run_team", {"request": REQUEST})
    run = RunResult.model_validate(result.structured_content)

    assert "judge" in tools  # a normal member, with its own tool
    assert "judge" not in [h.target for h in run.handoffs]  # never handed work: it only rules
    (ruling,) = run.conflicts
    assert [p.specialist for p in ruling.conflict.positions] == ["researcher", "analyst"]
    assert ruling.status == "completed" and ruling.verdict.startswith("DECISION: researcher")
    assert "DECISION: researcher" in run.answer and "judge" in run.answer.lower()
    assert run.usage.by_specialist["judge"].total_tokens > 0
    (span,) = spans.named("judge conflict-1")
    assert spans.attr(span, "mcp_team.judge.specialists") == "researcher, analyst"
    assert [s.name for s in spans.children(span)] == ["invoke_agent judge"]


async def test_without_a_judge_the_synthesis_is_not_asked_for_conflicts() -> None:
    # The smallest team has no judge: the conflict fault finds no conflicts field to fill.
    model = FaultyModel(OfflineModel(), parse_faults("conflict"))
    run = await Team(ModelSet.single(model), settings=RunSettings(mode="planned")).run(REQUEST)
    assert run.status == "complete" and run.conflicts == []
