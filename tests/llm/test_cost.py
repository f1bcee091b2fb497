"""The cost of a model call, from genai-prices' table: known models priced, unknown and local ones None."""

from __future__ import annotations

import anyio
import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from mcp_team.llm.anthropic import AnthropicModel
from mcp_team.llm.cost import call_cost, usage_cost
from mcp_team.llm.offline import OfflineModel
from mcp_team.llm.openai import OpenAIModel
from mcp_team.llm.scripted import ScriptedModel
from mcp_team.llm.types import Message, ModelRequest, ModelResponse, TextBlock, Usage
from support.fake_messages_api import FakeMessagesAPI, message, text_block
from support.fake_openai_api import FakeOpenAIAPI, completion

pytestmark = [pytest.mark.process]

USAGE = Usage(input_tokens=12_000, output_tokens=800, cache_read_input_tokens=8_000)
KEY = "sk-test"


def reply(model: str, usage: Usage = USAGE) -> ModelResponse:
    return ModelResponse(content=[TextBlock(text="ok")], model=model, usage=usage)


def table(model: str, provider: str, usage: Usage = USAGE) -> float:
    """What genai-prices itself says, asked directly."""
    tokens = PriceUsage(
        input_tokens=usage.input_tokens,
        cache_read_tokens=usage.cache_read_input_tokens,
        cache_write_tokens=usage.cache_creation_input_tokens,
        output_tokens=usage.output_tokens,
    )
    return float(calc_price(tokens, model, provider_id=provider).total_price)


@pytest.fixture(autouse=True)
def no_base_url_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


@pytest.mark.parametrize(
    ("model", "answered_as", "provider"),
    [
        (OpenAIModel("gpt-4o-mini", api_key=KEY), "gpt-4o-mini-2024-07-18", "openai"),
        (OpenAIModel("gpt-4o", api_key=KEY, base_url="https://api.openai.com/v1"), "gpt-4o", "openai"),
        (
            AnthropicModel("claude-sonnet-4-5", api_key=KEY),
            "claude-sonnet-4-5-20250929",
            "anthropic",
        ),  # a dated snapshot
        (AnthropicModel("claude-haiku-5-5", api_key=KEY), "claude-haiku-5-5", "anthropic"),
    ],
)
def test_known_models_cost_what_the_price_table_says(
    model: OpenAIModel | AnthropicModel, answered_as: str, provider: str
) -> None:
    cost = call_cost(model, reply(answered_as))
    assert cost is not None and cost == pytest.approx(table(answered_as, provider))
    assert 0 < cost < 1  # 12.8k tokens on any of these is cents, not dollars


def test_cached_input_costs_less_and_a_million_tokens_is_in_dollars() -> None:
    model = OpenAIModel("gpt-4o-mini", api_key=KEY)
    fresh = call_cost(model, reply("gpt-4o-mini", Usage(input_tokens=1_000_000, output_tokens=1_000_000)))
    cached = call_cost(
        model,
        reply("gpt-4o-mini", Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_input_tokens=900_000)),
    )
    assert fresh is not None and cached is not None
    assert 0.1 < cached < fresh < 5  # gpt-4o-mini: well under a dollar per million input tokens


def test_unknown_and_local_models_cost_none() -> None:
    assert call_cost(OpenAIModel("my-finetune-xyz", api_key=KEY), reply("my-finetune-xyz")) is None
    ollama = "http://127.0.0.1:11434/v1"
    assert call_cost(OpenAIModel("qwen2.5:7b", base_url=ollama), reply("qwen2.5:7b")) is None
    # A local server is never priced as OpenAI, even for a name OpenAI's price list has.
    assert call_cost(OpenAIModel("gpt-oss-20b", base_url=ollama), reply("gpt-oss-20b")) is None
    assert (
        call_cost(AnthropicModel("claude-haiku-5-5", base_url="http://127.0.0.1:9/"), reply("claude-haiku-5-5")) is None
    )
    assert call_cost(OfflineModel(), reply("offline")) is None
    assert call_cost(ScriptedModel([]), reply("gpt-4o")) is None  # not a billed backend, whatever it says


