"""Making a model call: the member's model and its sampling settings, its endpoint's limits, a timeout, the
budget's admission, the fallback model when the primary keeps failing, the cost, and the `chat` span, in the
one place every caller goes through."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import anyio

from mcp_team.llm.cost import Price, call_cost, failed_call_cost, price_of
from mcp_team.llm.limits import EndpointLimiter, EndpointLimits, Limiters, estimate_input_tokens
from mcp_team.llm.text_calls import as_tool_calls, reads_text_calls
from mcp_team.llm.types import (
    ContentBlock,
    Model,
    ModelError,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolUseBlock,
    Usage,
    replaced,
)
from mcp_team.telemetry import spans
from mcp_team.telemetry.attributes import (
    FALLBACK_MODEL,
    INPUT_MESSAGES,
    OUTPUT_MESSAGES,
    RESPONSE_FINISH_REASONS,
    RESPONSE_ID,
    RESPONSE_MODEL,
    SYSTEM_INSTRUCTIONS,
    TEXT_TOOL_CALLS,
    USAGE_COST_USD,
)

SUPERVISOR = "supervisor"  # a model role, and the member name of the supervisor's requests
SPECIALIST = "specialist"
PLANNER = "planner"  # the member name of planning requests (made on the supervisor's model)
MEMBER_NAMES = (SUPERVISOR, PLANNER)  # the member names of the team's own requests: no specialist may take one

# Failures a fallback model may get around: the primary is overloaded, slow or failing (after the
# SDK's own retries). Auth, bad requests and the like would fail on any model of the same setup.
TRANSIENT = frozenset({"rate_limited", "server_error", "overloaded", "timeout", "connection"})


class CallNeed(NamedTuple):
    """What a model call may use, at most: its prompt (`estimate_input_tokens`), its output limit, and the price
    of its model (None: unknown). A tuple: one is made on every model call."""

    prompt_tokens: int
    max_tokens: int
    price: Price | None = None


class Grant(Protocol):
    """A meter's leave for one call: the output limit it may have (at most what it asked for)."""

    @property
    def max_tokens(self) -> int: ...

    def release(self, used: Usage | None = None) -> None:
        """The call ended having used `used` (charged already; None: unknown): what it held is free again."""


@dataclass(frozen=True, slots=True)
class Granted:
    """A `Grant` that holds nothing: for a meter that only counts."""

    max_tokens: int

    def release(self, used: Usage | None = None) -> None:
        pass


class Meter(Protocol):
    """Something that counts model calls, tokens and cost against a budget (see handoffs.budget)."""

    def before_call(self, need: CallNeed) -> Awaitable[Grant]:
        """Admit a call that may use `need`: the output limit it may have. May wait for calls in flight; raises
        `mcp_team.errors.BudgetExhausted` when the call may not be made. (Write it `async def`.)"""

    def after_call(self, usage: Usage) -> None:
        """Charge a call's tokens and cost (before its grant is released)."""

    def used_fallback(self, note: str) -> None:
        """A fallback model answered instead of the primary; `note` says which and why."""

    def waiting(self, limit: str, seconds: float) -> Awaitable[None]:
        """A call is about to wait about `seconds` for `limit` (a rate of its endpoint, in words). (Write it
        `async def`.)"""

    def note(self, topic: str, text: str) -> None:
        """Something the run's caller should know about its calls (once per `topic`)."""


class MeterWrapper:
    """A meter that passes everything on to `meter`: a subclass adds what it keeps of its own (a handoff's usage,
    the supervisor's), so each of them passes on the same things."""

    def __init__(self, meter: Meter) -> None:
        self.meter = meter

    def before_call(self, need: CallNeed) -> Awaitable[Grant]:
        return self.meter.before_call(need)  # its awaitable, not one more coroutine: this is on every model call

    def after_call(self, usage: Usage) -> None:
        self.meter.after_call(usage)

    def used_fallback(self, note: str) -> None:
        self.meter.used_fallback(note)

    def waiting(self, limit: str, seconds: float) -> Awaitable[None]:
        return self.meter.waiting(limit, seconds)

    def note(self, topic: str, text: str) -> None:
        self.meter.note(topic, text)


