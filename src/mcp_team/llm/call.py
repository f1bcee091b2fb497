"""Making a model call: the role's model, the backend's concurrency limit, a timeout, a budget check
and the `chat` span, in the one place every caller goes through."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from mcp_team.llm.limits import EndpointLimiter, EndpointLimits, Limiters
from mcp_team.llm.types import (
    ContentBlock,
    Model,
    ModelError,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolUseBlock,
    Usage,
)
from mcp_team.telemetry import spans
from mcp_team.telemetry.attributes import (
    INPUT_MESSAGES,
    OUTPUT_MESSAGES,
    RESPONSE_FINISH_REASONS,
    RESPONSE_ID,
    RESPONSE_MODEL,
    SYSTEM_INSTRUCTIONS,
)

SUPERVISOR = "supervisor"  # a model role, and the member name of the supervisor's requests
SPECIALIST = "specialist"
PLANNER = "planner"  # the member name of planning requests (made on the supervisor's model)


class Meter(Protocol):
    """Something that counts model calls and tokens against a budget (see handoffs.budget)."""

    def before_call(self) -> None:
        """Raise `mcp_team.errors.BudgetExhausted` when no further call is allowed."""

    def after_call(self, usage: Usage) -> None:
        """Charge a finished call's tokens."""


@dataclass
class ModelSet:
    """The models of one backend, by role, sharing one concurrency limit.

    Parallel branches of a run (and concurrent runs of a server) all go through `limiter`, so
    they can never exceed what the provider allows at once.
    """

    models: Mapping[str, Model]
    max_concurrency: int = 8
    members: Mapping[str, Model] = field(default_factory=dict)  # a specialist's own model, by its name
    limits: Limiters | None = None  # per-endpoint limits; None: `max_concurrency` per endpoint, no rates
    limiter: anyio.CapacityLimiter = field(init=False)

    def __post_init__(self) -> None:
        if SUPERVISOR not in self.models or SPECIALIST not in self.models:
            raise ValueError("a ModelSet needs a 'supervisor' and a 'specialist' model")
        self.limiter = anyio.CapacityLimiter(self.max_concurrency)

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

    def limiter_for(self, model: Model) -> EndpointLimiter:
        """The limiter of the endpoint `model` calls (see `llm.limits`)."""
        if self.limits is None:
            self.limits = Limiters(EndpointLimits(max_concurrency=self.max_concurrency))
        return self.limits.for_model(model)

    @property
    def provider(self) -> str:
        return self.models[SUPERVISOR].provider


async def chat(
    models: ModelSet,
    role: str,
    request: ModelRequest,
    *,
    timeout: float | None = None,
    meter: Meter | None = None,
) -> ModelResponse:
    """One model call for `role`, traced as `chat {model}`. Raises `ModelError`, or `BudgetExhausted` from `meter`.

    The meter is charged here, around `model.complete`, never inside it: a model wrapped so its
    calls are durable steps returns a recorded call without running it, and the call is still
    charged once in the process that replays it.
    """
    model = models.for_role(role)
    if meter is not None:
        meter.before_call()
    with spans.chat_span(model.name, model.provider, request.phase, request.max_tokens) as span:
        spans.record_content(span, SYSTEM_INSTRUCTIONS, lambda: [{"type": "text", "content": request.system}])
        spans.record_content(span, INPUT_MESSAGES, lambda: [_semconv(m.role, m.blocks) for m in request.messages])
        async with models.limiter:
            with anyio.move_on_after(timeout) as limit:
                response = await model.complete(request)
            if limit.cancelled_caught:
                raise ModelError("timeout", f"the {model.name} call took longer than {timeout:g} s")
        u = response.usage
        if span.is_recording():
            span.set_attribute(RESPONSE_MODEL, response.model)
            span.set_attribute(RESPONSE_FINISH_REASONS, [response.stop_reason])
            if response.id:
                span.set_attribute(RESPONSE_ID, response.id)
            spans.record_content(
                span,
                OUTPUT_MESSAGES,
                lambda: [{**_semconv("assistant", response.content), "finish_reason": response.stop_reason}],
            )
            spans.record_usage(
                span, u.input_tokens, u.output_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens
            )
    if meter is not None:
        meter.after_call(u)
    return response


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
