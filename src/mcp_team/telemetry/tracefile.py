"""Trace files: one run's spans in the standard OTLP JSON format, one file per run.

The format is the OpenTelemetry file exporter's (`{"resourceSpans": [...]}`, the OTLP/HTTP JSON
encoding), which Jaeger's Upload, Tempo, otel-tui and a collector's `otlpjsonfile` receiver read.
It is made by the OTLP exporter's own encoder (`encode_spans`) and protobuf's JSON mapping, with
the two changes the OTLP JSON encoding makes to that mapping: trace and span ids as hex (not
base64) and enums as integers. `load_trace_file` reads a file back through the same protobuf
message, so a broken file is refused with what is wrong, and an older mcp-team's Jaeger v1 JSON
file is named as such.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import format_span_id

from mcp_team.telemetry import attributes as A

__all__ = ["FileSpan", "TraceFileProcessor", "file_spans", "load_trace_file", "to_otlp_json"]

_log = logging.getLogger("mcp_team.telemetry")

ROOT_AGENT: Final = "supervisor"
ROOT_SPAN_PREFIX: Final = f"{A.OP_INVOKE_AGENT} {ROOT_AGENT}"
DROPPED_SPANS: Final = "mcp_team.trace_file.dropped_spans"
STATUS_ERROR: Final = 2  # Status.StatusCode.STATUS_CODE_ERROR
_ID_KEYS: Final = ("traceId", "spanId", "parentSpanId")


# -- conversion ------------------------------------------------------------------------------------


def _each_span(doc: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for resource_spans in doc.get("resourceSpans") or ():
        for scope_spans in resource_spans.get("scopeSpans") or ():
            yield from scope_spans.get("spans") or ()


def _recode_ids(doc: dict[str, Any], recode: Callable[[str], str]) -> None:
    """Rewrite every span's and link's ids in place (protobuf's JSON mapping has base64, OTLP JSON hex)."""
    for span in _each_span(doc):
        for holder in (span, *(span.get("links") or ())):
            for key in _ID_KEYS:
                if holder.get(key):
                    holder[key] = recode(holder[key])


def _b64_to_hex(value: str) -> str:
    return base64.b64decode(value).hex()


def _hex_to_b64(value: str) -> str:
    try:
        return base64.b64encode(bytes.fromhex(value)).decode()
    except ValueError:
        raise ValueError(f"id {value!r} is not hex (OTLP JSON writes trace and span ids as hex)") from None


def to_otlp_json(spans: Sequence[ReadableSpan], dropped: int = 0) -> dict[str, Any]:
    """OTLP JSON (`{"resourceSpans": [...]}`) for `spans`; `dropped` spans left out are counted on the resource."""
    doc = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    _recode_ids(doc, _b64_to_hex)
    if dropped:
        for resource_spans in doc.get("resourceSpans") or ():
            attrs = resource_spans.setdefault("resource", {}).setdefault("attributes", [])
            attrs.append({"key": DROPPED_SPANS, "value": {"intValue": str(dropped)}})
    return doc


def load_trace_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read an OTLP JSON trace file; `ValueError` saying what is wrong (an older Jaeger JSON file included)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:  # said without the file's name, as if the command had failed on its own
        raise ValueError(f"{p}: not a trace file (not UTF-8 text: trace files are OTLP JSON)") from None
    if not text.strip():
        raise ValueError(f"{p}: empty, not a trace (mcp-team writes a run's trace file whole, when the run ends)")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not JSON: {exc}") from None
    if isinstance(doc, dict) and "data" in doc and "resourceSpans" not in doc:
        raise ValueError(
            f"{p} is a Jaeger v1 JSON file, written by an older mcp-team; trace files are OTLP JSON now "
            '({"resourceSpans": [...]}). Run the request again with --trace-dir, or upload this file to Jaeger'
        )
    if not isinstance(doc, dict) or "resourceSpans" not in doc:
        raise ValueError(f'{p}: not an OTLP JSON trace (expected an object with "resourceSpans")')
    check = json.loads(json.dumps(doc))
    try:
        _recode_ids(check, _hex_to_b64)
        ParseDict(check, ExportTraceServiceRequest())
    except (ParseError, ValueError) as exc:
        raise ValueError(f"{p}: not a valid OTLP JSON trace: {exc}") from None
    except (AttributeError, TypeError):  # a list or value where the format has an object, or the other way round
        raise ValueError(
            f"{p}: not a valid OTLP JSON trace: expected resourceSpans, a list of objects with scopeSpans, each a "
            "list of objects with spans (the OpenTelemetry file exporter's format)"
        ) from None
    return doc


@dataclass(frozen=True)
class FileSpan:
    """One span of a trace file, as the waterfall reads it (times in nanoseconds since the epoch)."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: int
    end: int
    attributes: dict[str, Any]
    error: bool


def _value(v: Mapping[str, Any]) -> Any:
    """An OTLP `AnyValue` as a Python value."""
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values") or ()]
    if "kvlistValue" in v:
        return {kv["key"]: _value(kv.get("value") or {}) for kv in v["kvlistValue"].get("values") or ()}
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def file_spans(doc: Mapping[str, Any]) -> list[FileSpan]:
    """Every span of a loaded trace file, flattened out of its resources and scopes."""
    out = []
    for span in _each_span(doc):
        attrs = {kv["key"]: _value(kv.get("value") or {}) for kv in span.get("attributes") or ()}
        out.append(
            FileSpan(
                trace_id=str(span.get("traceId", "")),
                span_id=str(span.get("spanId", "")),
                parent_id=str(span.get("parentSpanId", "")),
                name=str(span.get("name", "")),
                start=int(span.get("startTimeUnixNano") or 0),
                end=int(span.get("endTimeUnixNano") or 0),
                attributes=attrs,
                error=(span.get("status") or {}).get("code") == STATUS_ERROR,
            )
        )
    return out


# -- one file per run ---------------------------------------------------------------------------


def write_json_atomic(path: Path, doc: Any) -> None:
    """Write `doc` to `path` via a temporary file and a rename, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, ensure_ascii=False)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _safe_name(run_id: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]", "_", run_id).strip(".") or "run"
    return name[:200]