@dataclass
class ModelSet:
    """The models of a team: by role, by member, and their fallbacks, with the limiters of their endpoints.

    Parallel branches of a run (and concurrent runs of a server) all go through the limiter of the
    endpoint they call (`limiter_for`), so they never exceed what it allows at once, and calls to one
    endpoint never wait for another's.
    """

    models: Mapping[str, Model]
    max_concurrency: int = 8
    members: Mapping[str, Model] = field(default_factory=dict)  # a specialist's own model, by its name
    limits: Limiters | None = None  # per-endpoint limits; None: `max_concurrency` per endpoint, no rates
    # The model to use when the primary keeps failing: by member name, else by role.
    fallbacks: Mapping[str, Model] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if SUPERVISOR not in self.models or SPECIALIST not in self.models:
            raise ValueError("a ModelSet needs a 'supervisor' and a 'specialist' model")
        if isinstance(self.max_concurrency, bool) or not isinstance(self.max_concurrency, int):
            raise TypeError(f"max_concurrency must be an int, not {type(self.max_concurrency).__name__}")
        if self.max_concurrency < 1:
            raise ValueError(
                f"max_concurrency must be at least 1 (model calls in flight at once), not {self.max_concurrency}"
            )
        for where, models in (("models", self.models), ("members", self.members), ("fallbacks", self.fallbacks)):
            for key, model in models.items():
                _check_model(f"{where}[{key!r}]", model)
        if self.limits is None:
            self.limits = Limiters(EndpointLimits(max_concurrency=self.max_concurrency))

    @classmethod
    def single(cls, model: Model, max_concurrency: int = 8) -> ModelSet:
        """One model for every role."""
        return cls({SUPERVISOR: model, SPECIALIST: model}, max_concurrency)

    def for_role(self, role: str) -> Model:
        """The model for `role`; roles this set does not name fall back to the specialist model."""
        return self.models.get(role) or self.models[SPECIALIST]

    def for_member(self, name: str, role: str) -> Model:
        """The model of the specialist `name`: its own when it has one, else its role's."""
        return self.members.get(name) or self.for_role(role)

    def fallback_for(self, name: str, role: str) -> Model | None:
        """The fallback model of member `name` (its own, else its role's), or None."""
        return self.fallbacks.get(name) or self.fallbacks.get(role)

    def limiter_for(self, model: Model) -> EndpointLimiter:
        """The limiter of the endpoint `model` calls (see `llm.limits`)."""
        assert self.limits is not None  # made in __post_init__
        return self.limits.for_model(model)

    @property
    def provider(self) -> str:
        return self.models[SUPERVISOR].provider


def _check_model(where: str, model: object) -> None:
    """Refuse what cannot be a model when the set is made, not at its first call deep in a run."""
    if isinstance(model, type):
        raise TypeError(
            f"{where} is the class {model.__name__}, not a model: pass an instance, e.g. {model.__name__}()"
        )
    if not isinstance(model, Model):
        raise TypeError(
            f"{where} is a {type(model).__name__}, not a model: a model has `name`, `provider` and "
            "`async def complete(request) -> ModelResponse` (the mcp_team.llm.Model protocol)"
        )


UNKNOWN_SPEND = Usage(cost_usd=None)
"""What a call cut off after it was sent (cancelled, timed out) spent: unknown. An API bills a request it has
started, whatever became of its answer; its tokens were never told, so none are counted, and the cost of every
sum it is in is unknown (null), not understated."""


