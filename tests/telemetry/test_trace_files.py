"""Trace files in OTLP JSON (conversion, reading back, one file per run) and the terminal waterfall.

Spans are made with a local `TracerProvider` (not the global one) so their times, statuses and
resource are exactly what the test says; one test replays the real span helpers' spans too.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode, format_span_id, format_trace_id

from mcp_team.telemetry import attributes as A
from mcp_team.telemetry import spans as helpers
from mcp_team.telemetry.tracefile import TraceFileProcessor, file_spans, load_trace_file, to_otlp_json
from mcp_team.telemetry.waterfall import render_waterfall, span_label
from support.spans import Spans

T0 = 1_760_000_000_000_000_000  # ns since the epoch
TASK = "mcp_team.handoff.task"


def ms(x: float) -> int:
    return T0 + int(x * 1_000_000)


class Local:
    """A local provider with an in-memory exporter and a trace-file processor."""

    def __init__(self, trace_dir: Path, **processor_args: Any) -> None:
        self.exporter = InMemorySpanExporter()
        self.files = TraceFileProcessor(trace_dir, **processor_args)
        self.provider = TracerProvider(
            resource=Resource.create({"service.name": "team-test", "service.version": "9.9", "host.name": "box"}),
            shutdown_on_exit=False,
        )
        self.provider.add_span_processor(self.files)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("mcp_team", "0.1.0")

    @property
    def finished(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Local]:
    loc = Local(tmp_path / "traces")
    yield loc
    loc.provider.shutdown()


def build_run(tracer: trace.Tracer, run_id: str = "run-1", task: str | None = "find papers on tracing") -> None:
    """supervisor ─ plan chat, handoff → researcher (chat, failing web_search), synthesis chat."""
    conv = {A.CONVERSATION_ID: run_id}

    def start(
        name: str, parent: trace.Span | None, at: float, kind: SpanKind = SpanKind.INTERNAL, **attrs: Any
    ) -> trace.Span:
        ctx = trace.set_span_in_context(parent) if parent is not None else None
        return tracer.start_span(name, context=ctx, kind=kind, attributes={**conv, **attrs}, start_time=ms(at))

    sup = start(
        "invoke_agent supervisor",
        None,
        0,
        **{A.OPERATION_NAME: "invoke_agent", A.AGENT_NAME: "supervisor", A.PROVIDER_NAME: "anthropic"},
    )
    plan = start(
        "chat claude-sonnet-5-5",
        sup,
        10,
        SpanKind.CLIENT,
        **{A.OPERATION_NAME: "chat", A.REQUEST_MODEL: "claude-sonnet-5-5", A.PHASE: "plan"},
    )
    plan.set_attribute(A.USAGE_INPUT_TOKENS, 900)
    plan.set_attribute(A.USAGE_OUTPUT_TOKENS, 120)
    plan.set_attribute(A.RESPONSE_FINISH_REASONS, ["tool_use", "end_turn"])
    plan.end(end_time=ms(400))
    xfer_attrs: dict[str, Any] = {
        A.OPERATION_NAME: "execute_tool",
        A.TOOL_NAME: "transfer_to_researcher",
        A.TRANSFER_TARGET_NAME: "researcher",
        A.HANDOFF_ATTEMPT: 1,
    }
    if task:
        xfer_attrs[TASK] = task
    xfer = start("execute_tool transfer_to_researcher", sup, 410, **xfer_attrs)
    res = start("invoke_agent researcher", xfer, 420, **{A.OPERATION_NAME: "invoke_agent", A.AGENT_NAME: "researcher"})
    chat = start(
        "chat claude-haiku-5-5",
        res,
        430,
        SpanKind.CLIENT,
        **{A.OPERATION_NAME: "chat", A.REQUEST_MODEL: "claude-haiku-5-5", A.PHASE: "specialist"},
    )
    chat.set_attribute(A.USAGE_INPUT_TOKENS, 1200)
    chat.set_attribute(A.USAGE_OUTPUT_TOKENS, 300)
    chat.end(end_time=ms(900))
    tool = start("execute_tool web_search", res, 900, **{A.OPERATION_NAME: "execute_tool", A.TOOL_NAME: "web_search"})
    tool.set_attribute(A.ERROR_TYPE, "TimeoutError")
    tool.set_attribute("mcp_team.score", 0.25)
    tool.add_event("retry", {"attempt": 2, "ok": False}, timestamp=ms(950))
    tool.set_status(Status(StatusCode.ERROR, "search timed out"))
    tool.end(end_time=ms(1000))
    res.end(end_time=ms(1900))
    xfer.end(end_time=ms(1910))
    synth = start(
        "chat claude-sonnet-5-5",
        sup,
        1920,
        SpanKind.CLIENT,
        **{A.OPERATION_NAME: "chat", A.REQUEST_MODEL: "claude-sonnet-5-5", A.PHASE: "synthesize"},
    )
    synth.set_status(Status(StatusCode.OK))
    synth.end(end_time=ms(2400))
    sup.set_attribute(A.USAGE_INPUT_TOKENS, 2100)
    sup.set_attribute(A.USAGE_OUTPUT_TOKENS, 640)
    sup.end(end_time=ms(2500))


def otlp_spans(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [span for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]


def attrs_of(span: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A span's attributes: key -> the OTLP AnyValue, e.g. {"intValue": "900"}."""
    return {a["key"]: a["value"] for a in span.get("attributes", [])}


