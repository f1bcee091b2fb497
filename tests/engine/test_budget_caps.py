"""Budgets are caps (issue 35): a K-way fan-out with a token budget and a cost budget never ends past them by
more than one call's prompt-estimate error, through the library API (hypothesis over budgets and K), the CLI and
an MCP client. The model here counts a prompt's tokens as a real tokenizer would differ from our estimate of
four characters a token: a quarter more, and some tokens of framing per call (`MORE`, `FRAMING`); every call's
error (its input tokens less our estimate) is measured, and the largest is the margin allowed."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client

from mcp_team.handoffs import Budgets, RunResult, RunSettings, Team
from mcp_team.llm import ModelRequest, ModelResponse, ModelSet, Usage
from mcp_team.llm.cost import price_of
from mcp_team.llm.limits import estimate_input_tokens
from mcp_team.llm.offline import OfflineModel
from mcp_team.llm.openai import OpenAIModel
from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server
from mcp_team.specialists import Specialist
from mcp_team.teamfile.loading import load_team_file
from support import cli_here
from support.fake_api import offline_brain
from support.fake_openai_api import FakeOpenAIAPI

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]

MORE, FRAMING = 1.25, 7  # how this model's prompts count against our estimate
PRICED = "gpt-4o-mini"  # in genai-prices' openai list: $0.15 in, $0.60 out per million tokens


@dataclass
class Tokenizing:
    """The offline model, priced as `PRICED` on OpenAI's list, its prompts counted larger than we estimate them.
    `errors`: each call's input tokens less our estimate of its prompt."""

    inner: OfflineModel = field(default_factory=OfflineModel)
    name: str = PRICED
    provider: str = "openai"
    errors: list[int] = field(default_factory=list)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response = await self.inner.complete(request)
        estimate = estimate_input_tokens(request)
        counted = math.ceil(estimate * MORE) + FRAMING
        self.errors.append(counted - estimate)
        output = min(response.usage.output_tokens, request.max_tokens)
        stop = "max_tokens" if output < response.usage.output_tokens else response.stop_reason
        usage = Usage(input_tokens=counted, output_tokens=output)
        return response.model_copy(update={"usage": usage, "model": PRICED, "stop_reason": stop})


def fan_out(k: int) -> list[Specialist]:
    """A team of `k` members of their own: the offline supervisor hands the request to all of them at once."""
    return [
        Specialist(name=f"member_{n}", description=f"Member {n}: looks into part {n}.", system_prompt="Answer.")
        for n in range(1, k + 1)
    ]


def over(result: RunResult, model: Tokenizing, max_tokens: int, max_cost: float) -> tuple[int, float, int]:
    """How far the run went past its budgets (tokens, cost), and the largest prompt-estimate error of a call."""
    price = price_of(model)
    assert price is not None
    total = result.usage.total
    assert total.cost_usd is not None  # every call priced
    return total.total_tokens - max_tokens, total.cost_usd - max_cost, max(model.errors, default=0)


def within(result: RunResult, model: Tokenizing, max_tokens: int, max_cost: float) -> None:
    tokens_over, cost_over, margin = over(result, model, max_tokens, max_cost)
    price = price_of(model)
    assert price is not None
    assert tokens_over <= margin, (tokens_over, margin, result.usage.total, result.notes)
    assert cost_over <= (price(margin, 0) or 0.0) + 1e-12, (cost_over, margin, result.usage.total)


@settings(max_examples=25)
@given(
    k=st.integers(min_value=1, max_value=8),
    max_tokens=st.integers(min_value=300, max_value=40_000),
    max_cost=st.floats(min_value=5e-5, max_value=5e-3),
)
async def test_a_fan_out_never_ends_past_its_budgets(k: int, max_tokens: int, max_cost: float) -> None:
    model = Tokenizing()
    budgets = Budgets(max_tokens=max_tokens, max_cost=max_cost)
    team = Team(ModelSet.single(model), fan_out(k), RunSettings(budgets=budgets))
    result = await team.run("Look into the parts of the question of bees, each of you one part")
    within(result, model, max_tokens, max_cost)
    assert result.status in ("complete", "partial", "failed")


async def test_k8_with_a_tight_token_budget_lowers_and_winds_down_within_it() -> None:
    # 8 calls of 4,096 output tokens each do not fit in 9,000: they are lowered (or wait for the others) and all
    # eight answer; the supervisor's next turn, its prompt swollen by eight results, no longer fits, so the run
    # winds down to the closing answer, which was kept for from the start.
    model = Tokenizing()
    team = Team(ModelSet.single(model), fan_out(8), RunSettings(budgets=Budgets(max_tokens=9000, max_cost=0.01)))
    result = await team.run("Look into the parts of the question of bees, each of you one part")
    within(result, model, 9000, 0.01)
    assert [h.status for h in result.handoffs] == ["completed"] * 8
    assert result.status == "partial" and result.answer
    assert result.stopped_by is not None and "token budget (9000)" in result.stopped_by
    assert any("lowered to fit" in note and "max_tokens, 9000 now" in note for note in result.notes), result.notes