async def chat(
    models: ModelSet,
    role: str,
    request: ModelRequest,
    *,
    timeout: float | None = None,
    meter: Meter | None = None,
) -> ModelResponse:
    """One model call for `request.member` (on `role`'s model unless the member has its own), traced as
    `chat {model}`, its usage carrying its cost. Raises `ModelError`, or `BudgetExhausted` from `meter`.

    The member's sampling settings apply first (`tuned`), so the limits see the output limit that is sent; the
    endpoint's tokens-per-minute limit and then the meter may lower it (never below `MIN_OUTPUT_TOKENS`), or
    refuse the call.

    When the primary model fails in a way another model may not (overloaded, rate limited, timed out,
    failing after the SDK's retries) and a fallback is configured, the fallback answers instead (its own
    span, limiter, admission and cost), and the meter is told.

    The meter is charged here, around `model.complete`, never inside it: a model wrapped so its
    calls are durable steps returns a recorded call without running it, and the call is still
    charged once in the process that replays it.
    """
    model = models.for_member(request.member, role)
    try:
        response = await _metered(models, model, request, timeout, meter)
    except ModelError as exc:
        fallback = models.fallback_for(request.member, role)
        if fallback is None or fallback is model or exc.kind not in TRANSIENT:
            raise
        note = f"{fallback.provider}:{fallback.name} answered for {model.provider}:{model.name} ({exc.kind})"
        response = await _metered(models, fallback, request, timeout, meter, fallback_for=note)
        if meter is not None:
            meter.used_fallback(note)
    return response


def tuned(model: Model, request: ModelRequest) -> ModelRequest:
    """`request` with `model`'s sampling settings (a `llm.wrappers.TunedModel` anywhere in it) applied."""
    settings = getattr(model, "sampling_settings", None)
    changes = settings() if callable(settings) else None
    return replaced(request, **changes) if changes else request


async def _metered(
    models: ModelSet,
    model: Model,
    request: ModelRequest,
    timeout: float | None,
    meter: Meter | None,
    fallback_for: str | None = None,
) -> ModelResponse:
    """One call of `model`: tuned, fitted to its endpoint's token rate, admitted by `meter`, made, charged."""
    request = tuned(model, request)
    prompt_tokens = estimate_input_tokens(request)  # once: the meter and the limiter both charge it
    limiter = models.limiter_for(model)
    max_tokens, lowered = limiter.output_within(prompt_tokens, request.max_tokens)
    if meter is None:
        request = replaced(request, max_tokens=max_tokens) if max_tokens != request.max_tokens else request
        return await _call(model, limiter, request, timeout, prompt_tokens, fallback_for, None, lambda _: None)
    if lowered is not None:
        meter.note(f"rate lowered {limiter.key}", lowered)
    grant = await meter.before_call(CallNeed(prompt_tokens, max_tokens, price_of(model)))
    if grant.max_tokens != request.max_tokens:
        request = replaced(request, max_tokens=grant.max_tokens)
    charged: list[Usage] = []

    def charge(usage: Usage) -> None:
        if not charged:
            charged.append(usage)
            meter.after_call(usage)

    try:
        response = await _call(model, limiter, request, timeout, prompt_tokens, fallback_for, meter, charge)
    except ModelError:
        charge(Usage(cost_usd=failed_call_cost(model)))  # an API bills no failed request: $0, where it has a price
        raise
    finally:
        grant.release(charged[0] if charged and charged[0].input_tokens else None)
    return response


