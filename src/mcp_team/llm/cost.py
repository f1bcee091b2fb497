"""What a model call cost in USD, from its usage and the maintained price table of `genai-prices`.

A call is priced only when it is known whose prices apply. A backend on its provider's own API is
priced from that provider's list; one on another base URL from the list of whoever serves that URL,
as far as genai-prices knows it (OpenRouter, Azure, Groq, Together, DeepSeek, ...), so a local
server (Ollama, vLLM, llama.cpp) is never priced as OpenAI even when its model names look alike. A
backend may name the price list itself (`price_provider`, e.g. for a gateway in front of OpenAI).
Models without a price (local, offline, scripted, the MCP client's own) cost None, not 0.

genai-prices takes ~0.3 s to import and reads its table on first use, so it is imported then.
"""

from __future__ import annotations

from mcp_team.llm.types import Model, ModelResponse, Usage

PRICED_PROVIDERS = ("anthropic", "openai")  # the backends whose calls someone bills us for


def call_cost(model: Model, response: ModelResponse) -> float | None:
    """The USD cost of one call `model` answered with `response`; None when its price is unknown, or its usage
    (a backend marks usage it could not count with a null `cost_usd`, as for a server that reports no tokens).

    The model name the API answered with (often a dated snapshot) is looked up first, then the
    name that was asked for.
    """
    if model.provider not in PRICED_PROVIDERS or response.usage.cost_usd is None:
        return None  # not billed by anyone we know, or its backend could not count its tokens
    price_provider: str | None = getattr(model, "price_provider", None)
    base_url: str | None = getattr(model, "base_url", None)
    if price_provider is None and base_url is None:
        price_provider = model.provider
    for name in dict.fromkeys((response.model, model.name)):
        cost = usage_cost(response.usage, name, price_provider=price_provider, base_url=base_url)
        if cost is not None:
            return cost
    return None


def priced(model: Model) -> bool:
    """Whether calls of `model` have a known price: a failed call of one that has none (a local server, offline)
    costs an unknown amount too, as its answered calls do, never $0."""
    if model.provider not in PRICED_PROVIDERS:
        return False
    price_provider: str | None = getattr(model, "price_provider", None)
    base_url: str | None = getattr(model, "base_url", None)
    if price_provider is None and base_url is None:
        price_provider = model.provider
    return usage_cost(Usage(input_tokens=1), model.name, price_provider=price_provider, base_url=base_url) is not None


def usage_cost(
    usage: Usage, model: str, *, price_provider: str | None = None, base_url: str | None = None
) -> float | None:
    """The USD cost of `usage` on `model`, from `price_provider`'s price list (a genai-prices provider
    id such as `openai`), else from the list of whoever serves `base_url`; None when unknown."""
    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price

    if price_provider is None and base_url is None:
        return None
    tokens = PriceUsage(
        input_tokens=usage.input_tokens,  # like ours, genai-prices counts cached input in input_tokens
        cache_read_tokens=usage.cache_read_input_tokens,
        cache_write_tokens=usage.cache_creation_input_tokens,
        output_tokens=usage.output_tokens,
    )
    try:
        if price_provider is not None:
            price = calc_price(tokens, model, provider_id=price_provider)
        else:
            price = calc_price(tokens, model, provider_api_url=base_url)
    except LookupError:  # a provider or a model the table does not know
        return None
    return float(price.total_price)