def by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for span in sorted(otlp_spans(doc), key=lambda s: int(s["startTimeUnixNano"])):
        out.setdefault(span["name"], span)  # first (earliest) of a name
    return out


def written(tmp_path: Path, doc: dict[str, Any], name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


# -- to_otlp_json ------------------------------------------------------------------------------------


def test_otlp_json_shape(local: Local, tmp_path: Path) -> None:
    build_run(local.tracer)
    doc = to_otlp_json(local.finished)
    assert load_trace_file(written(tmp_path, doc)) == doc  # plain JSON that reads back through the protobuf

    (resource_spans,) = doc["resourceSpans"]
    resource = {a["key"]: a["value"] for a in resource_spans["resource"]["attributes"]}
    assert resource["service.name"] == {"stringValue": "team-test"}
    assert resource["service.version"] == {"stringValue": "9.9"}
    assert resource["host.name"] == {"stringValue": "box"}
    (scope_spans,) = resource_spans["scopeSpans"]
    assert scope_spans["scope"]["name"] == "mcp_team"
    spans = scope_spans["spans"]
    assert len(spans) == 7
    trace_id = spans[0]["traceId"]
    assert len(trace_id) == 32 and int(trace_id, 16)  # hex, as OTLP JSON has it (not protobuf's base64)
    for span in spans:
        assert len(span["spanId"]) == 16 and int(span["spanId"], 16) >= 0
        assert span["traceId"] == trace_id

    named = by_name(doc)
    sup = named["invoke_agent supervisor"]
    assert "parentSpanId" not in sup
    assert sup["startTimeUnixNano"] == str(T0)
    assert int(sup["endTimeUnixNano"]) - int(sup["startTimeUnixNano"]) == 2_500_000_000
    assert sup["kind"] == 1  # enums as integers (SPAN_KIND_INTERNAL)
    xfer = named["execute_tool transfer_to_researcher"]
    assert xfer["parentSpanId"] == sup["spanId"]
    assert named["invoke_agent researcher"]["parentSpanId"] == xfer["spanId"]

    plan = named["chat claude-sonnet-5-5"]
    assert plan["kind"] == 3  # SPAN_KIND_CLIENT
    pattrs = attrs_of(plan)
    assert pattrs[A.USAGE_INPUT_TOKENS] == {"intValue": "900"}
    assert pattrs[A.PHASE] == {"stringValue": "plan"}
    assert pattrs[A.RESPONSE_FINISH_REASONS] == {
        "arrayValue": {"values": [{"stringValue": "tool_use"}, {"stringValue": "end_turn"}]}
    }
    assert "code" not in plan.get("status", {})  # unset

    tool = named["execute_tool web_search"]
    assert tool["status"] == {"code": 2, "message": "search timed out"}
    assert attrs_of(tool)[A.ERROR_TYPE] == {"stringValue": "TimeoutError"}
    assert attrs_of(tool)["mcp_team.score"] == {"doubleValue": 0.25}
    (event,) = tool["events"]
    assert event["name"] == "retry" and event["timeUnixNano"] == str(ms(950))
    assert {a["key"]: a["value"] for a in event["attributes"]} == {
        "attempt": {"intValue": "2"},
        "ok": {"boolValue": False},
    }
    synth = [s for s in spans if s["name"] == "chat claude-sonnet-5-5"][1]
    assert synth["status"] == {"code": 1}  # OK


def test_file_spans_read_back_values(local: Local) -> None:
    build_run(local.tracer)
    spans = {s.name: s for s in reversed(file_spans(to_otlp_json(local.finished)))}
    tool = spans["execute_tool web_search"]
    assert tool.error and tool.attributes[A.ERROR_TYPE] == "TimeoutError"
    assert tool.attributes["mcp_team.score"] == 0.25
    assert tool.end - tool.start == 100_000_000
    plan = spans["chat claude-sonnet-5-5"]
    assert plan.attributes[A.USAGE_INPUT_TOKENS] == 900
    assert plan.attributes[A.RESPONSE_FINISH_REASONS] == ["tool_use", "end_turn"]
    assert not plan.error
    assert spans["invoke_agent researcher"].parent_id == spans["execute_tool transfer_to_researcher"].span_id


def test_otlp_json_keeps_outside_parents(local: Local) -> None:
    build_run(local.tracer, "run-1")
    build_run(local.tracer, "run-2")
    doc = to_otlp_json(local.finished)
    assert len({s["traceId"] for s in otlp_spans(doc)}) == 2
    # Only the researcher subtree: its root still names the (absent) transfer span as its parent.
    subset = [s for s in local.finished if s.name in ("invoke_agent researcher", "chat claude-haiku-5-5")][:2]
    research = by_name(to_otlp_json(subset))["invoke_agent researcher"]
    assert len(research["parentSpanId"]) == 16
    assert to_otlp_json([]) == {}


def test_ids_are_zero_padded() -> None:
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class SmallIds(IdGenerator):
        def generate_span_id(self) -> int:
            return 0xABC

        def generate_trace_id(self) -> int:
            return 0x1F

    provider = TracerProvider(id_generator=SmallIds(), shutdown_on_exit=False)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.get_tracer("t").start_span("x").end()
    (span,) = otlp_spans(to_otlp_json(exporter.get_finished_spans()))
    assert span["traceId"] == "0" * 30 + "1f"
    assert span["spanId"] == "0" * 13 + "abc"


@pytest.mark.anyio
async def test_real_span_helpers_convert_cleanly(spans: Spans, tmp_path: Path) -> None:
    # Async: the helpers ask anyio for the cancellation class when an exception passes through.
    with helpers.conversation("helpers-run"), helpers.agent_span("supervisor", provider="anthropic") as sup:
        with helpers.chat_span("claude-sonnet-5-5", "anthropic", "plan", 1024) as chat:
            helpers.record_usage(chat, 10, 2)
        with (
            helpers.transfer_span("supervisor", "analyst", "toolu_9", "h9", 1),
            helpers.agent_span("analyst"),
            pytest.raises(ZeroDivisionError),
            helpers.tool_span("calculator", "toolu_10", "analyst"),
        ):
            1 / 0  # noqa: B018
        helpers.record_usage(sup, 10, 2)
    doc = to_otlp_json(spans.all)
    load_trace_file(written(tmp_path, doc, "all.json"))
    calc = by_name(doc)["execute_tool calculator"]
    assert calc["status"]["code"] == 2
    assert attrs_of(calc)[A.ERROR_TYPE] == {"stringValue": "ZeroDivisionError"}
    assert any(e["name"] == "exception" for e in calc["events"])

    # The same spans replayed through a trace-file processor: started in start order, ended in end order.
    proc = TraceFileProcessor(tmp_path)
    for span in sorted(spans.all, key=lambda s: s.start_time or 0):
        proc.on_start(span)  # type: ignore[arg-type]  # what it reads (context, attributes) a ReadableSpan has
    for span in spans.all:
        proc.on_end(span)
    run_file = load_trace_file(tmp_path / "helpers-run.json")
    assert len(otlp_spans(run_file)) == 5
    lines = render_waterfall(run_file)
    assert any("→ analyst" in line for line in lines)
    assert any("ZeroDivisionError" in line for line in lines)


# -- TraceFileProcessor ------------------------------------------------------------------------------


def test_trace_file_written_when_the_root_ends(tmp_path: Path) -> None:
    loc = Local(tmp_path / "traces")
    tracer = loc.tracer
    path = loc.files.path_for("run-1")
    assert path == tmp_path / "traces" / "run-1.json"

    # Spans without a run id are ignored; nothing is written before the root ends.
    tracer.start_span("tools/call run_team").end()
    sup = tracer.start_span("invoke_agent supervisor", attributes={A.CONVERSATION_ID: "run-1"})
    ctx = trace.set_span_in_context(sup)
    tracer.start_span("chat m", context=ctx, attributes={A.CONVERSATION_ID: "run-1"}).end()
    # A nested supervisor span (parent inside the run) is not the root.
    tracer.start_span("invoke_agent supervisor", context=ctx, attributes={A.CONVERSATION_ID: "run-1"}).end()
    assert not path.exists()
    assert loc.files.open_runs() == {"run-1": 2}
    sup.end()
    assert path.exists()
    assert loc.files.last_path == path
    assert loc.files.open_runs() == {}
    doc = load_trace_file(path)
    assert len(otlp_spans(doc)) == 3
    assert list(path.parent.iterdir()) == [path]  # no temporary files left
    loc.provider.shutdown()


@pytest.mark.parametrize("enclosing_ends", ["after the run", "before the run"])
def test_trace_file_leaves_out_the_span_enclosing_the_run(tmp_path: Path, enclosing_ends: str) -> None:
    """The SDK's `tools/call` span encloses a run and gets its id (spans.conversation), but is not the run's:
    on 2025-11-25 it ends after the run, on 2026-07-28 (input_required rounds) before it. Either way the file
    is written when the root ends, has no reference to a span outside it, and nothing is left open."""
    loc = Local(tmp_path)
    tracer = loc.tracer
    client = tracer.start_span("client turn")  # the client's span, sent as traceparent
    call = tracer.start_span("tools/call run_team", context=trace.set_span_in_context(client))
    sup = tracer.start_span(
        "invoke_agent supervisor", context=trace.set_span_in_context(call), attributes={A.CONVERSATION_ID: "r"}
    )
    call.set_attribute(A.CONVERSATION_ID, "r")  # stamped once the run starts
    chat = tracer.start_span("chat m", context=trace.set_span_in_context(sup), attributes={A.CONVERSATION_ID: "r"})
    chat.end()
    if enclosing_ends == "before the run":
        call.end()
    sup.end()
    if enclosing_ends == "after the run":
        call.end()
    client.end()
    doc = load_trace_file(tmp_path / "r.json")
    spans = otlp_spans(doc)
    assert sorted(s["name"] for s in spans) == ["chat m", "invoke_agent supervisor"]
    ids = {s["spanId"] for s in spans}
    assert [s["parentSpanId"] for s in spans if s.get("parentSpanId") and s["parentSpanId"] not in ids] == []
    root = next(s for s in spans if s["name"] == "invoke_agent supervisor")
    assert "parentSpanId" not in root
    assert attrs_of(root)[A.PARENT_SPAN_ID] == {"stringValue": format_span_id(call.get_span_context().span_id)}
    assert root["traceId"] == format_trace_id(client.get_span_context().trace_id)  # still the client's trace
    assert loc.files.open_runs() == {}  # the late tools/call span opened no run
    loc.provider.shutdown()


def test_trace_file_of_a_full_run_and_waterfall(local: Local) -> None:
    build_run(local.tracer, "run-1")
    doc = load_trace_file(local.files.path_for("run-1"))
    assert len(otlp_spans(doc)) == 7

    lines = render_waterfall(doc, width=100)
    text = "\n".join(lines)
    print(text)
    assert all(len(line) <= 100 for line in lines), max(lines, key=len)
    assert lines[0].startswith("run run-1 · trace ")
    assert "2.5s" in lines[0]
    assert "7 spans" in lines[0]
    assert "1 failed" in lines[0]
    assert "tokens 2.1k/640" in lines[0]

    rows = lines[2:]
    assert len(rows) == 7
    labels = [row[:40].strip() for row in rows]
    assert labels[0].startswith("supervisor")
    assert labels[1].startswith("chat claude-sonnet-5-5 (plan)")
    assert labels[2].startswith("→ researcher: find papers")
    assert labels[3].startswith("researcher")
    assert labels[4].startswith("chat claude-haiku-5-5 (specialist)")
    assert labels[5].startswith("tool web_search")
    assert labels[6].startswith("chat claude-sonnet-5-5 (synthe")
    # Indentation follows depth.
    assert rows[3].startswith("    researcher")
    assert rows[5].startswith("      tool web_search")

    def row(prefix: str) -> str:
        return next(r for r in rows if r.strip().startswith(prefix))

    assert "2.5s" in row("supervisor") and "ok" in row("supervisor") and "2.1k/640" in row("supervisor")
    assert "390ms" in row("chat claude-sonnet-5-5 (plan)") and "900/120" in row("chat claude-sonnet-5-5 (plan)")
    assert "TimeoutError" in row("tool web_search") and "100ms" in row("tool web_search")
    assert "1.2k/300" in row("chat claude-haiku")
    # Bars: the root spans the whole timeline, the synthesis sits at the right end.
    assert row("supervisor").count("█") >= 20
    synth_row = row("chat claude-sonnet-5-5 (synthesize)")
    bar_start = synth_row.index("█")
    assert bar_start > row("chat claude-sonnet-5-5 (plan)").index("█") + 10


def test_waterfall_without_task_shows_only_the_target(local: Local) -> None:
    build_run(local.tracer, "run-x", task=None)
    lines = render_waterfall(load_trace_file(local.files.path_for("run-x")))
    handoff = next(line for line in lines if "→ researcher" in line)
    assert "→ researcher " in handoff
    assert ":" not in handoff.split("→ researcher")[1][:5]
    assert render_waterfall({"resourceSpans": []}) == ["(no trace)"]


def test_waterfall_narrow_width(local: Local) -> None:
    build_run(local.tracer, "run-n")
    lines = render_waterfall(to_otlp_json(local.finished), width=60)
    assert all(len(line) <= 60 for line in lines[1:])


def test_span_labels() -> None:
    assert span_label("execute_tool transfer_to_writer", {}) == "→ writer"
    assert span_label("invoke_agent researcher", {A.AGENT_NAME: "researcher"}) == "researcher"
    assert span_label("chat m1", {A.PHASE: "refine"}) == "chat m1 (refine)"
    assert span_label("chat m1", {}) == "chat m1"
    assert span_label("execute_tool web_fetch", {}) == "tool web_fetch"
    assert span_label("plan supervisor", {}) == "plan supervisor"
    assert span_label("tools/call run_team", {}) == "tools/call run_team"


def test_trace_file_bounds(tmp_path: Path) -> None:
    loc = Local(tmp_path, max_spans_per_run=3, max_runs=2)
    tracer = loc.tracer
    for run in ("a", "b", "c"):  # three open runs, cap two: "a" is dropped
        tracer.start_span("chat m", attributes={A.CONVERSATION_ID: run}).end()
    assert set(loc.files.open_runs()) == {"b", "c"}

    sup = tracer.start_span("invoke_agent supervisor", attributes={A.CONVERSATION_ID: "big"})
    for _ in range(10):
        tracer.start_span("chat m", context=trace.set_span_in_context(sup), attributes={A.CONVERSATION_ID: "big"}).end()
    sup.end()
    doc = load_trace_file(tmp_path / "big.json")
    names = [s["name"] for s in otlp_spans(doc)]
    assert len(names) == 4  # the cap, plus the root which is always kept
    assert "invoke_agent supervisor" in names
    resource = {a["key"]: a["value"] for a in doc["resourceSpans"][0]["resource"]["attributes"]}
    assert resource["mcp_team.trace_file.dropped_spans"] == {"intValue": "7"}
    loc.provider.shutdown()


def test_trace_file_names_are_safe(tmp_path: Path) -> None:
    proc = TraceFileProcessor(tmp_path / "d")
    assert proc.path_for("../../etc/passwd").parent == tmp_path / "d"
    assert proc.path_for("run/1 x").name == "run_1_x.json"


def test_trace_file_errors_are_logged_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    loc = Local(blocker)
    with caplog.at_level(logging.ERROR, logger="mcp_team.telemetry"):
        loc.tracer.start_span("invoke_agent supervisor", attributes={A.CONVERSATION_ID: "r"}).end()
    assert loc.files.last_path is None
    assert any("could not write" in r.getMessage() for r in caplog.records)
    # Garbage in on_end does not raise either.
    loc.files.on_end(object())  # type: ignore[arg-type]
    loc.provider.shutdown()


def test_load_trace_file_errors(tmp_path: Path, local: Local) -> None:
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        load_trace_file(bad_json)
    old = written(tmp_path, {"data": [{"traceID": "0" * 32, "spans": [], "processes": {}}]}, "old.json")
    with pytest.raises(ValueError, match="Jaeger v1 JSON file, written by an older mcp-team"):
        load_trace_file(old)
    with pytest.raises(ValueError, match='expected an object with "resourceSpans"'):
        load_trace_file(written(tmp_path, {"spans": []}, "other.json"))

    build_run(local.tracer)
    good = to_otlp_json(local.finished)
    span = otlp_spans(good)[0]
    span["spanId"] = "not hex"
    with pytest.raises(ValueError, match="is not hex"):
        load_trace_file(written(tmp_path, good, "ids.json"))
    span["spanId"] = "00000000000000ab"
    span["startTimeUnixNano"] = "soon"
    with pytest.raises(ValueError, match="not a valid OTLP JSON trace"):
        load_trace_file(written(tmp_path, good, "time.json"))
    span["startTimeUnixNano"] = str(T0)
    span["colour"] = "red"
    with pytest.raises(ValueError, match="colour"):
        load_trace_file(written(tmp_path, good, "field.json"))