async def test_k8_with_a_tight_cost_budget_stays_within_it() -> None:
    model = Tokenizing()
    budget = 0.0015  # about what the run costs unbounded: some calls are lowered or refused
    team = Team(ModelSet.single(model), fan_out(8), RunSettings(budgets=Budgets(max_cost=budget)))
    result = await team.run("Look into the parts of the question of bees, each of you one part")
    within(result, model, 400_000, budget)
    assert result.stopped_by is not None and "cost budget ($0.0015)" in result.stopped_by, result.stopped_by


# --- through the CLI and an MCP client, on the OpenAI-compatible backend -----------------------------------------

KEY = "sk-proj-test-SECRET-0123456789"
REQUEST = "Look into the parts of the question of bees, each of you one part"
K8 = "".join(
    f'[[specialists]]\nname = "member_{n}"\ndescription = "Member {n}: looks into part {n}."\nprompt = "Answer."\n\n'
    for n in range(1, 9)
)


@dataclass
class Counting:
    """The fake API's brain: the offline model, counting each prompt `MORE` larger than our estimate of it
    (plus `FRAMING`), as `Tokenizing` does; `errors` as there."""

    errors: list[int] = field(default_factory=list)

    def __call__(self, request: ModelRequest) -> ModelResponse:
        response = offline_brain(request)
        estimate = estimate_input_tokens(request)
        counted = math.ceil(estimate * MORE) + FRAMING
        self.errors.append(counted - estimate)
        output = min(response.usage.output_tokens, request.max_tokens)
        return response.model_copy(update={"usage": Usage(input_tokens=counted, output_tokens=output)})


@pytest.fixture
def api() -> Iterator[tuple[FakeOpenAIAPI, Counting]]:
    brain = Counting()
    with FakeOpenAIAPI(brain=brain) as server:
        yield server, brain


def priced_env(api: FakeOpenAIAPI) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": api.base_url,
        "OPENAI_API_KEY": KEY,
        "MCP_TEAM_PRICES": json.dumps({api.base_url: "openai"}),
    }


def margin_price(errors: list[int]) -> float:
    price = price_of(OpenAIModel(PRICED, api_key=KEY))
    assert price is not None
    return price(max(errors), 0) or 0.0


def test_the_cli_keeps_a_k8_fan_out_within_its_token_and_cost_budgets(
    api: tuple[FakeOpenAIAPI, Counting], tmp_path: Path
) -> None:
    server, brain = api
    team = tmp_path / "team.toml"
    team.write_text(K8)
    for max_tokens, max_cost in ((9000, "0.01"), (400_000, "0.0015")):
        brain.errors.clear()
        proc = cli_here(
            "run", "--json", "--ephemeral", "--team", str(team), "--model", f"openai:{PRICED}",
            "--max-tokens", str(max_tokens), "--max-cost", max_cost, REQUEST, **priced_env(server),
        )  # fmt: skip
        result = json.loads(proc.stdout)
        total = result["usage"]["total"]
        assert total["input_tokens"] + total["output_tokens"] <= max_tokens + max(brain.errors), (total, brain.errors)
        assert total["cost_usd"] <= float(max_cost) + margin_price(brain.errors) + 1e-12, total
        assert result["stopped_by"] and "budget" in result["stopped_by"], result["stopped_by"]
        assert "note:" in proc.stderr and "lowered to fit" in proc.stderr  # the terminal says why, too


async def test_run_team_keeps_a_k8_fan_out_within_its_token_and_cost_budgets(
    api: tuple[FakeOpenAIAPI, Counting], tmp_path: Path
) -> None:
    server, brain = api
    team = tmp_path / "team.toml"
    team.write_text(K8)
    settings = ModelSettings(
        model=f"openai:{PRICED}", openai_base_url=server.base_url, openai_api_key=KEY,  # type: ignore[arg-type]
        prices={server.base_url: "openai"},
    )  # fmt: skip
    async with Client(build_server(settings, load_team_file(team))) as client:
        for max_tokens, max_cost in ((9000, 0.01), (400_000, 0.0015)):
            brain.errors.clear()
            result = await client.call_tool(
                "run_team", {"request": REQUEST, "max_tokens": max_tokens, "max_cost": max_cost}
            )
            run = result.structured_content
            assert run is not None, result.content
            total = run["usage"]["total"]
            assert total["input_tokens"] + total["output_tokens"] <= max_tokens + max(brain.errors), total
            assert total["cost_usd"] <= max_cost + margin_price(brain.errors) + 1e-12, total
            assert run["stopped_by"] and "budget" in run["stopped_by"]
