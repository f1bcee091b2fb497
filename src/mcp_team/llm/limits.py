"""Limits per provider endpoint: calls in flight, requests per minute and tokens per minute.

Every endpoint (a provider at one base URL) has its own limiter, so a supervisor on one provider
never waits for specialists on another, and the parallel branches and concurrent runs that share
an endpoint never exceed what it allows. Rates are leaky buckets from `aiolimiter` (a burst of up
to the per-minute amount, then a steady drip); concurrency is an anyio `CapacityLimiter`.

Tokens are charged before the call, as the providers themselves count them: the prompt's size
estimate plus the output limit (`max_tokens`). That never under-counts, so our own limiter trips
before the provider's 429 does.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import anyio
from aiolimiter import AsyncLimiter
from pydantic import BaseModel, ConfigDict, Field

from mcp_team.llm.types import Model, ModelRequest, TextBlock, ToolResultBlock

DEFAULT_URL = "default"  # the endpoint key of a provider's own API (no base URL configured)


class EndpointLimits(BaseModel):
    """What one endpoint allows; None means no limit of that kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_concurrency: int = Field(default=8, ge=1, description="Model calls in flight at once.")
    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0, description="Input estimate plus max_tokens.")


class EndpointLimiter:
    """The limiter of one endpoint. Hold a `slot` for the whole model call."""

    def __init__(self, limits: EndpointLimits) -> None:
        self.limits = limits
        self.calls = anyio.CapacityLimiter(limits.max_concurrency)
        self._requests = AsyncLimiter(limits.requests_per_minute, 60) if limits.requests_per_minute else None
        self._tokens = AsyncLimiter(limits.tokens_per_minute, 60) if limits.tokens_per_minute else None

    @asynccontextmanager
    async def slot(self, tokens: int = 0) -> AsyncIterator[None]:
        """Wait for a free call slot, then for the request and token rates; cancellable while waiting.

        A call larger than the whole per-minute token allowance waits for an empty bucket instead
        of failing: the provider decides whether it fits.
        """
        async with self.calls:
            if self._requests is not None:
                await self._requests.acquire()
            if self._tokens is not None:
                await self._tokens.acquire(min(float(tokens), self._tokens.max_rate))
            yield


class Limiters:
    """The limiters of every endpoint a `ModelSet`'s models call, made on first use.

    `overrides` are keyed by base URL (as configured, without a trailing slash) or provider name
    (`openai`, `anthropic`); a base URL wins over its provider, and either over `default`.
    """

    def __init__(self, default: EndpointLimits | None = None, overrides: Mapping[str, EndpointLimits] | None = None):
        self.default = default or EndpointLimits()
        self.overrides = {k.rstrip("/"): v for k, v in (overrides or {}).items()}
        self._by_endpoint: dict[tuple[str, str], EndpointLimiter] = {}

    def for_model(self, model: Model) -> EndpointLimiter:
        """The limiter of the endpoint `model` calls."""
        provider, url = endpoint_of(model)
        limiter = self._by_endpoint.get((provider, url))
        if limiter is None:
            limits = self.overrides.get(url) or self.overrides.get(provider) or self.default
            limiter = self._by_endpoint[(provider, url)] = EndpointLimiter(limits)
        return limiter


def endpoint_of(model: Model) -> tuple[str, str]:
    """`(provider, base URL)` of the endpoint a model calls; a model without a `base_url` attribute
    (offline, scripted, MCP sampling) or with None (the provider's own API) is on `DEFAULT_URL`."""
    url = getattr(model, "base_url", None)
    return model.provider, str(url).rstrip("/") if url else DEFAULT_URL


def estimate_tokens(request: ModelRequest) -> int:
    """The tokens a request may use, as providers count them for rate limits: the prompt at four
    characters a token, plus the output limit."""
    return estimate_input_tokens(request) + request.max_tokens


def estimate_input_tokens(request: ModelRequest) -> int:
    """The size of a request's prompt in tokens, at four characters a token."""
    chars = len(request.system) + sum(len(json.dumps(t.input_schema)) + len(t.description) for t in request.tools)
    for message in request.messages:
        for block in message.blocks:
            if isinstance(block, TextBlock):
                chars += len(block.text)
            elif isinstance(block, ToolResultBlock):
                chars += len(block.content)
            else:
                chars += len(json.dumps(block.input))
    return chars // 4
