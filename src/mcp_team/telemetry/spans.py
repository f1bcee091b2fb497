"""Span helpers: one function per kind of step, so every span has the same shape.

Helpers take plain values (names, ids, counts) and never import the engine. When no SDK
`TracerProvider` is installed the OpenTelemetry API hands out non-recording spans and these
helpers cost a few microseconds.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from opentelemetry import context, trace
from opentelemetry.trace import NonRecordingSpan, Span, SpanKind, Status, StatusCode

from mcp_team.telemetry import attributes as A
from mcp_team.telemetry import content

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor

_conversation_id: ContextVar[str | None] = ContextVar("mcp_team_conversation_id", default=None)


@contextmanager
def conversation(run_id: str) -> Iterator[None]:
    """Stamp `gen_ai.conversation.id` on every span started inside this block, and on the span that
    encloses it (e.g. the MCP SDK's `tools/call` span), so a tag search finds the whole request."""
    enclosing = trace.get_current_span()
    if enclosing.is_recording():
        enclosing.set_attribute(A.CONVERSATION_ID, run_id)
    token = _conversation_id.set(run_id)
    try:
        yield
    finally:
        _conversation_id.reset(token)


# Starts a span: `start(name, kind, attributes)`. The attributes' names are non-empty strings (the helpers below
# name each one from `attributes`); their values may be anything a caller passed.
Start = Callable[[str, SpanKind, dict[str, Any]], Span]
_caller_start: ContextVar[Start | None] = ContextVar("mcp_team_span_start", default=None)


def use_tracing(
    provider: trace.TracerProvider | None = None, *, processors: Iterable[SpanProcessor] = ()
) -> AbstractContextManager[trace.TracerProvider]:
    """Send the spans of everything run inside this block to `provider` instead of the global one.

    Without a provider, a new SDK `TracerProvider` is made; `processors` are added to the provider either
    way. For a library user who sends spans somewhere of their own, or a test that collects them in memory:

        with use_tracing(processors=[SimpleSpanProcessor(InMemorySpanExporter())]):
            result = await team.run("...")

    The choice follows the context (a `ContextVar`), so concurrent runs may each trace to their own
    provider, and tasks a run starts inherit it. Yields the provider (flush or shut it down as you need).
    A wrong `provider` or `processors` is a `TypeError` here, at the call, not when the first span starts.
    """
    _check_provider(provider)
    processors = _checked_processors(processors)
    if processors and provider is not None and not callable(getattr(provider, "add_span_processor", None)):
        raise TypeError(f"use_tracing: {type(provider).__name__} takes no span processors; pass an SDK "
                        "TracerProvider (opentelemetry.sdk.trace.TracerProvider()), or add them to yours")  # fmt: skip
    return _tracing_to(provider, processors)


def _check_provider(provider: object) -> None:
    if provider is None or isinstance(provider, trace.TracerProvider):
        return
    if isinstance(provider, type) and issubclass(provider, trace.TracerProvider):
        raise TypeError(f"use_tracing: provider= is the class {provider.__name__}, not a tracer provider; "
                        f"pass an instance, e.g. {provider.__name__}()")  # fmt: skip
    raise TypeError(f"use_tracing: provider= must be an OpenTelemetry TracerProvider (e.g. "
                    f"opentelemetry.sdk.trace.TracerProvider()), got {type(provider).__name__}")  # fmt: skip


def _checked_processors(processors: object) -> list[SpanProcessor]:
    """`processors` (any iterable, read once) as a list once each is an SDK span processor; `TypeError` naming the
    first that is not. A subclass of the SDK's `SpanProcessor`, not any object with its methods: the SDK's provider
    calls hooks of that base class on each (`_on_ending`), which an object merely shaped like one lacks."""
    if isinstance(processors, Sequence) and not isinstance(processors, str) and not processors:
        return []
    # The SDK only now: a caller who passes processors has it loaded already (off the start-up path otherwise).
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.export import SpanExporter

    wanted = "a list of span processors, e.g. processors=[SimpleSpanProcessor(exporter)]"
    if isinstance(processors, SpanProcessor):
        raise TypeError(f"use_tracing: processors= takes {wanted}, got one {type(processors).__name__}; "
                        "put it in a list")  # fmt: skip
    if isinstance(processors, (str, bytes)) or not isinstance(processors, Iterable):
        raise TypeError(f"use_tracing: processors= takes {wanted}, got {type(processors).__name__}")
    taken = list(processors)  # any iterable, read once
    for i, p in enumerate(taken):
        if isinstance(p, SpanProcessor):
            continue
        if isinstance(p, type) and issubclass(p, SpanProcessor):
            hint = f"the class {p.__name__}; pass an instance, e.g. {p.__name__}(exporter)"
        elif isinstance(p, type) and issubclass(p, SpanExporter):
            hint = f"the exporter class {p.__name__}; pass a processor with one: SimpleSpanProcessor({p.__name__}())"
        elif isinstance(p, SpanExporter):
            hint = f"an exporter ({type(p).__name__}); wrap it: SimpleSpanProcessor(exporter) or BatchSpanProcessor"
        else:
            hint = f"{type(p).__name__}, not a span processor"
        raise TypeError(f"use_tracing: processors[{i}] is {hint}")
    return taken


@contextmanager
def _tracing_to(
    provider: trace.TracerProvider | None, processors: list[SpanProcessor]
) -> Iterator[trace.TracerProvider]:
    if provider is None:
        from opentelemetry.sdk.trace import TracerProvider  # the SDK only when asked: off the start-up path

        provider = TracerProvider(shutdown_on_exit=False)
    for processor in processors:
        provider.add_span_processor(processor)  # type: ignore[attr-defined]  # checked in use_tracing
    token = _caller_start.set(_starter_for(provider.get_tracer("mcp_team")))
    try:
        yield provider
    finally:
        _caller_start.reset(token)


def _starter_for(tracer: trace.Tracer) -> Start:
    """How to start a span on `tracer`: its own public `start_span`."""

    def start(name: str, kind: SpanKind, attributes: dict[str, Any]) -> Span:
        return tracer.start_span(
            name, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
        )

    return start


_global_proxy: trace.Tracer | None = None
_global_start: tuple[object, Start] | None = None


def _starter() -> Start | _Unrecorded:
    """How to start a span now: on the caller's tracer (`use_tracing`), else on the global provider's; or, when
    no provider is installed at all and the current span is not recorded, that span's scope (`_Unrecorded`).

    The global tracer is asked for once: before a provider is installed it is the API's proxy, which
    finds the provider itself when one comes (asking the API again for every span cost ~10 us each, an
    environment lookup and a new proxy, with tracing off). What the proxy resolves to is looked at on
    every span, as a provider may be installed at any time; the starter is made once per tracer."""
    global _global_proxy, _global_start
    if (caller := _caller_start.get()) is not None:
        return caller
    if _global_proxy is None:
        _global_proxy = trace.get_tracer("mcp_team")
    # The API proxy's real tracer when it has one (its no-op tracer until a provider is installed); a tracer that
    # is no proxy is the real one.
    tracer = _global_proxy._tracer if type(_global_proxy) is trace.ProxyTracer else _global_proxy
    if type(tracer) is trace.NoOpTracer:
        # Tracing is off. The no-op tracer's span is the current span itself when that one is not recorded (the
        # usual case: no span anywhere); making it current again and ending it change nothing, so its scope
        # does nothing, and the span helpers build no attributes for it.
        current = trace.get_current_span()
        if isinstance(current, NonRecordingSpan):
            return _Unrecorded(current)
    if _global_start is None or _global_start[0] is not tracer:
        _global_start = (tracer, _starter_for(tracer))
    return _global_start[1]


class _Unrecorded:
    """The scope of a span the no-op tracer gives back as it is: the current one (see `_starter`)."""

    __slots__ = ("span",)

    def __init__(self, span: Span) -> None:
        self.span = span

    def __enter__(self) -> Span:
        return self.span

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, _tb: object) -> None:
        return None


