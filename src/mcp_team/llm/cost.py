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

from collections.abc import Callable

from mcp_team.llm.types import Model, ModelResponse, Usage

PRICED_PROVIDERS = ("anthropic", "openai")  # the backends whose calls someone bills us for

Price = Callable[[int, int], float | None]
"""The USD price of a call of one model with so many input and output tokens; None when unknown."""


def call_cost(model: Model, response: ModelResponse) -> float | None:
    """The USD cost of one call `model` answered with `response`; None when its price is unknown, or its usage
    (a backend marks usage it could not count with a null `cost_usd`, as for a server that reports no tokens).

    The model name the API answered with (often a dated snapshot) is looked up first, then the
    name that was asked for.
    """
    if model.provider not in PRICED_PROVIDERS or response.usage.cost_usd is None:
        return None  # not billed by anyone we know, or its backend could not count its tokens
    price_provider, base_url = _price_list(model)
    for name in dict.fromkeys((response.model, model.name)):
        cost = usage_cost(response.usage, name, price_provider=price_provider, base_url=base_url)
        if cost is not None:
            return cost
    return None


def price_of(model: Model) -> Price | None:
    """The price of `model`'s calls by their token counts, to bound a call before it is made; None when nobody we
    know bills it. The function gives None too when its price list does not know the model. (Looked up when
    called: genai-prices is imported only then.)"""
    if model.provider not in PRICED_PROVIDERS:
        return None
    price_provider, base_url = _price_list(model)
    name = model.name

    def price(input_tokens: int, output_tokens: int) -> float | None:
        usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
        return usage_cost(usage, name, price_provider=price_provider, base_url=base_url)

    return price


def failed_call_cost(model: Model) -> float | None:
    """What a call of `model` that failed (an error answer, after the SDK's retries) cost: nothing, where its price
    is known (an API bills no failed request); unknown (None), not $0, where it is not."""
    price = price_of(model)
    return None if price is None or price(0, 0) is None else 0.0


def _price_list(model: Model) -> tuple[str | None, str | None]:
    """(genai-prices provider id, base URL) to price `model`'s calls from: a named list, else whoever serves its
    base URL, else its provider's own list."""
    price_provider: str | None = getattr(model, "price_provider", None)
    base_url: str | None = getattr(model, "base_url", None)
    if price_provider is None and base_url is None:
        price_provider = model.provider
    return price_provider, base_url


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
