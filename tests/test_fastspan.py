"""The lean span start (`telemetry.fastspan`) gives exactly the spans the SDK's `Tracer.start_span` gives.

The reference is the SDK's own path, taken by a provider whose sampler is a `ParentBased(ALWAYS_ON)` of its
own (the same sampling, but not the SDK's default object, so `fastspan` leaves it to the SDK).
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import context, trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, DEFAULT_ON, ParentBased, TraceIdRatioBased
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags, TraceState

from mcp_team import ModelSet, Team, use_tracing
from mcp_team.llm.offline import OfflineModel
from mcp_team.telemetry import attributes as A
from mcp_team.telemetry import fastspan

REQUEST = "Research bees, calculate 2+2 and write a short report"
# Differ from run to run whichever path made the span.
_PER_RUN = {A.CONVERSATION_ID, A.RESPONSE_ID, A.TOOL_CALL_ID}


def provider(sampler: Any = None, limits: SpanLimits | None = None) -> tuple[TracerProvider, InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    made = TracerProvider(sampler=sampler, span_limits=limits)
    made.add_span_processor(SimpleSpanProcessor(memory))
    return made, memory


def sdk_path() -> tuple[TracerProvider, InMemorySpanExporter]:
    return provider(ParentBased(ALWAYS_ON))


def shape(spans: tuple[ReadableSpan, ...]) -> list[tuple[Any, ...]]:
    """Each span as what a backend shows of it, ids and times aside; in a fixed order."""
    by_id = {s.context.span_id: s for s in spans}
    rows = []
    for s in spans:
        parent = by_id[s.parent.span_id].name if s.parent is not None else None
        run_id = (s.attributes or {}).get(A.CONVERSATION_ID)
        attrs = {k: "<run id>" if v == run_id else v for k, v in (s.attributes or {}).items() if k not in _PER_RUN}
        rows.append(
            (
                s.name,
                s.kind,
                parent,
                tuple(sorted(attrs.items())),
                s.status.status_code,
                tuple(e.name for e in s.events),
                len(s.links),
                (s.dropped_attributes, s.dropped_events, s.dropped_links),
                int(s.context.trace_flags),
                s.context.trace_state,
                s.context.is_remote,
                dict(s.resource.attributes),
                s.instrumentation_scope,
            )
        )
    return sorted(rows, key=repr)


@pytest.mark.anyio
async def test_a_team_run_traces_the_same_spans_on_both_paths() -> None:
    fast, fast_memory = provider()
    sdk, sdk_memory = sdk_path()
    assert fastspan.starter(fast.get_tracer("mcp_team")) is not None
    assert fastspan.starter(sdk.get_tracer("mcp_team")) is None
    team = Team(ModelSet.single(OfflineModel()))
    with use_tracing(fast):
        fast_result = await team.run(REQUEST)
    with use_tracing(sdk):
        sdk_result = await team.run(REQUEST)
    assert fast_result.status == sdk_result.status == "complete"
    fast_spans, sdk_spans = fast_memory.get_finished_spans(), sdk_memory.get_finished_spans()
    assert len(fast_spans) == len(sdk_spans) > 10
    assert shape(fast_spans) == shape(sdk_spans)
    # The fields `shape` leaves out: one trace per run, ids and times set, and an SDK span class either way.
    for spans in (fast_spans, sdk_spans):
        assert len({s.context.trace_id for s in spans}) == 1
        assert all(s.context.span_id and s.start_time and s.end_time and s.start_time <= s.end_time for s in spans)
        assert {(s.attributes or {}).get(A.CONVERSATION_ID) for s in spans} == {
            fast_result.run_id if spans is fast_spans else sdk_result.run_id
        }
    assert any(s.attributes.get(A.RESPONSE_FINISH_REASONS) for s in fast_spans if s.attributes)


def started(tracer: Any, parent: trace.Span | None, attributes: dict[str, Any]) -> tuple[trace.Span, trace.Span]:
    """The same span started on the fast path and through `start_span`, under `parent`."""
    token = context.attach(trace.set_span_in_context(parent)) if parent is not None else None
    try:
        start = fastspan.starter(tracer)
        assert start is not None
        fast = start("op", SpanKind.CLIENT, dict(attributes))
        reference = tracer.start_span("op", kind=SpanKind.CLIENT, attributes=dict(attributes))
    finally:
        if token is not None:
            context.detach(token)
    return fast, reference


def same_start(fast: trace.Span, reference: trace.Span) -> None:
    """Started alike: trace (a root's is new each time), flags, state, sampling, parent and attributes."""
    f, r = fast.get_span_context(), reference.get_span_context()
    assert (int(f.trace_flags), f.trace_state, f.is_remote) == (int(r.trace_flags), r.trace_state, r.is_remote)
    assert f.span_id != r.span_id and f.is_valid
    if reference.is_recording() and reference.parent is None:  # type: ignore[attr-defined]
        assert f.trace_id != r.trace_id
    else:
        assert f.trace_id == r.trace_id
    assert fast.is_recording() == reference.is_recording()
    if fast.is_recording():
        assert isinstance(fast, Span) and fast.parent == reference.parent  # type: ignore[attr-defined]
        assert dict(fast.attributes) == dict(reference.attributes)  # type: ignore[attr-defined]


def remote_parent(sampled: bool, state: TraceState | None = None) -> trace.Span:
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
    return NonRecordingSpan(SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=flags, trace_state=state))


