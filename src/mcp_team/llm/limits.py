"""Limits per provider endpoint: calls in flight, requests per minute and tokens per minute.

Every endpoint (a provider at one base URL) has its own limiter, so a supervisor on one provider
never waits for specialists on another, and the parallel branches and concurrent runs that share
an endpoint never exceed what it allows. Rates are leaky buckets from `aiolimiter` (a burst of up
to the per-minute amount, then a steady drip); concurrency is an anyio `CapacityLimiter`.

Tokens are charged before the call, as the providers themselves count them: the prompt's size
estimate plus the output limit (`max_tokens`). That never under-counts, so our own limiter trips
before the provider's 429 does.

Several processes (replicas on one database) share a request rate through `SharedRate`, a seam that
runs/ fills (`runs.shared_limits`): after `Limiters.share(rate)` every endpoint with `requests_per_minute`
also waits for the shared rate, counted in the database by all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import anyio
from aiolimiter import AsyncLimiter
from pydantic import BaseModel, ConfigDict, Field

from mcp_team.llm.types import Model, ModelRequest, TextBlock, ToolResultBlock

DEFAULT_URL = "default"  # the endpoint key of a provider's own API (no base URL configured)


class EndpointLimits(BaseModel):
    """What one endpoint allows; None means no limit of that kind."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    max_concurrency: int = Field(default=8, ge=1, description="Model calls in flight at once.")
    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0, description="Input estimate plus max_tokens.")


class SharedRate(Protocol):
    """A request rate shared with other processes."""

    async def acquire(self, endpoint: str, requests_per_minute: float) -> None:
        """Wait until one more request to `endpoint` fits the rate across every process."""
        ...


class EndpointLimiter:
    """The limiter of one endpoint. Hold a `slot` for the whole model call."""

    def __init__(self, limits: EndpointLimits, shared: SharedRate | None = None, key: str = DEFAULT_URL) -> None:
        self.limits = limits
        self.shared, self.key = shared, key
        self.calls = anyio.CapacityLimiter(limits.max_concurrency)
        self._requests = AsyncLimiter(limits.requests_per_minute, 60) if limits.requests_per_minute else None
        self._tokens = AsyncLimiter(limits.tokens_per_minute, 60) if limits.tokens_per_minute else None

    def slot(self, tokens: int = 0) -> Slot:
        """Wait for a free call slot, then for the request and token rates; cancellable while waiting.

        A call larger than the whole per-minute token allowance waits for an empty bucket instead
        of failing: the provider decides whether it fits.
        """
        return Slot(self, tokens)


class Slot:
    """`async with limiter.slot(tokens)`: holds one of the endpoint's call slots.

    A class, not `asynccontextmanager`, and a free slot is taken without yielding to the event loop (only
    a pending cancellation is checked): this runs around every model call, which yields right after.
    """

    __slots__ = ("limiter", "tokens")

    def __init__(self, limiter: EndpointLimiter, tokens: int) -> None:
        self.limiter, self.tokens = limiter, tokens

    async def __aenter__(self) -> None:
        limiter = self.limiter
        # A run whose deadline passed (or that was cancelled) stops here, before the call, even when the
        # model would answer without ever yielding (the offline model at zero latency).
        await anyio.lowlevel.checkpoint_if_cancelled()
        try:
            limiter.calls.acquire_nowait()
        except anyio.WouldBlock:
            await limiter.calls.acquire()
        try:
            if limiter._requests is not None:
                await limiter._requests.acquire()
                if limiter.shared is not None:
                    await limiter.shared.acquire(limiter.key, limiter._requests.max_rate)
            if limiter._tokens is not None:
                await limiter._tokens.acquire(min(float(self.tokens), limiter._tokens.max_rate))
        except BaseException:
            limiter.calls.release()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        self.limiter.calls.release()


class Limiters:
    """The limiters of every endpoint a `ModelSet`'s models call, made on first use.

    `overrides` are keyed by base URL (as configured, without a trailing slash) or provider name
    (`openai`, `anthropic`); a base URL wins over its provider, and either over `default`.
    """

    def __init__(self, default: EndpointLimits | None = None, overrides: Mapping[str, EndpointLimits] | None = None):
        self.default = default or EndpointLimits()
        self.overrides = {k.rstrip("/"): v for k, v in (overrides or {}).items()}
        self._by_endpoint: dict[tuple[str, str], EndpointLimiter] = {}
        self.shared: SharedRate | None = None  # see `share`

    def share(self, rate: SharedRate | None) -> None:
        """Share request rates with other processes through `rate` (None: this process alone), from now on."""
        self.shared = rate
        for limiter in self._by_endpoint.values():
            limiter.shared = rate

    def for_model(self, model: Model) -> EndpointLimiter:
        """The limiter of the endpoint `model` calls."""
        provider, url = endpoint_of(model)
        limiter = self._by_endpoint.get((provider, url))
        if limiter is None:
            limits = self.overrides.get(url) or self.overrides.get(provider) or self.default
            limiter = self._by_endpoint[(provider, url)] = EndpointLimiter(limits, self.shared, f"{provider} {url}")
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
    chars = len(request.system) + sum(t.prompt_chars for t in request.tools)
    for message in request.messages:
        if isinstance(message.content, str):  # the usual user message: no blocks to build
            chars += len(message.content)
            continue
        for block in message.content:
            if isinstance(block, TextBlock):
                chars += len(block.text)
            elif isinstance(block, ToolResultBlock):
                chars += len(block.content)
            else:
                chars += len(block.input_json)
    return chars // 4