class _SpanScope:
    """Start a span, make it current, and mark it failed or cancelled on the way out.

    A small class rather than `start_as_current_span`: this is on every handoff's hot path and
    the generator-based context managers cost several times more.
    """

    __slots__ = ("span", "token")

    def __init__(self, start: Start, name: str, kind: SpanKind, attributes: dict[str, str | int]) -> None:
        run_id = _conversation_id.get()
        if run_id is not None:
            attributes[A.CONVERSATION_ID] = run_id
        self.span = start(name, kind, attributes)

    def __enter__(self) -> Span:
        self.token = context.attach(trace.set_span_in_context(self.span))
        return self.span

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, _tb: object) -> None:
        try:
            if isinstance(exc, Exception):
                mark_error(self.span, getattr(exc, "kind", None) or type(exc).__name__, exc)
            elif exc is not None:
                # Cancellation (or an interrupt) is a BaseException that OTel would not record:
                # without this a cancelled branch looks like a success in Jaeger.
                mark_error(self.span, "cancelled")
        finally:
            context.detach(self.token)
            self.span.end()


def mark_error(span: Span, error_type: str, exc: BaseException | None = None, message: str = "") -> None:
    """Mark a span failed with a low-cardinality `error.type` (and the exception, if any)."""
    if not span.is_recording():
        return
    span.set_attribute(A.ERROR_TYPE, error_type)
    # Error text can quote what the user or a tool said, so it is redacted like captured content.
    span.set_status(Status(StatusCode.ERROR, content.redact(message or (str(exc) if exc else error_type))))
    if exc is not None:
        stack = "".join(traceback.format_exception(exc))
        span.record_exception(
            exc,
            attributes={"exception.message": content.redact(str(exc)), "exception.stacktrace": content.redact(stack)},
        )