@pytest.mark.parametrize("sampler", [DEFAULT_ON, ALWAYS_ON], ids=["parent-based", "always-on"])
@pytest.mark.parametrize("sampled", [True, False], ids=["sampled-parent", "unsampled-parent"])
def test_sampling_ids_and_trace_state_follow_the_parent_as_the_sdk_does(sampler: Any, sampled: bool) -> None:
    tracer = provider(sampler)[0].get_tracer("t")
    fast, reference = started(tracer, remote_parent(sampled, TraceState([("vendor", "v1")])), {"a": "b"})
    same_start(fast, reference)
    assert fast.is_recording() == (sampled or sampler is ALWAYS_ON)  # an unsampled parent is followed by default
    assert not fast.is_recording() or type(fast).__name__ == "_FastSpan"
    root_fast, root_reference = started(tracer, None, {"a": 1})
    assert root_fast.is_recording() and root_fast.parent is None  # type: ignore[attr-defined]
    assert int(root_fast.get_span_context().trace_flags) == int(root_reference.get_span_context().trace_flags)


def test_values_the_sdk_would_clean_are_cleaned_the_same_way() -> None:
    tracer = provider()[0].get_tracer("t")
    attributes = {"list": ["a", "b"], "tuple": ("x",), "none": None, "nested": {"k": 1}, "n": 2}
    fast, reference = started(tracer, None, attributes)
    same_start(fast, reference)
    assert fast.attributes["list"] == ("a", "b")  # type: ignore[attr-defined]
    for span in (fast, reference):
        span.set_attributes({"later": [1, 2], "plain": "p", "t": (1.5, True)})
        span.set_attribute("one", ["z"])
        span.set_attributes({"n": 3})  # a key set again moves to the end
        span.set_attribute(5, "not a str key")
    assert list(fast.attributes.items()) == list(reference.attributes.items())  # type: ignore[attr-defined]
    assert fast.dropped_attributes == reference.dropped_attributes  # type: ignore[attr-defined]
    link = SpanContext(0xABC, 0xDEF, is_remote=True)
    for span in (fast, reference):
        span.add_event("note", {"k": 1})
        span.add_link(link, {"why": "follows"})
        span.record_exception(ValueError("boom"))
    assert [(e.name, dict(e.attributes or {})) for e in fast.events if e.name == "note"] == [("note", {"k": 1})]  # type: ignore[attr-defined]
    assert [e.name for e in fast.events] == [e.name for e in reference.events]  # type: ignore[attr-defined]
    assert [(k.context, dict(k.attributes or {})) for k in fast.links] == [  # type: ignore[attr-defined]
        (k.context, dict(k.attributes or {}))
        for k in reference.links  # type: ignore[attr-defined]
    ]
    for span in (fast, reference):
        span.end()
        span.add_event("after_end")
        span.set_attribute("after_end", "ignored")
        span.set_attributes({"after_end": "ignored"})
    assert "after_end" not in fast.attributes and len(fast.events) == 2  # type: ignore[attr-defined]
    assert dict(fast.attributes) == dict(reference.attributes)  # type: ignore[attr-defined]