def test_a_known_host_is_priced_from_its_own_list() -> None:
    model = OpenAIModel("openai/gpt-4o-mini", api_key=KEY, base_url="https://openrouter.ai/api/v1")
    cost = call_cost(model, reply("openai/gpt-4o-mini"))
    assert cost is not None and cost == pytest.approx(table("openai/gpt-4o-mini", "openrouter"))


def test_a_gateway_can_name_its_price_list() -> None:
    model = OpenAIModel("gpt-4o-mini", api_key=KEY, base_url="https://gateway.example/v1", price_provider="openai")
    assert call_cost(model, reply("gpt-4o-mini")) == pytest.approx(table("gpt-4o-mini", "openai"))


def test_usage_cost() -> None:
    assert usage_cost(USAGE, "gpt-4o-mini", price_provider="openai") == pytest.approx(table("gpt-4o-mini", "openai"))
    assert usage_cost(Usage(), "gpt-4o-mini", price_provider="openai") == 0.0  # nothing used: nothing to pay
    assert usage_cost(USAGE, "gpt-4o-mini") is None  # nobody named to price it
    assert usage_cost(USAGE, "gpt-4o-mini", price_provider="no-such-provider") is None


def test_a_call_through_the_sdk_is_priced_from_its_reported_usage() -> None:
    async def main() -> float | None:
        with FakeOpenAIAPI() as api:
            api.reply(
                200,
                completion(
                    "hi",
                    usage={
                        "prompt_tokens": 2000,
                        "completion_tokens": 300,
                        "prompt_tokens_details": {"cached_tokens": 1024},
                    },
                    model="gpt-4o-mini-2024-07-18",
                ),
            )
            model = OpenAIModel("gpt-4o-mini", api_key=KEY, base_url=api.base_url, price_provider="openai")
            response = await model.complete(ModelRequest(system="", messages=[Message(role="user", content="hi")]))
            await model.aclose()
            return call_cost(model, response)

    usage = Usage(input_tokens=2000, output_tokens=300, cache_read_input_tokens=1024)
    assert anyio.run(main) == pytest.approx(table("gpt-4o-mini-2024-07-18", "openai", usage))


@pytest.mark.parametrize(
    "usage",
    [
        {},  # no `usage` at all
        {"prompt_tokens": None, "completion_tokens": None},
        {"prompt_tokens": 2000},  # the output's count left out: pricing the input alone would understate it
    ],
)
def test_a_priced_call_whose_server_does_not_count_its_tokens_costs_unknown_not_zero(usage: dict[str, object]) -> None:
    """A gateway in front of OpenAI that leaves token counts out: its price list is known, its usage is not."""

    async def main() -> float | None:
        with FakeOpenAIAPI() as api:
            api.reply(200, completion("hi", usage=usage, model="gpt-4o-mini"))
            model = OpenAIModel("gpt-4o-mini", api_key=KEY, base_url=api.base_url, price_provider="openai")
            response = await model.complete(ModelRequest(system="", messages=[Message(role="user", content="hi")]))
            await model.aclose()
            return call_cost(model, response)

    assert anyio.run(main) is None


@pytest.mark.parametrize("usage", [None, {"output_tokens": 300}])
def test_a_priced_claude_call_whose_gateway_does_not_count_its_tokens_costs_unknown_not_zero(
    usage: dict[str, int] | None,
) -> None:
    async def main() -> tuple[float | None, int]:
        with FakeMessagesAPI() as api:
            body = message([text_block("hi")], model="claude-haiku-5-5")
            body["usage"] = usage
            api.reply(200, body)
            model = AnthropicModel("claude-haiku-5-5", api_key=KEY, base_url=api.base_url, price_provider="anthropic")
            response = await model.complete(ModelRequest(system="", messages=[Message(role="user", content="hi")]))
            await model.aclose()
            return call_cost(model, response), response.usage.output_tokens

    assert anyio.run(main) == (None, (usage or {}).get("output_tokens", 0))  # what it did count is kept