def agent_span(
    agent: str, *, description: str = "", agent_id: str = "", provider: str = ""
) -> AbstractContextManager[Span]:
    """`invoke_agent {agent}`: one run of the supervisor or a specialist."""
    if isinstance(start := _starter(), _Unrecorded):
        return start
    attrs: dict[str, str | int] = {A.OPERATION_NAME: A.OP_INVOKE_AGENT, A.AGENT_NAME: agent}
    if description:
        attrs[A.AGENT_DESCRIPTION] = description
    if agent_id:
        attrs[A.AGENT_ID] = agent_id
    if provider:
        attrs[A.PROVIDER_NAME] = provider
    return _SpanScope(start, f"{A.OP_INVOKE_AGENT} {agent}", SpanKind.INTERNAL, attrs)


def plan_span(agent: str) -> AbstractContextManager[Span]:
    """`plan {agent}`: the planning step of planned mode (its model call is a child)."""
    if isinstance(start := _starter(), _Unrecorded):
        return start
    attrs: dict[str, str | int] = {A.OPERATION_NAME: A.OP_PLAN, A.AGENT_NAME: agent}
    return _SpanScope(start, f"{A.OP_PLAN} {agent}", SpanKind.INTERNAL, attrs)


def chat_span(model: str, provider: str, phase: str, max_tokens: int) -> AbstractContextManager[Span]:
    """`chat {model}`: one model call."""
    if isinstance(start := _starter(), _Unrecorded):
        return start
    attrs: dict[str, str | int] = {
        A.OPERATION_NAME: A.OP_CHAT,
        A.PROVIDER_NAME: provider,
        A.REQUEST_MODEL: model,
        A.REQUEST_MAX_TOKENS: max_tokens,
        A.PHASE: phase,
    }
    return _SpanScope(start, f"{A.OP_CHAT} {model}", SpanKind.CLIENT, attrs)


def tool_span(tool: str, call_id: str, agent: str) -> AbstractContextManager[Span]:
    """`execute_tool {tool}`: a specialist's own tool."""
    if isinstance(start := _starter(), _Unrecorded):
        return start
    attrs: dict[str, str | int] = {
        A.OPERATION_NAME: A.OP_EXECUTE_TOOL,
        A.TOOL_NAME: tool,
        A.TOOL_CALL_ID: call_id,
        A.TOOL_TYPE: "function",
        A.AGENT_NAME: agent,
    }
    return _SpanScope(start, f"{A.OP_EXECUTE_TOOL} {tool}", SpanKind.INTERNAL, attrs)


def transfer_span(
    source: str, target: str, call_id: str, handoff_id: str, attempt: int
) -> AbstractContextManager[Span]:
    """`execute_tool transfer_to_{target}`: a handoff; the target's `invoke_agent` is its child."""
    if isinstance(start := _starter(), _Unrecorded):
        return start
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
    return _SpanScope(start, f"{A.OP_EXECUTE_TOOL} {tool}", SpanKind.INTERNAL, attrs)


def step_span(
    operation: str, target: str, attributes: dict[str, str | int] | None = None
) -> AbstractContextManager[Span]:
    """`{operation} {target}`: a step of a run that is not a model or tool call, e.g. `checkpoint plan`,
    `quality_gate writer`, `judge conflict-1`. `mcp_team.*` attributes say what happened."""
    if isinstance(start := _starter(), _Unrecorded):
        return start
    attrs: dict[str, str | int] = {A.OPERATION_NAME: operation, **(attributes or {})}
    return _SpanScope(start, f"{operation} {target}", SpanKind.INTERNAL, attrs)


def record_usage(
    span: Span,
    input_tokens: int,
    output_tokens: int,
    cache_read: int = 0,
    cache_creation: int = 0,
    also: dict[str, Any] | None = None,
) -> None:
    """Token usage on a `chat` span, or summed totals on an `invoke_agent` span; `also`: other attributes
    to set with them."""
    if not span.is_recording():
        return
    # One call, not one per key: each takes the span's lock and copies its attributes (every model call).
    usage: dict[str, Any] = {A.USAGE_INPUT_TOKENS: input_tokens, A.USAGE_OUTPUT_TOKENS: output_tokens}
    if cache_read:
        usage[A.USAGE_CACHE_READ_INPUT_TOKENS] = cache_read
    if cache_creation:
        usage[A.USAGE_CACHE_CREATION_INPUT_TOKENS] = cache_creation
    if also:
        usage.update(also)
    span.set_attributes(usage)


def capturing(span: Span) -> bool:
    """Whether `record_content` records on `span`: one check for a site that records several contents, so
    the hot path builds no closures for them when capture is off (the default)."""
    return span.is_recording() and content.capture_enabled()


def record_content(span: Span, key: str, value: Callable[[], Any]) -> None:
    """Record content (prompts, payloads, results) as a redacted, truncated JSON attribute, only when
    capture is on. `value` is a function so nothing is built when it is off."""
    if span.is_recording() and content.capture_enabled():
        span.set_attribute(key, content.to_json(value()))


def current_trace_id() -> str | None:
    """The current trace id as 32 hex digits, or None when nothing is being traced."""
    ctx = trace.get_current_span().get_span_context()
    return trace.format_trace_id(ctx.trace_id) if ctx.is_valid else None
