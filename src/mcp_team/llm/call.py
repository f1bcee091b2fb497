"""Making a model call: the member's model, its endpoint's limits, a timeout, a budget check, the
fallback model when the primary keeps failing, the cost, and the `chat` span, in the one place every
caller goes through."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from mcp_team.llm.cost import call_cost, priced
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


class Meter(Protocol):
    """Something that counts model calls, tokens and cost against a budget (see handoffs.budget)."""

    def before_call(self, input_tokens: int) -> None:
        """Raise `mcp_team.errors.BudgetExhausted` when no further call is allowed; `input_tokens` is
        the estimated size of the call's prompt."""

    def after_call(self, usage: Usage) -> None:
        """Charge a finished call's tokens and cost."""

    def used_fallback(self, note: str) -> None:
        """A fallback model answered instead of the primary; `note` says which and why."""


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

    When the primary model fails in a way another model may not (overloaded, rate limited, timed out,
    failing after the SDK's retries) and a fallback is configured, the fallback answers instead (its own
    span, limiter and cost), and the meter is told.

    The meter is charged here, around `model.complete`, never inside it: a model wrapped so its
    calls are durable steps returns a recorded call without running it, and the call is still
    charged once in the process that replays it.
    """
    model = models.for_member(request.member, role)
    prompt_tokens = estimate_input_tokens(request)  # once: the meter and the limiter both charge it
    if meter is not None:
        meter.before_call(prompt_tokens)
    try:
        response = await _call(models, model, request, timeout, prompt_tokens, meter=meter)
    except ModelError as exc:
        if meter is not None and not priced(model):  # unknown, as its answered calls' cost is, never $0
            meter.after_call(UNKNOWN_SPEND)
        fallback = models.fallback_for(request.member, role)
        if fallback is None or fallback is model or exc.kind not in TRANSIENT:
            raise
        note = f"{fallback.provider}:{fallback.name} answered for {model.provider}:{model.name} ({exc.kind})"
        response = await _call(models, fallback, request, timeout, prompt_tokens, fallback_for=note, meter=meter)
        if meter is not None:
            meter.used_fallback(note)
    if meter is not None:
        meter.after_call(response.usage)
    return response


async def _call(
    models: ModelSet,
    model: Model,
    request: ModelRequest,
    timeout: float | None,
    prompt_tokens: int,
    fallback_for: str | None = None,
    meter: Meter | None = None,
) -> ModelResponse:
    """One call of `model`, in its endpoint's limiter, with a timeout and its span; the usage priced.
    `prompt_tokens`: the request's `estimate_input_tokens`. A call cut off once sent is charged to `meter` as
    `UNKNOWN_SPEND`."""
    with spans.chat_span(model.name, model.provider, request.phase, request.max_tokens) as span:
        if fallback_for is not None and span.is_recording():
            span.set_attribute(FALLBACK_MODEL, fallback_for)
        if capturing := spans.capturing(span):
            spans.record_content(span, SYSTEM_INSTRUCTIONS, lambda: [{"type": "text", "content": request.system}])
            spans.record_content(span, INPUT_MESSAGES, lambda: [_semconv(m.role, m.blocks) for m in request.messages])
        async with models.limiter_for(model).slot(prompt_tokens + request.max_tokens):
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
                    if meter is not None:
                        meter.after_call(UNKNOWN_SPEND)
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
