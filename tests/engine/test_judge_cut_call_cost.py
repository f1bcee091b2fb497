"""A judge's model call cut off once sent (the run cancelled, the call timed out) is in its ruling's usage, as
an unknown cost: the API bills a request it has started. The ruling summed only the calls that answered ($0,
and a cancelled judge's ruling was not kept at all), so the run's cost was understated, not unknown. Through the
library API, the OpenAI-compatible backend on the real `openai` SDK against the fake Chat Completions server
over a real socket (priced as gpt-4o-mini), as tests/llm/test_cut_call_cost.py does for handoffs."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from mcp_team.handoffs import RunResult, RunSettings, Team
from mcp_team.llm import ModelRequest, ModelSet, TextBlock
from mcp_team.llm.faults import FaultyModel, parse_faults
from mcp_team.llm.openai import OpenAIModel
from mcp_team.specialists import DEFAULT_TEAM, Specialist
from support import HANG_GUARD
from support.fake_api import Stalling
from support.fake_openai_api import FakeOpenAIAPI

pytestmark = pytest.mark.anyio

JUDGE = Specialist(name="judge", description="Rules on conflicting results.", system_prompt="Decide who is right.")
JUDGE_TASK = "DECISION: <specialist name or neither>"  # in the task `judge.rule` writes


def judge_held(request: ModelRequest) -> bool:
    """The judge's call."""
    return JUDGE_TASK in "".join(b.text for m in request.messages for b in m.blocks if isinstance(b, TextBlock))


@pytest.fixture
def stalling() -> Iterator[tuple[FakeOpenAIAPI, Stalling]]:
    """The offline model as the fake API's brain, except that the judge's call is held."""
    brain = Stalling(judge_held)
    with FakeOpenAIAPI(brain=brain) as server, brain:  # released first: the server's threads wait on it
        yield server, brain


def team(api: FakeOpenAIAPI, call_timeout: float = 120.0) -> Team:
    """The default team and a judge on gpt-4o-mini; the synthesis reports a conflict, so the judge is asked."""
    gpt = OpenAIModel("gpt-4o-mini", api_key="sk-test", base_url=api.base_url, max_retries=0, price_provider="openai")
    models = ModelSet.single(FaultyModel(gpt, parse_faults("conflict:supervisor:1")))
    return Team(models, [*DEFAULT_TEAM, JUDGE], RunSettings(judge="judge", mode="planned", call_timeout=call_timeout))


def assert_judge_cost_unknown(result: RunResult, status: str = "failed") -> None:
    (ruling,) = result.conflicts
    assert ruling.judge == "judge" and ruling.status == status, ruling
    assert ruling.usage.cost_usd is None, ruling.usage  # not the $0 of the calls that answered
    assert result.usage.by_specialist["judge"].cost_usd is None, result.usage
    assert result.usage.total.cost_usd is None
    supervisor = result.usage.by_specialist["supervisor"]
    assert supervisor.cost_usd is not None and supervisor.cost_usd > 0  # the calls that answered: priced


async def test_a_run_cancelled_while_the_judge_rules_reports_its_cost_unknown(
    stalling: tuple[FakeOpenAIAPI, Stalling],
) -> None:
    api, brain = stalling
    ended: list[RunResult] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            await team(api).run("Research bees, calculate 2+2 and write a report", on_finish=ended.append)

        tg.start_soon(run)
        await anyio.to_thread.run_sync(brain.arrived.wait, HANG_GUARD)  # the judge's call is on the wire
        tg.cancel_scope.cancel()
    [result] = ended
    assert result.status == "cancelled"
    assert_judge_cost_unknown(result, status="cancelled")  # not "failed": nothing went wrong
    assert "cancelled" in result.conflicts[0].verdict


@pytest.mark.slow
async def test_a_judge_whose_call_timed_out_has_an_unknown_cost(stalling: tuple[FakeOpenAIAPI, Stalling]) -> None:
    api, _brain = stalling
    # 5 s: the judge's held call always times out; the others (the offline model, on 127.0.0.1) answer long
    # before, and one that did not would be retried.
    result = await team(api, call_timeout=5).run("Research bees, calculate 2+2 and write a report")
    assert result.conflicts[0].verdict.startswith("the judge failed"), result.conflicts
    assert_judge_cost_unknown(result)