async def _call(
    model: Model,
    limiter: EndpointLimiter,
    request: ModelRequest,
    timeout: float | None,
    prompt_tokens: int,
    fallback_for: str | None,
    meter: Meter | None,
    charge: Callable[[Usage], None],
) -> ModelResponse:
    """One call of `model`, in its endpoint's limiter, with a timeout and its span; the usage priced and
    charged. `prompt_tokens`: the request's `estimate_input_tokens`. A call cut off once sent is charged as
    `UNKNOWN_SPEND`."""
    with spans.chat_span(model.name, model.provider, request.phase, request.max_tokens) as span:
        if fallback_for is not None and span.is_recording():
            span.set_attribute(FALLBACK_MODEL, fallback_for)
        if capturing := spans.capturing(span):
            spans.record_content(span, SYSTEM_INSTRUCTIONS, lambda: [{"type": "text", "content": request.system}])
            spans.record_content(span, INPUT_MESSAGES, lambda: [_semconv(m.role, m.blocks) for m in request.messages])
        async with limiter.slot(prompt_tokens + request.max_tokens, meter.waiting if meter is not None else None):
            with anyio.move_on_after(timeout) as limit:
                try:
                    pending = model.complete(request)
                    if not inspect.isawaitable(pending):  # a model of the user's own, written `def complete`
                        raise TypeError(
                            f"model {model.name!r}'s complete() returned a {type(pending).__name__}, not an "
                            "awaitable: write it `async def complete(self, request) -> ModelResponse`"
                        )
                    response = await pending
                except anyio.get_cancelled_exc_class():  # cut off (cancelled, or timed out) once sent
                    charge(UNKNOWN_SPEND)
                    raise
            if limit.cancelled_caught:
                assert timeout is not None  # no limit, nothing to cut it off
                raise timed_out(model.name, timeout)
        if not isinstance(response, ModelResponse):  # a model of the user's own: which one, and what it gave
            raise TypeError(
                f"model {model.name!r} returned a {type(response).__name__} where a ModelResponse was expected: "
                f"its complete() must return mcp_team.llm.ModelResponse"
            )
        cost = call_cost(model, response)
        # Not `model_copy` (twice): this is on every model call, and the values are the response's own.
        u = replaced(response.usage, cost_usd=cost)
        response = replaced(response, usage=u)
        charge(u)
        if span.is_recording():
            also: dict[str, Any] = {RESPONSE_MODEL: response.model, RESPONSE_FINISH_REASONS: (response.stop_reason,)}
            if response.id:
                also[RESPONSE_ID] = response.id
            if cost is not None:
                also[USAGE_COST_USD] = cost
            spans.record_usage(
                span, u.input_tokens, u.output_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens, also
            )
            if capturing:
                spans.record_content(
                    span,
                    OUTPUT_MESSAGES,
                    lambda: [{**_semconv("assistant", response.content), "finish_reason": response.stop_reason}],
                )
        # Calls written as text, read and run when they are unambiguous (llm/text_calls.py). Here, not in a backend:
        # a recording, a durable step and the span's content keep the reply as the model wrote it, and a replay
        # reads it again.
        if request.tools and reads_text_calls(model) and (read := as_tool_calls(response, request.tools)):
            response = read
            if span.is_recording():
                span.set_attribute(TEXT_TOOL_CALLS, tuple(u.name for u in read.tool_uses))
    return response


def timed_out(model: str, seconds: float) -> ModelError:
    """The `timeout` error of a call of `model` cut off after `seconds`, the run's call timeout: with the
    settings that raise it, since a slow local model may need far more than the default."""
    return ModelError(
        "timeout",
        f"the {model} call took longer than {seconds:g} s; raise the call timeout (MCP_TEAM_CALL_TIMEOUT or "
        "--call-timeout, or call_timeout under [supervisor] in the team file) if the model needs longer",
    )


def _semconv(role: str, blocks: Sequence[ContentBlock]) -> dict[str, Any]:
    """A message in the GenAI conventions' JSON shape (role + typed parts)."""
    parts: list[dict[str, Any]] = []
    for b in blocks:
        if isinstance(b, TextBlock):
            parts.append({"type": "text", "content": b.text})
        elif isinstance(b, ToolUseBlock):
            parts.append({"type": "tool_call", "id": b.id, "name": b.name, "arguments": b.input})
        else:
            parts.append({"type": "tool_call_response", "id": b.tool_use_id, "result": b.content})
    return {"role": "tool" if parts and all(p["type"] == "tool_call_response" for p in parts) else role, "parts": parts}