def test_an_attribute_count_limit_drops_what_the_sdk_drops() -> None:
    tracer = provider(limits=SpanLimits(max_span_attributes=3))[0].get_tracer("t")
    fast, reference = started(tracer, None, {"a": 1, "b": 2})
    for span in (fast, reference):
        span.set_attributes({"c": 3, "d": 4})
        span.set_attribute("e", 5)
    assert dict(fast.attributes) == dict(reference.attributes) == {"c": 3, "d": 4, "e": 5}  # type: ignore[attr-defined]
    assert fast.dropped_attributes == reference.dropped_attributes == 2  # type: ignore[attr-defined]
    too_many, too_many_reference = started(tracer, None, {"a": 1, "b": 2, "c": 3, "d": 4})
    assert dict(too_many.attributes) == dict(too_many_reference.attributes)  # type: ignore[attr-defined]
    assert too_many.dropped_attributes == 1  # type: ignore[attr-defined]


def test_set_ups_it_cannot_match_go_through_the_sdk() -> None:
    ratio = provider(TraceIdRatioBased(0.5))[0].get_tracer("t")
    length_limit = provider(limits=SpanLimits(max_span_attribute_length=8))[0].get_tracer("t")
    assert fastspan.starter(ratio) is None
    assert fastspan.starter(length_limit) is None
    assert fastspan.starter(trace.NoOpTracer()) is None


def test_the_span_keeps_its_own_copy_of_the_attributes_it_was_started_with() -> None:
    start = fastspan.starter(provider()[0].get_tracer("t"))
    assert start is not None
    given: dict[str, Any] = {"a": 1}
    span = start("op", SpanKind.INTERNAL, given)
    given["b"] = 2
    span.set_attribute("c", 3)
    assert dict(span.attributes) == {"a": 1, "c": 3} and given == {"a": 1, "b": 2}  # type: ignore[attr-defined]
    assert repr(span).startswith('_Span(name="op"')
    fast, reference = started(provider()[0].get_tracer("t"), None, {"a": 1, "b": 2})
    assert type(fast).__name__ == "_FastSpan"
    for each in (fast, reference):
        each.set_attribute("a", 5)  # set again: moves to the end, as the SDK keeps them
    assert list(fast.attributes.items()) == list(reference.attributes.items()) == [("b", 2), ("a", 5)]  # type: ignore[attr-defined]


def test_a_disabled_tracer_or_a_field_reassigned_later_is_followed_as_the_sdk_follows_it() -> None:
    from opentelemetry.sdk.trace import _TracerConfig
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    made, memory = provider()
    tracer = made.get_tracer("t")
    start = fastspan.starter(tracer)
    assert start is not None
    tracer._set_tracer_config(_TracerConfig(is_enabled=False))
    assert not start("off", SpanKind.INTERNAL, {}).is_recording()
    tracer._set_tracer_config(_TracerConfig(is_enabled=True))
    tracer.sampler = ALWAYS_OFF
    assert not start("sampled out", SpanKind.INTERNAL, {}).is_recording()
    tracer.sampler = DEFAULT_ON
    other = InMemorySpanExporter()
    tracer.span_processor = SimpleSpanProcessor(other)  # type: ignore[assignment]
    start("elsewhere", SpanKind.INTERNAL, {}).end()
    assert [s.name for s in other.get_finished_spans()] == ["elsewhere"] and memory.get_finished_spans() == ()