def detached(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    """`spans` with every parent reference to a span not among them removed, the parent's id kept as the
    attribute `mcp_team.parent_span_id` (the trace id stays, so the file still joins the client's trace)."""
    ids = {s.context.span_id for s in spans}
    out = []
    for span in spans:
        parent = span.parent
        if parent is None or not parent.span_id or parent.span_id in ids:
            out.append(span)
            continue
        attributes = {**(span.attributes or {}), A.PARENT_SPAN_ID: format_span_id(parent.span_id)}
        out.append(
            ReadableSpan(
                name=span.name,
                context=span.context,
                parent=None,
                resource=span.resource,
                attributes=attributes,
                events=span.events,
                links=span.links,
                kind=span.kind,
                status=span.status,
                start_time=span.start_time,
                end_time=span.end_time,
                instrumentation_scope=span.instrumentation_scope,
            )
        )
    return out


class _Run:
    """One run being collected: its ended spans, the ids of its started spans, and how many were dropped."""

    __slots__ = ("dropped", "spans", "started")

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []
        self.started: set[int] = set()
        self.dropped = 0


class TraceFileProcessor(SpanProcessor):
    """Collects each run's spans (by `gen_ai.conversation.id`) and writes `<trace_dir>/<run_id>.json` (OTLP JSON).

    A run's spans are those started inside it (`on_start` notes their ids). The span that encloses a run
    also carries its id (`spans.conversation` stamps the MCP SDK's `tools/call` span) but is not the run's:
    it may end after the run (2025-11-25) or before it (a 2026-07-28 run outlives the round that started it),
    so it is left out, and a late span of a run already written opens no new run. The file is written when
    the run's root ends: a span named `invoke_agent supervisor…` whose parent is not one of the run's spans
    (so a nested supervisor span is not taken for the root). A span whose parent is not in the file (the
    root's, above all) is written without a `parentSpanId`, the parent's id kept as `mcp_team.parent_span_id`.
    Memory is bounded: at most `max_spans_per_run` spans per run (the root is always kept) and `max_runs`
    open runs (the oldest is dropped). Never raises into the SDK.
    """

    def __init__(
        self,
        trace_dir: str | os.PathLike[str],
        *,
        max_spans_per_run: int = 10_000,
        max_runs: int = 100,
    ) -> None:
        self.trace_dir = Path(trace_dir)
        self.max_spans_per_run = max_spans_per_run
        self.max_runs = max_runs
        self.last_path: Path | None = None
        self.written: list[Path] = []
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._lock = threading.Lock()

    def path_for(self, run_id: str) -> Path:
        """Where the file of run `run_id` is (or will be) written."""
        return self.trace_dir / f"{_safe_name(run_id)}.json"

    def _run(self, run_id: str) -> _Run:
        """The open run `run_id`, created (evicting the oldest past `max_runs`) if new. Call under the lock."""
        run = self._runs.get(run_id)
        if run is None:
            while len(self._runs) >= max(1, self.max_runs):
                old_id, old = self._runs.popitem(last=False)
                _log.warning(
                    "trace file: dropping unfinished run %s (%d spans): too many open runs", old_id, len(old.spans)
                )
            run = self._runs[run_id] = _Run()
        return run

    @staticmethod
    def _run_id(span: ReadableSpan) -> str | None:
        run_id = (span.attributes or {}).get(A.CONVERSATION_ID)
        return run_id if isinstance(run_id, str) and run_id else None

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        try:
            run_id = self._run_id(span)
            if run_id is None:
                return
            with self._lock:
                run = self._run(run_id)
                if len(run.started) < 2 * self.max_spans_per_run:
                    run.started.add(span.context.span_id)
        except Exception:
            _log.exception("trace file: could not note span start")

    @staticmethod
    def _is_root_candidate(span: ReadableSpan) -> bool:
        if span.name.startswith(ROOT_SPAN_PREFIX):
            return True
        attrs = span.attributes or {}
        return attrs.get(A.OPERATION_NAME) == A.OP_INVOKE_AGENT and attrs.get(A.AGENT_NAME) == ROOT_AGENT

    def on_end(self, span: ReadableSpan) -> None:
        try:
            self._on_end(span)
        except Exception:
            _log.exception("trace file: could not record span %r", getattr(span, "name", "?"))

    def _on_end(self, span: ReadableSpan) -> None:
        run_id = self._run_id(span)
        if run_id is None:
            return
        finished: _Run | None = None
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or span.context.span_id not in run.started:
                if run is not None and len(run.started) >= 2 * self.max_spans_per_run:
                    run.dropped += 1  # started past the cap on noted spans
                return  # not the run's: the span enclosing it, or a late one of a run already written
            is_root = self._is_root_candidate(span)
            if len(run.spans) < self.max_spans_per_run or is_root:
                run.spans.append(span)
            else:
                run.dropped += 1
            if is_root and (span.parent is None or span.parent.span_id not in run.started):
                finished = self._runs.pop(run_id)
        if finished is not None:
            self._write(run_id, detached(finished.spans), finished.dropped)

    def _write(self, run_id: str, spans: list[ReadableSpan], dropped: int) -> None:
        if dropped:
            _log.warning("trace file: run %s had %d more spans than the cap; they are not in the file", run_id, dropped)
        doc = to_otlp_json(spans, dropped)
        path = self.path_for(run_id)
        try:
            write_json_atomic(path, doc)
        except OSError as exc:
            _log.error("trace file: could not write %s: %s", path, exc)
            return
        self.last_path = path
        self.written.append(path)
        if len(self.written) > 1000:
            del self.written[:-1000]
        _log.info("trace file written: %s", path)

    def open_runs(self) -> dict[str, int]:
        """Runs still being collected, with their span counts (for diagnostics)."""
        with self._lock:
            return {run_id: len(run.spans) for run_id, run in self._runs.items()}

    def shutdown(self) -> None:
        with self._lock:
            self._runs.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
