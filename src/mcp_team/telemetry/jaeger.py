"""Jaeger JSON: the format the Jaeger UI's "Upload → JSON File" reads (and `/api/traces/{id}` returns).

`to_jaeger` converts finished SDK spans, `validate_jaeger` lists what is wrong with a document,
`TraceFileProcessor` writes one file per supervisor run, `load_trace_file` reads one back.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import SpanKind, StatusCode, format_span_id, format_trace_id

from mcp_team.telemetry import attributes as A

__all__ = ["TraceFileProcessor", "load_trace_file", "to_jaeger", "validate_jaeger"]

_log = logging.getLogger("mcp_team.telemetry")

_KIND: Final = {
    SpanKind.INTERNAL: "internal",
    SpanKind.SERVER: "server",
    SpanKind.CLIENT: "client",
    SpanKind.PRODUCER: "producer",
    SpanKind.CONSUMER: "consumer",
}
TAG_TYPES: Final = frozenset({"string", "bool", "int64", "float64", "binary"})
REF_TYPES: Final = frozenset({"CHILD_OF", "FOLLOWS_FROM"})
_HEX32: Final = re.compile(r"^[0-9a-f]{32}$")
_HEX16: Final = re.compile(r"^[0-9a-f]{16}$")
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1

ROOT_AGENT: Final = "supervisor"
ROOT_SPAN_PREFIX: Final = f"{A.OP_INVOKE_AGENT} {ROOT_AGENT}"


# -- conversion ------------------------------------------------------------------------------------


def _tag(key: str, value: Any) -> dict[str, Any]:
    """One typed Jaeger tag. Sequences (OTel array attributes) become a JSON string."""
    if isinstance(value, bool):
        return {"key": key, "type": "bool", "value": value}
    if isinstance(value, int):
        if _INT64_MIN <= value <= _INT64_MAX:
            return {"key": key, "type": "int64", "value": value}
        return {"key": key, "type": "string", "value": str(value)}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"key": key, "type": "float64", "value": value}
        return {"key": key, "type": "string", "value": str(value)}
    if isinstance(value, str):
        return {"key": key, "type": "string", "value": value}
    if isinstance(value, bytes | bytearray):
        return {"key": key, "type": "string", "value": bytes(value).hex()}
    if isinstance(value, Sequence | Mapping):
        return {"key": key, "type": "string", "value": json.dumps(_plain(value), ensure_ascii=False)}
    return {"key": key, "type": "string", "value": str(value)}


def _plain(value: Any) -> Any:
    """Attribute values (tuples, nested kvlists) as JSON-ready data."""
    if isinstance(value, str | bool | int) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [_plain(v) for v in value]
    return str(value)


def _tags(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return [_tag(k, v) for k, v in (attributes or {}).items()]


def _us(ns: int | None) -> int:
    return int(ns or 0) // 1000


def _span_doc(span: ReadableSpan, process_id: str) -> dict[str, Any]:
    ctx = span.context
    trace_id = format_trace_id(ctx.trace_id)
    references: list[dict[str, str]] = []
    if span.parent is not None and span.parent.span_id:
        references.append(
            {
                "refType": "CHILD_OF",
                "traceID": format_trace_id(span.parent.trace_id),
                "spanID": format_span_id(span.parent.span_id),
            }
        )
    for link in span.links or ():
        references.append(
            {
                "refType": "FOLLOWS_FROM",
                "traceID": format_trace_id(link.context.trace_id),
                "spanID": format_span_id(link.context.span_id),
            }
        )
    tags = _tags(span.attributes)
    tags.append({"key": "span.kind", "type": "string", "value": _KIND.get(span.kind, "internal")})
    scope = span.instrumentation_scope
    if scope is not None and scope.name:
        tags.append({"key": "otel.scope.name", "type": "string", "value": scope.name})
        if scope.version:
            tags.append({"key": "otel.scope.version", "type": "string", "value": scope.version})
    status = span.status
    if status.status_code is StatusCode.ERROR:
        tags.append({"key": "otel.status_code", "type": "string", "value": "ERROR"})
        tags.append({"key": "error", "type": "bool", "value": True})
    elif status.status_code is StatusCode.OK:
        tags.append({"key": "otel.status_code", "type": "string", "value": "OK"})
    if status.description:
        tags.append({"key": "otel.status_description", "type": "string", "value": status.description})
    logs = [
        {
            "timestamp": _us(event.timestamp),
            "fields": [{"key": "event", "type": "string", "value": event.name}, *_tags(event.attributes)],
        }
        for event in span.events or ()
    ]
    start = _us(span.start_time)
    end = _us(span.end_time) if span.end_time is not None else start
    return {
        "traceID": trace_id,
        "spanID": format_span_id(ctx.span_id),
        "operationName": span.name,
        "references": references,
        "startTime": start,
        "duration": max(0, end - start),
        "tags": tags,
        "logs": logs,
        "processID": process_id,
        "warnings": None,
    }


def to_jaeger(spans: Sequence[ReadableSpan], service_name: str | None = None) -> dict[str, Any]:
    """Jaeger JSON for `spans`: one `data` entry per trace id, spans sorted by start time.

    Each distinct resource becomes a process (`p1`, `p2`, …) whose tags are the resource
    attributes; the service name comes from the resource's `service.name` unless given.
    """
    by_trace: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        if span.context is None:
            continue
        by_trace.setdefault(span.context.trace_id, []).append(span)

    data: list[dict[str, Any]] = []
    for trace_id, members in by_trace.items():
        members.sort(key=lambda s: (s.start_time or 0, s.end_time or 0))
        processes: dict[str, dict[str, Any]] = {}
        process_ids: dict[Any, str] = {}
        docs = []
        for span in members:
            resource_attrs = dict(span.resource.attributes) if span.resource is not None else {}
            key = tuple(sorted((k, repr(v)) for k, v in resource_attrs.items()))
            pid = process_ids.get(key)
            if pid is None:
                pid = process_ids[key] = f"p{len(process_ids) + 1}"
                name = service_name or str(resource_attrs.get("service.name") or "unknown_service")
                processes[pid] = {
                    "serviceName": name,
                    "tags": [_tag(k, v) for k, v in resource_attrs.items() if k != "service.name"],
                }
            docs.append(_span_doc(span, pid))
        data.append({"traceID": format_trace_id(trace_id), "spans": docs, "processes": processes, "warnings": None})
    data.sort(key=lambda t: min((s["startTime"] for s in t["spans"]), default=0))
    return {"data": data}


# -- validation ------------------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_tag(tag: Any, where: str, problems: list[str]) -> None:
    if not isinstance(tag, dict):
        problems.append(f"{where}: tag is not an object")
        return
    key, typ, value = tag.get("key"), tag.get("type"), tag.get("value")
    if not isinstance(key, str) or not key:
        problems.append(f"{where}: tag key {key!r} is not a non-empty string")
    if typ not in TAG_TYPES:
        problems.append(f"{where}: tag {key!r} has type {typ!r}, expected one of {sorted(TAG_TYPES)}")
        return
    ok = {
        "string": isinstance(value, str),
        "binary": isinstance(value, str),
        "bool": isinstance(value, bool),
        "int64": _is_int(value),
        "float64": (isinstance(value, float) and math.isfinite(value)) or _is_int(value),
    }[typ]
    if not ok:
        problems.append(f"{where}: tag {key!r} of type {typ} has value {value!r} ({type(value).__name__})")


def _check_tags(tags: Any, where: str, problems: list[str]) -> None:
    if not isinstance(tags, list):
        problems.append(f"{where}: tags is not a list")
        return
    for tag in tags:
        _check_tag(tag, where, problems)


def _check_id(value: Any, pattern: re.Pattern[str], what: str, where: str, problems: list[str]) -> bool:
    if not isinstance(value, str) or not pattern.match(value.lower()):
        length = 32 if pattern is _HEX32 else 16
        problems.append(f"{where}: {what} {value!r} is not {length} hex digits")
        return False
    return True


def validate_jaeger(doc: Any) -> list[str]:
    """Every problem that would stop the Jaeger UI from loading `doc` (empty list: fine)."""
    problems: list[str] = []
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        return ['document must be an object with a "data" list']
    if not doc["data"]:
        problems.append('"data" is empty: no trace')
    for ti, trace in enumerate(doc["data"]):
        tw = f"data[{ti}]"
        if not isinstance(trace, dict):
            problems.append(f"{tw}: trace is not an object")
            continue
        _check_id(trace.get("traceID"), _HEX32, "traceID", tw, problems)
        processes = trace.get("processes")
        if not isinstance(processes, dict) or not processes:
            problems.append(f"{tw}: processes must be a non-empty object")
            processes = {}
        for pid, process in processes.items():
            pw = f"{tw}.processes[{pid!r}]"
            if not isinstance(process, dict):
                problems.append(f"{pw}: process is not an object")
                continue
            if not isinstance(process.get("serviceName"), str) or not process.get("serviceName"):
                problems.append(f"{pw}: serviceName must be a non-empty string")
            _check_tags(process.get("tags", []), pw, problems)
        spans = trace.get("spans")
        if not isinstance(spans, list) or not spans:
            problems.append(f"{tw}: spans must be a non-empty list")
            continue
        seen: set[str] = set()
        for si, span in enumerate(spans):
            sw = f"{tw}.spans[{si}]"
            if not isinstance(span, dict):
                problems.append(f"{sw}: span is not an object")
                continue
            sw = f"{sw} ({span.get('operationName')!r})"
            if _check_id(span.get("traceID"), _HEX32, "traceID", sw, problems) and span["traceID"] != trace.get(
                "traceID"
            ):
                problems.append(f"{sw}: traceID {span['traceID']} differs from the trace's {trace.get('traceID')}")
            if _check_id(span.get("spanID"), _HEX16, "spanID", sw, problems):
                if span["spanID"] in seen:
                    problems.append(f"{sw}: duplicate spanID {span['spanID']}")
                seen.add(span["spanID"])
            if not isinstance(span.get("operationName"), str):
                problems.append(f"{sw}: operationName must be a string")
            for field in ("startTime", "duration"):
                value = span.get(field)
                if not isinstance(value, int) or isinstance(value, bool):
                    problems.append(f"{sw}: {field} {value!r} must be an integer (microseconds)")
                elif value < 0:
                    problems.append(f"{sw}: {field} {value} is negative")
            refs = span.get("references", [])
            if not isinstance(refs, list):
                problems.append(f"{sw}: references is not a list")
                refs = []
            for ref in refs:
                if not isinstance(ref, dict):
                    problems.append(f"{sw}: reference is not an object")
                    continue
                if ref.get("refType") not in REF_TYPES:
                    problems.append(f"{sw}: refType {ref.get('refType')!r} not in {sorted(REF_TYPES)}")
                _check_id(ref.get("traceID"), _HEX32, "reference traceID", sw, problems)
                _check_id(ref.get("spanID"), _HEX16, "reference spanID", sw, problems)
            _check_tags(span.get("tags", []), sw, problems)
            logs = span.get("logs", [])
            if not isinstance(logs, list):
                problems.append(f"{sw}: logs is not a list")
                logs = []
            for log in logs:
                if not isinstance(log, dict):
                    problems.append(f"{sw}: log is not an object")
                    continue
                if not _is_int(log.get("timestamp")):
                    problems.append(f"{sw}: log timestamp {log.get('timestamp')!r} must be an integer")
                _check_tags(log.get("fields", []), f"{sw} log", problems)
            if span.get("processID") not in processes:
                problems.append(f"{sw}: processID {span.get('processID')!r} is not in processes")
    return problems


def load_trace_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a Jaeger JSON file; `ValueError` listing the problems if it is not valid."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not JSON: {exc}") from None
    problems = validate_jaeger(doc)
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  … and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise ValueError(f"{p}: not a valid Jaeger JSON trace:\n  {shown}{more}")
    return doc


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
    """Collects each run's spans (by `gen_ai.conversation.id`) and writes `<trace_dir>/<run_id>.json`.

    A run's spans are those started inside it (`on_start` notes their ids). The span that encloses a run
    also carries its id (`spans.conversation` stamps the MCP SDK's `tools/call` span) but is not the run's:
    it may end after the run (2025-11-25) or before it (a 2026-07-28 run outlives the round that started it),
    so it is left out, and a late span of a run already written opens no new run. The file is written when
    the run's root ends: a span named `invoke_agent supervisor…` whose parent is not one of the run's spans
    (so a nested supervisor span is not taken for the root). A span whose parent is not in the file (the
    root's, above all) is written without that reference, the parent's id kept as `mcp_team.parent_span_id`.
    Memory is bounded: at most `max_spans_per_run` spans per run (the root is always kept) and `max_runs`
    open runs (the oldest is dropped). Never raises into the SDK.
    """

    def __init__(
        self,
        trace_dir: str | os.PathLike[str],
        *,
        service_name: str | None = None,
        max_spans_per_run: int = 10_000,
        max_runs: int = 100,
    ) -> None:
        self.trace_dir = Path(trace_dir)
        self.service_name = service_name
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
        doc = to_jaeger(spans, self.service_name)
        if dropped:
            _log.warning("trace file: run %s had %d more spans than the cap; they are not in the file", run_id, dropped)
            for trace in doc["data"]:
                trace["warnings"] = [f"{dropped} spans dropped (more than {self.max_spans_per_run} in one run)"]
        problems = validate_jaeger(doc)
        if problems:
            _log.warning("trace file for run %s has problems: %s", run_id, "; ".join(problems[:5]))
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
