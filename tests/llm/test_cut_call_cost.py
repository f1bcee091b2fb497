"""A model call cut off once sent (the run cancelled, the call timed out) cost something nobody was told: the
API bills a request it has started. Its spend is unknown, so every sum it is in says unknown (null), not the
smaller figure of the calls that answered. Through the library API, with the OpenAI-compatible backend on the
real `openai` SDK against the fake Chat Completions server over a real socket (priced as gpt-4o-mini)."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from mcp_team.handoffs import RunResult, Team
from mcp_team.llm import SPECIALIST, Message, ModelError, ModelRequest, ModelSet, Usage, chat
from mcp_team.llm.call import CallNeed, Granted
from mcp_team.llm.openai import OpenAIModel
from support import HANG_GUARD
from support.fake_api import Stalling
from support.fake_openai_api import FakeOpenAIAPI

pytestmark = pytest.mark.anyio


def specialists_held(request: ModelRequest) -> bool:
    """A specialist's call, not the supervisor's turn."""
    return not any(tool.name.startswith("handoff_to_") for tool in request.tools)


@pytest.fixture
def stalling() -> Iterator[tuple[FakeOpenAIAPI, Stalling]]:
    """The offline model as the fake API's brain, except that a specialist's call is held."""
    brain = Stalling(specialists_held)
    with FakeOpenAIAPI(brain=brain) as server, brain:  # released first: the server's threads wait on it
        yield server, brain


def gpt(api: FakeOpenAIAPI) -> OpenAIModel:
    return OpenAIModel("gpt-4o-mini", api_key="sk-test", base_url=api.base_url, max_retries=0, price_provider="openai")


async def test_a_run_cancelled_during_a_call_reports_its_cost_unknown(stalling: tuple[FakeOpenAIAPI, Stalling]) -> None:
    api, brain = stalling
    ended: list[RunResult] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            await Team(ModelSet.single(gpt(api))).run("Research bees", on_finish=ended.append)

        tg.start_soon(run)
        await anyio.to_thread.run_sync(brain.arrived.wait, HANG_GUARD)  # a specialist's call is on the wire
        tg.cancel_scope.cancel()
    [result] = ended
    assert result.status == "cancelled"
    supervisor = result.usage.by_specialist["supervisor"]
    assert supervisor.cost_usd is not None and supervisor.cost_usd > 0  # its answered calls: priced
    cut = [h for h in result.handoffs if h.status == "cancelled"]
    assert cut and all(h.usage.cost_usd is None for h in cut), [h.usage for h in result.handoffs]
    assert result.usage.total.cost_usd is None  # not the supervisor's figure alone, as it was


async def test_a_timed_out_call_is_charged_an_unknown_spend(stalling: tuple[FakeOpenAIAPI, Stalling]) -> None:
    api, _brain = stalling
    charged: list[Usage] = []

    class Meter:
        async def before_call(self, need: CallNeed) -> Granted:
            return Granted(need.max_tokens)

        def after_call(self, usage: Usage) -> None:
            charged.append(usage)

        def used_fallback(self, note: str) -> None:
            pass

        async def waiting(self, limit: str, seconds: float) -> None:
            pass

        def note(self, topic: str, text: str) -> None:
            pass

    request = ModelRequest(system="You research.", messages=[Message(role="user", content="Research bees")])
    with pytest.raises(ModelError) as failed:
        await chat(ModelSet.single(gpt(api)), SPECIALIST, request, timeout=0.5, meter=Meter())
    assert failed.value.kind == "timeout"
    assert [(u.total_tokens, u.cost_usd) for u in charged] == [(0, None)]
