"""Faults are a wrapper around any model (`llm.faults`): every backend can be faulted, and every kind drives
its path in both modes."""

from __future__ import annotations

import json

import pytest

from mcp_team import Team
from mcp_team.handoffs import RunSettings
from mcp_team.llm import Message, ModelError, ModelRequest, ModelSet, ToolDefinition
from mcp_team.llm.faults import FaultyModel, parse_faults, with_faults
from mcp_team.llm.offline import OfflineModel
from mcp_team.llm.scripted import ScriptedModel, text, tool_calls
from support import run_cli
from support.fake_api import offline_brain
from support.fake_messages_api import SECRET, FakeMessagesAPI

pytestmark = pytest.mark.anyio

REQUEST = "Research bees, calculate 2+2 and write a report, then review it"


def faulty_team(spec: str, **settings: object) -> Team:
    return Team(with_faults(ModelSet.single(OfflineModel()), parse_faults(spec)), settings=RunSettings(**settings))  # type: ignore[arg-type]


def act(*tools: str) -> ModelRequest:
    return ModelRequest(
        system="Supervise.",
        messages=[Message(role="user", content="Find bees")],
        tools=[ToolDefinition(name=t, description="", input_schema={"type": "object"}) for t in tools],
        phase="act",
        member="supervisor",
    )


async def test_a_scripted_model_is_faulted_like_any_other() -> None:
    inner = ScriptedModel([tool_calls(("handoff_to_researcher", {"task": "find"})), text("done")])
    model = FaultyModel(inner, parse_faults("unknown_specialist:supervisor:1,rate_limit:supervisor:1"))

    with pytest.raises(ModelError, match="HTTP 429 for supervisor"):
        await model.complete(act("handoff_to_researcher", "finalize"))
    assert inner.requests == []  # an error fault never reaches the model
    turn = await model.complete(act("handoff_to_researcher", "finalize"))
    assert [u.name for u in turn.tool_uses] == ["handoff_to_researcher", "handoff_to_ghost"]
    final = await model.complete(act("handoff_to_researcher", "finalize"))
    assert final.text == "done" and len(inner.requests) == 2  # both faults are used up


async def test_a_fault_counts_only_when_it_changed_something() -> None:
    # The first turn only finalizes: nothing to add a ghost to, so the one use waits for a turn with handoffs.
    inner = ScriptedModel(
        [tool_calls(("finalize", {"answer": "x"})), tool_calls(("handoff_to_researcher", {"task": "t"}))]
    )
    model = FaultyModel(inner, parse_faults("unknown_specialist:supervisor:1"))
    assert [u.name for u in (await model.complete(act("finalize"))).tool_uses] == ["finalize"]
    assert [u.name for u in (await model.complete(act("finalize"))).tool_uses][-1] == "handoff_to_ghost"


@pytest.mark.parametrize(
    ("fault", "problem"),
    [
        ("unknown_specialist", "names unknown specialist 'ghost'"),
        ("malformed_tool_call", "tasks: Input should be a valid list"),
        ("repeat_handoff", "task id 't1' is used more than once"),
    ],
)
async def test_supervisor_faults_send_the_plan_back_for_repair(fault: str, problem: str) -> None:
    result = await faulty_team(f"{fault}:supervisor:1").run(REQUEST, mode="planned")
    assert result.status == "complete"
    [failure] = result.failures
    assert (failure.kind, failure.recovered) == ("invalid_plan", True) and problem in failure.reason
    assert [h.target for h in result.handoffs] == ["researcher", "analyst", "writer", "reviewer"]


async def test_a_plan_fault_that_never_stops_fails_the_run_naming_the_problem() -> None:
    result = await faulty_team("unknown_specialist:planner").run(REQUEST, mode="planned")
    assert result.status == "failed" and not result.handoffs
    assert "after one repair round" in result.answer and "ghost" in result.answer


async def test_revise_turns_a_pass_verdict_into_revise_only_for_verdicts() -> None:
    result = await faulty_team("revise", max_revisions=1).run("Write a short report on bees and review it")
    reviews = [h for h in result.handoffs if h.target == "reviewer" and h.status == "completed"]
    assert reviews and all(h.verdict is not None and h.verdict.verdict == "REVISE" for h in reviews)
    writers = [h for h in result.handoffs if h.target == "writer"]
    assert "VERDICT" not in writers[0].output  # a draft has no verdict to turn


@pytest.mark.process
def test_every_backend_can_be_faulted_through_the_cli() -> None:
    """`--fault` with the anthropic backend: the 429 never reaches the API, the retry does."""
    with FakeMessagesAPI(brain=offline_brain) as api:
        env = {"ANTHROPIC_API_KEY": SECRET, "ANTHROPIC_BASE_URL": api.base_url}
        proc = run_cli("run", "--json", "--fault", "rate_limit:researcher:1", "Research bees", env=env)
        bodies = list(api.requests)

    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert [(f["kind"], f["recovered"]) for f in result["failures"]] == [("rate_limited", True)]
    assert [(h["id"], h["status"]) for h in result["handoffs"]] == [("h1", "failed"), ("h1.2", "completed")]
    assert result["usage"]["model_calls"] == len(bodies) + 1  # the faulted call was counted, never sent
    assert "offline backend" not in proc.stderr


async def test_a_fault_injected_failure_costs_null_where_the_price_is_unknown_and_zero_where_it_is_known() -> None:
    # A failed handoff's record stored 0.0 while its completed siblings on the same (unpriced) model stored null:
    # unknown is not free. On a priced model a failed request costs nothing: the API bills none.
    unpriced = await faulty_team("server_error:coder", max_retries=0).run("Write a python function for 2+2")
    priced_model = FaultyModel(_Priced(), parse_faults("server_error:coder"))
    priced = await Team(ModelSet.single(priced_model), settings=RunSettings(max_retries=0)).run(
        "Write a python function for 2+2"
    )
    for result, cost in ((unpriced, None), (priced, 0.0)):
        (failed,) = [h for h in result.handoffs if h.status == "failed"]
        assert failed.error_type == "server_error" and failed.usage.cost_usd == cost, failed.usage


class _Priced(OfflineModel):
    """The offline model, as if it were gpt-4o-mini on OpenAI's own API (priced)."""

    def __init__(self) -> None:
        super().__init__(name="gpt-4o-mini", provider="openai")
