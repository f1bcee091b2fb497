"""Limits per provider endpoint: calls in flight, requests per minute and tokens per minute.

Every endpoint (a provider at one base URL) has its own limiter, so a supervisor on one provider
never waits for specialists on another, and the parallel branches and concurrent runs that share
an endpoint never exceed what it allows. Rates are leaky buckets from `aiolimiter` (a burst of up
to the per-minute amount, then a steady drip); concurrency is an anyio `CapacityLimiter`.

Tokens are charged before the call, as the providers themselves count them: the prompt's size
estimate plus the output limit (`max_tokens`). That never under-counts, so our own limiter trips
before the provider's 429 does. A call that could never fit the tokens-per-minute limit is not left to
wait forever: `output_within` lowers its output limit to fit, or refuses it at once, naming the limit and
the call's need. A call about to wait for a rate says so first (`Slot`'s `on_wait`), with how long.

Several processes (replicas on one database) share a request rate through `SharedRate`, a seam that
runs/ fills (`runs.shared_limits`): after `Limiters.share(rate)` every endpoint with `requests_per_minute`
also waits for the shared rate, counted in the database by all of them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import anyio
from aiolimiter import AsyncLimiter
from pydantic import BaseModel, ConfigDict, Field

from mcp_team.llm.types import Model, ModelError, ModelRequest, TextBlock, ToolResultBlock

DEFAULT_URL = "default"  # the endpoint key of a provider's own API (no base URL configured)
MIN_OUTPUT_TOKENS = 256  # a call that could not write this much is not made: its answer would be cut off
WAIT_WORTH_SAYING = 1.0  # seconds: a shorter wait for a rate is not reported

OnWait = Callable[[str, float], Awaitable[None]]
"""Told before a call waits for a rate: which limit (in words, e.g. "the tokens-per-minute limit of openai
(3000: MCP_TEAM_TOKENS_PER_MINUTE)") and about how many seconds."""


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
    """The limiter of one endpoint. Hold a `slot` for the whole model call.

    `name` says which endpoint in messages (`openai`, or `openai at http://...`); `set_by` names the settings
    its rates came from, so a message can say what to change."""

    def __init__(
        self,
        limits: EndpointLimits,
        shared: SharedRate | None = None,
        key: str = DEFAULT_URL,
        name: str = "this endpoint",
        set_by: str = "MCP_TEAM_{upper}",
    ) -> None:
        self.limits = limits
        self.shared, self.key, self.name, self.set_by = shared, key, name, set_by
        self.calls = anyio.CapacityLimiter(limits.max_concurrency)
        self._requests = AsyncLimiter(limits.requests_per_minute, 60) if limits.requests_per_minute else None
        self._tokens = AsyncLimiter(limits.tokens_per_minute, 60) if limits.tokens_per_minute else None
        self._queued = {"requests": 0.0, "tokens": 0.0}  # what the calls waiting for each rate ask for

    def slot(self, tokens: int = 0, on_wait: OnWait | None = None) -> Slot:
        """Wait for a free call slot, then for the request and token rates; cancellable while waiting.
        `on_wait` is told before a wait for a rate of `WAIT_WORTH_SAYING` or more.

        A call larger than the whole per-minute token allowance waits for an empty bucket: `output_within`
        keeps the engine's calls from being one.
        """
        return Slot(self, tokens, on_wait)

    def rate(self, kind: str) -> str:
        """The `kind` ("tokens" or "requests") per-minute limit in words, with the setting behind it."""
        value = self.limits.tokens_per_minute if kind == "tokens" else self.limits.requests_per_minute
        setting = self.set_by.format(upper=f"{kind.upper()}_PER_MINUTE", lower=f"{kind}_per_minute")
        return f"the {kind}-per-minute limit of {self.name} ({value:,g}: {setting})"

    def output_within(self, prompt_tokens: int, max_tokens: int) -> tuple[int, str | None]:
        """The output limit a call with a prompt of about `prompt_tokens` may ask for here, so that it can ever get
        through the tokens-per-minute limit: `max_tokens`, or lower with a note saying so. Raises `ModelError`
        (`unavailable`, at once: waiting cannot help) when not even its prompt and `MIN_OUTPUT_TOKENS` fit."""
        allowance = self.limits.tokens_per_minute
        if allowance is None or prompt_tokens + max_tokens <= allowance:
            return max_tokens, None
        fits = int(allowance) - prompt_tokens
        if fits < min(MIN_OUTPUT_TOKENS, max_tokens):
            raise ModelError(
                "unavailable",
                f"this call can never go through {self.rate('tokens')}: it needs about "
                f"{prompt_tokens + min(MIN_OUTPUT_TOKENS, max_tokens):,} tokens a minute (a prompt of about "
                f"{prompt_tokens:,} tokens and at least {min(MIN_OUTPUT_TOKENS, max_tokens)} of output); raise the "
                "limit, or send shorter prompts",
            )
        note = (
            f"Calls to {self.name} had their output limit (max_tokens) lowered from {max_tokens:,} to as little as "
            f"{fits:,} tokens to fit {self.rate('tokens')}, which counts each call's prompt and max_tokens; an "
            "answer may have been cut short. Raise the limit if the endpoint allows more."
        )
        return fits, note


class Slot:
    """`async with limiter.slot(tokens)`: holds one of the endpoint's call slots.

    A class, not `asynccontextmanager`, and a free slot is taken without yielding to the event loop (only
    a pending cancellation is checked): this runs around every model call, which yields right after.
    """

    __slots__ = ("limiter", "on_wait", "tokens")

    def __init__(self, limiter: EndpointLimiter, tokens: int, on_wait: OnWait | None = None) -> None:
        self.limiter, self.tokens, self.on_wait = limiter, tokens, on_wait

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
                await self._take("requests", limiter._requests, 1.0)
                if limiter.shared is not None:
                    await limiter.shared.acquire(limiter.key, limiter._requests.max_rate)
            if limiter._tokens is not None:
                await self._take("tokens", limiter._tokens, min(float(self.tokens), limiter._tokens.max_rate))
        except BaseException:
            limiter.calls.release()
            raise

    async def _take(self, kind: str, bucket: AsyncLimiter, amount: float) -> None:
        """`amount` of `bucket`; a wait for it said first (`on_wait`), with how long it should be."""
        if bucket.has_capacity(amount):
            await bucket.acquire(amount)
            return
        queued = self.limiter._queued
        seconds = _seconds_to_wait(bucket, amount, queued[kind])
        queued[kind] += amount
        try:
            if self.on_wait is not None and seconds >= WAIT_WORTH_SAYING:
                await self.on_wait(self.limiter.rate(kind), seconds)
            await bucket.acquire(amount)
        finally:
            queued[kind] -= amount

    async def __aexit__(self, *exc_info: object) -> None:
        self.limiter.calls.release()


def _seconds_to_wait(bucket: AsyncLimiter, amount: float, queued: float) -> float:
    """About how long `amount` waits in `bucket` behind `queued` (what the calls ahead of it wait for). Its free
    capacity is found with `has_capacity` (aiolimiter's public API has no level to read), to a millionth."""
    low, high = 0.0, bucket.max_rate  # has_capacity(low) holds, has_capacity(high) may not
    if not bucket.has_capacity(high):
        while high - low > bucket.max_rate * 1e-6:
            middle = (low + high) / 2
            low, high = (middle, high) if bucket.has_capacity(middle) else (low, middle)
    return max(queued + amount - low, 0.0) * bucket.time_period / bucket.max_rate


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
            key = url if url in self.overrides else provider if provider in self.overrides else None
            limits = self.default if key is None else self.overrides[key]
            escaped = repr(key).replace("{", "{{").replace("}", "}}")
            set_by = "MCP_TEAM_{upper}" if key is None else f"{{lower}} of {escaped} in MCP_TEAM_ENDPOINT_LIMITS"
            name = provider if url == DEFAULT_URL else f"{provider} at {url}"
            limiter = EndpointLimiter(limits, self.shared, f"{provider} {url}", name, set_by)
            self._by_endpoint[(provider, url)] = limiter
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
