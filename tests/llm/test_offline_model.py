"""The offline model reads who asks (`member`) and why (`phase`) from the request, never from the prompt; faults
are a wrapper around it (as around any model), aimed at members the same way."""

from __future__ import annotations

import pytest

from mcp_team.llm import Message, ModelError, ModelRequest, ModelSet
from mcp_team.llm.faults import FaultyModel, parse_faults
from mcp_team.llm.offline import OfflineModel

pytestmark = pytest.mark.anyio


def request(member: str, task: str = "Check the draft", **fields: object) -> ModelRequest:
    return ModelRequest(
        system="Do your part.",  # names no one: the member comes from the request alone
        messages=[Message(role="user", content=f"Task:\n{task}")],
        member=member,
        **fields,  # type: ignore[arg-type]
    )


async def test_it_answers_as_the_member_that_asks() -> None:
    review = await OfflineModel().complete(request("reviewer"))
    assert review.text.startswith("VERDICT: PASS")
    notes = await OfflineModel().complete(request("scout", "Find the bees"))
    assert notes.text.startswith("[offline scout] Notes on: Find the bees")


async def test_faults_are_aimed_at_members() -> None:
    model = FaultyModel(OfflineModel(), parse_faults("rate_limit:reviewer:1"))
    await model.complete(request("writer"))  # not aimed at the writer
    with pytest.raises(ModelError, match="HTTP 429 for reviewer"):
        await model.complete(request("reviewer"))
    await model.complete(request("reviewer"))  # once only


@pytest.mark.slow
async def test_a_planner_fault_hits_planning_only_and_supervisor_faults_still_hit_it() -> None:
    from mcp_team import Team

    always = Team(ModelSet.single(FaultyModel(OfflineModel(), parse_faults("server_error:planner"))))
    result = await always.run("Research bees", mode="planned")
    assert result.status == "failed" and "planner's model call failed" in result.answer
    assert (await always.run("Research bees")).status == "complete"  # adaptive mode never plans

    once = Team(ModelSet.single(FaultyModel(OfflineModel(), parse_faults("server_error:planner:1"))))
    assert (await once.run("Research bees", mode="planned")).status == "complete"  # the planner is retried

    supervisor = Team(ModelSet.single(FaultyModel(OfflineModel(), parse_faults("server_error:supervisor"))))
    assert (await supervisor.run("Research bees", mode="planned")).status == "failed"
