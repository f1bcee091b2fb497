"""Starting mcp_team's own spans on an OpenTelemetry SDK tracer without the SDK's generic start path.

A handoff starts three spans. The SDK's `Tracer.start_span` is generic: it asks the sampler, cleans
every attribute value through a chain of ABC checks (and again on each `set_attributes`), and builds
two bounded lists and a lock-guarded attribute map: with tracing on, spans cost a handoff nearly as
much as the rest of the engine did (`benchmarks/instructions.py` counts both). Our spans' attributes
are plain `str`/`int` values, and nearly every provider runs the SDK's defaults (the parent-based
always-on sampler, no attribute length limit, its internal metrics off), so for those `start` builds
the SDK's own span class with that work skipped: processors, exporters and callers get a real SDK span
with the same fields `start_span` gives it. Any other set-up (a sampler of one's own, an attribute
length limit, a disabled tracer, the SDK's metrics on, values that are not plain) goes through
`Tracer.start_span` unchanged.

Hand-written on purpose (the SDK has no cheaper way in); it reads a few private fields of the SDK's
`Tracer`, so tests/test_fastspan.py compares its spans with `start_span`'s field by field: an SDK release
that changes them fails there, not in users' traces.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, ValuesView
from time import time_ns
from typing import Any, cast

from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import ReadableSpan, Tracer, _check_span_ended, _Span
from opentelemetry.sdk.trace._tracer_metrics import NoOpTracerMetrics
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, DEFAULT_ON
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
)
from opentelemetry.util.types import AnyValue

from mcp_team.telemetry.spans import Start  # spans imports this module only when a span starts: no cycle

_PLAIN = frozenset({str, int, float, bool})
_PLAIN_OR_TUPLE = _PLAIN | {tuple}
_STR = frozenset({str})
_UNSET = Status(StatusCode.UNSET)
_SAMPLED = TraceFlags.SAMPLED
_RANDOM = TraceFlags.RANDOM_TRACE_ID
_FLAGS = tuple(TraceFlags(bits) for bits in range(4))  # immutable ints: one of each, shared by the spans
_new = object.__new__


def _plain(attributes: Mapping[str, Any]) -> bool:
    """Whether the SDK's cleaning would keep `attributes` as they are: non-empty `str` keys, scalar values or
    tuples of scalars. (`issuperset` over `map`: this runs for every span, and a generator cost 3x more.)"""
    if not _STR.issuperset(map(type, attributes)) or "" in attributes:
        return False
    return _plain_values(attributes.values())


def _plain_values(values: ValuesView[Any]) -> bool:
    """The values half of `_plain`: scalars, or tuples of scalars."""
    if _PLAIN.issuperset(map(type, values)):
        return True
    return _PLAIN_OR_TUPLE.issuperset(map(type, values)) and all(
        _PLAIN.issuperset(map(type, value)) for value in values if type(value) is tuple
    )


def starter(api_tracer: trace.Tracer) -> Start | None:
    """A `start(name, kind, attributes)` for `api_tracer` when it is an SDK tracer whose set-up lets spans skip the
    generic path, else None.

    Decided once per tracer: the sampler, the limits and the metrics hook are fixed when a provider hands
    out its tracer. Whether the tracer is enabled can change, and a caller may reassign its public fields
    (sampler, span processor, id generator), so `start` looks at those on every span."""
    if type(api_tracer) is not Tracer:
        return None
    tracer = cast(Tracer, api_tracer)
    try:
        eligible = (
            (tracer.sampler is DEFAULT_ON or tracer.sampler is ALWAYS_ON)
            and tracer._span_limits.max_span_attribute_length is None
            and isinstance(tracer._tracer_metrics, NoOpTracerMetrics)
            and isinstance(tracer._tracer_config.is_enabled, bool)
        )
    except AttributeError:  # an SDK whose internals moved: its own path is always right
        return None
    if not eligible:
        return None
    sampler = tracer.sampler
    always = sampler is ALWAYS_ON
    ids, processors = tracer.id_generator, tracer.span_processor
    max_attributes = tracer._span_limits.max_span_attributes

    def start(name: str, kind: SpanKind, attributes: dict[str, Any]) -> Span:
        if (
            not tracer._tracer_config.is_enabled
            # A public field reassigned since the starter was made: the SDK's path reads them per span.
            or tracer.sampler is not sampler
            or tracer.span_processor is not processors
            or tracer.id_generator is not ids
            or (max_attributes is not None and len(attributes) > max_attributes)
            # The names are non-empty strings (`spans` names every attribute from `attributes`): the values only.
            or not _plain_values(attributes.values())
        ):
            return tracer.start_span(
                name, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
            )
        parent: SpanContext | None = trace.get_current_span().get_span_context()
        if type(parent) is not SpanContext:  # none, or a context of some other kind: the SDK's to judge
            return tracer.start_span(
                name, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
            )
        # A `SpanContext` is a tuple whose fields are properties, a call each: read it at once.
        state: TraceState | None
        trace_id, _, _, parent_flags, state, valid = parent
        if valid:
            sampled = always or bool(parent_flags & _SAMPLED)
            flags = _FLAGS[(_SAMPLED if sampled else 0) | (parent_flags & _RANDOM)]
        else:
            parent, trace_id, state, sampled = None, ids.generate_trace_id(), None, True
            flags = _FLAGS[_SAMPLED | (_RANDOM if ids.is_trace_id_random() else 0)]
        context = SpanContext(trace_id, ids.generate_span_id(), False, flags, state)  # is_remote, flags, state
        if not sampled:
            return NonRecordingSpan(context)
        span = _FastSpan.started(name, context, parent, tracer, kind, dict(attributes))  # a copy, as the SDK's
        processors.on_start(span, parent_context=None)
        return span

    return start


class _FastSpan(_Span):
    """The SDK's span, built without its constructor's generic work, and with plain attributes set directly."""

    @classmethod
    def started(
        cls,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        tracer: Tracer,
        kind: SpanKind,
        attributes: dict[str, Any],
    ) -> _FastSpan:
        """The span, started now: the fields the SDK's constructor and `start` set, without their generic work
        (nor the SDK's `Span.__new__`, a guard against making its base class)."""
        self: _FastSpan = _new(cls)
        limits = tracer._span_limits
        self._name, self._context, self._parent, self._kind = name, context, parent, kind
        self._instrumentation_info = tracer.instrumentation_info
        self._instrumentation_scope = tracer._instrumentation_scope
        self._resource, self._status = tracer.resource, _UNSET
        self._end_time = None
        self._sampler, self._trace_config = tracer.sampler, None
        self._record_exception = self._set_status_on_exception = False
        self._span_processor, self._limits = tracer.span_processor, limits
        self._lock = threading.Lock()
        # `BoundedAttributes(limits.max_span_attributes, attributes, immutable=False)` holding `attributes` as they
        # are (plain, checked by `start`: what cleaning would keep), without its checks and cleaning loop.
        bounded: BoundedAttributes = _new(BoundedAttributes)
        bounded._dict, bounded.maxlen, bounded.dropped, bounded.max_value_len = (
            attributes,
            limits.max_span_attributes,
            0,
            None,  # `start` is used only without an attribute length limit
        )
        bounded._lock, bounded._immutable = threading.Lock(), False
        self._attributes = bounded
        # Few spans get an event (an exception) and ours never a link: the SDK's bounded lists come with the first.
        self._events = self._links = ()
        self._record_end_metrics = None
        self._start_time = time_ns()  # `Span.start` without its lock and checks: nothing else holds the span yet
        return self

    def get_span_context(self) -> SpanContext:  # the SDK's, without its `typing.cast` call: every child asks it
        return self._context  # type: ignore[return-value]  # set when started

    def _readable_span(self) -> ReadableSpan:
        """What the SDK's gives (the fields `ReadableSpan.__init__` sets), without its thirteen keyword arguments
        and the `kind` property: on every span's end."""
        readable: ReadableSpan = _new(ReadableSpan)
        readable._name, readable._context, readable._kind = self._name, self._context, self._kind
        readable._instrumentation_info = self._instrumentation_info
        readable._instrumentation_scope = self._instrumentation_scope
        readable._parent, readable._start_time, readable._end_time = self._parent, self._start_time, self._end_time
        # Nothing dropped (the usual case): the attributes' own dict, which no one writes once the span ended. A
        # span that ends waits in the exporter's queue, and the map and lock around it would wait there too, making
        # the garbage collector's old generation grow and full collections come sooner.
        attributes: Any = self._attributes
        readable._attributes = attributes._dict if not attributes.dropped else attributes
        readable._events, readable._links = self._events, self._links
        readable._resource, readable._status = self._resource, self._status
        return readable

    @_check_span_ended  # the SDK's own guard: under the span's lock, a warning once it has ended
    def _add_event(self, event: Any) -> None:
        if type(self._events) is tuple:
            self._events = BoundedList(self._limits.max_events)
        cast(BoundedList, self._events).append(event)

    @_check_span_ended
    def _add_link(self, link: Any) -> None:
        if type(self._links) is tuple:
            self._links = BoundedList(self._limits.max_links)
        cast(BoundedList, self._links).append(link)

    def set_attributes(self, attributes: Mapping[str, AnyValue]) -> None:
        if _plain(attributes):
            values, maxlen = self._attributes._dict, self._limits.max_span_attributes  # type: ignore[union-attr]
            with self._lock:  # the limit is checked under the lock, as the SDK does
                if self._end_time is None and (maxlen is None or len(values) + len(attributes) <= maxlen):
                    if not values.keys().isdisjoint(attributes):
                        for key in values.keys() & attributes.keys():
                            del values[key]  # the SDK puts a key it had again at the end
                    values.update(attributes)
                    return
        super().set_attributes(attributes)

    def set_attribute(self, key: str, value: AnyValue) -> None:
        if type(key) is str and key:
            self.set_attributes({key: value})
        else:  # the SDK drops a key that is not a non-empty str here (where `set_attributes` would str() it)
            super().set_attribute(key, value)

    def __repr__(self) -> str:  # as the SDK's span says it, in logs
        return f'_Span(name="{self._name}", context={self._context})'
