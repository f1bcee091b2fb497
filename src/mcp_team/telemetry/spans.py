"""Span helpers: one function per kind of step, so every span has the same shape.

Helpers take plain values (names, ids, counts) and never import the engine. When no SDK
`TracerProvider` is installed the OpenTelemetry API hands out non-recording spans and these
helpers cost a few microseconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar

import anyio
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from mcp_team.telemetry import attributes as A

_tracer = trace.get_tracer("mcp_team")
_conversation_id: ContextVar[str | None] = ContextVar("mcp_team_conversation_id", default=None)


@contextmanager
def conversation(run_id: str) -> Iterator[None]:
    """Stamp `gen_ai.conversation.id` on every span started inside this block."""
    token = _conversation_id.set(run_id)
    try:
        yield
    finally:
        _conversation_id.reset(token)


@contextmanager
def _span(name: str, kind: SpanKind, attributes: dict[str, str | int]) -> Iterator[Span]:
    run_id = _conversation_id.get()
    if run_id is not None:
        attributes[A.CONVERSATION_ID] = run_id
    with _tracer.start_as_current_span(
        name, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield span
        except anyio.get_cancelled_exc_class():
            # Cancellation is a BaseException that OTel would not record: without this a
            # cancelled branch looks like a success in Jaeger.
            mark_error(span, "cancelled")
            raise
        except Exception as exc:
            mark_error(span, getattr(exc, "kind", None) or type(exc).__name__, exc)
            raise


def mark_error(span: Span, error_type: str, exc: BaseException | None = None, message: str = "") -> None:
    """Mark a span failed with a low-cardinality `error.type` (and the exception, if any)."""
    if not span.is_recording():
        return
    span.set_attribute(A.ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, message or (str(exc) if exc else error_type)))
    if exc is not None:
        span.record_exception(exc)


def agent_span(
    agent: str, *, description: str = "", agent_id: str = "", provider: str = ""
) -> AbstractContextManager[Span]:
    """`invoke_agent {agent}`: one run of the supervisor or a specialist."""
    attrs: dict[str, str | int] = {A.OPERATION_NAME: A.OP_INVOKE_AGENT, A.AGENT_NAME: agent}
    if description:
        attrs[A.AGENT_DESCRIPTION] = description
    if agent_id:
        attrs[A.AGENT_ID] = agent_id
    if provider:
        attrs[A.PROVIDER_NAME] = provider
    return _span(f"{A.OP_INVOKE_AGENT} {agent}", SpanKind.INTERNAL, attrs)


def plan_span(agent: str) -> AbstractContextManager[Span]:
    """`plan {agent}`: the planning step of planned mode (its model call is a child)."""
    attrs: dict[str, str | int] = {A.OPERATION_NAME: A.OP_PLAN, A.AGENT_NAME: agent}
    return _span(f"{A.OP_PLAN} {agent}", SpanKind.INTERNAL, attrs)


def chat_span(model: str, provider: str, phase: str, max_tokens: int) -> AbstractContextManager[Span]:
    """`chat {model}`: one model call."""
    attrs: dict[str, str | int] = {
        A.OPERATION_NAME: A.OP_CHAT,
        A.PROVIDER_NAME: provider,
        A.REQUEST_MODEL: model,
        A.REQUEST_MAX_TOKENS: max_tokens,
        A.PHASE: phase,
    }
    return _span(f"{A.OP_CHAT} {model}", SpanKind.CLIENT, attrs)


def tool_span(tool: str, call_id: str, agent: str) -> AbstractContextManager[Span]:
    """`execute_tool {tool}`: a specialist's own tool."""
    attrs: dict[str, str | int] = {
        A.OPERATION_NAME: A.OP_EXECUTE_TOOL,
        A.TOOL_NAME: tool,
        A.TOOL_CALL_ID: call_id,
        A.TOOL_TYPE: "function",
        A.AGENT_NAME: agent,
    }
    return _span(f"{A.OP_EXECUTE_TOOL} {tool}", SpanKind.INTERNAL, attrs)


def transfer_span(
    source: str, target: str, call_id: str, handoff_id: str, attempt: int
) -> AbstractContextManager[Span]:
    """`execute_tool transfer_to_{target}`: a handoff; the target's `invoke_agent` is its child."""
    tool = f"transfer_to_{target}"
    attrs: dict[str, str | int] = {
        A.OPERATION_NAME: A.OP_EXECUTE_TOOL,
        A.TOOL_NAME: tool,
        A.TOOL_CALL_ID: call_id,
        A.TOOL_TYPE: "function",
        A.AGENT_NAME: source,
        A.TRANSFER_MODE: "return_to_caller",
        A.TRANSFER_TARGET_NAME: target,
        A.HANDOFF_ID: handoff_id,
        A.HANDOFF_ATTEMPT: attempt,
    }
    return _span(f"{A.OP_EXECUTE_TOOL} {tool}", SpanKind.INTERNAL, attrs)


def record_usage(
    span: Span, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_creation: int = 0
) -> None:
    """Token usage on a `chat` span, or summed totals on an `invoke_agent` span."""
    if not span.is_recording():
        return
    span.set_attribute(A.USAGE_INPUT_TOKENS, input_tokens)
    span.set_attribute(A.USAGE_OUTPUT_TOKENS, output_tokens)
    if cache_read:
        span.set_attribute(A.USAGE_CACHE_READ_INPUT_TOKENS, cache_read)
    if cache_creation:
        span.set_attribute(A.USAGE_CACHE_CREATION_INPUT_TOKENS, cache_creation)


def current_trace_id() -> str | None:
    """The current trace id as 32 hex digits, or None when nothing is being traced."""
    ctx = trace.get_current_span().get_span_context()
    return trace.format_trace_id(ctx.trace_id) if ctx.is_valid else None
