"""A tiny OTLP/HTTP trace receiver for tests: `POST /v1/traces` (protobuf) on 127.0.0.1, in a daemon thread.

with OTLPReceiver() as rx:
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = rx.endpoint
    ...
    rx.wait_for(lambda spans: any(s["name"] == "invoke_agent supervisor" for s in spans))
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from support import HANG_GUARD
from support.local_http import LocalHTTPServer

_KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}


def any_value(value: AnyValue) -> Any:
    """An OTLP `AnyValue` as a Python value."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return getattr(value, which)


def attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in kvs if isinstance(kv, KeyValue)}


def decode(body: bytes) -> list[dict[str, Any]]:
    """The spans of one `ExportTraceServiceRequest` as simple dicts."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    out: list[dict[str, Any]] = []
    for rs in request.resource_spans:
        resource = attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for span in ss.spans:
                out.append(
                    {
                        "name": span.name,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex() or None,
                        "kind": _KINDS.get(span.kind, str(span.kind)),
                        "attributes": attributes(span.attributes),
                        "status": _STATUS.get(span.status.code, str(span.status.code)),
                        "status_message": span.status.message,
                        "events": [e.name for e in span.events],
                        "start_ns": span.start_time_unix_nano,
                        "end_ns": span.end_time_unix_nano,
                        "scope": ss.scope.name,
                        "resource": resource,
                    }
                )
    return out


class OTLPReceiver:
    """Collects the spans posted to it; thread-safe. Use as a context manager."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: list[dict[str, Any]] = []
        self.requests = 0
        self.errors: list[str] = []
        self._http = LocalHTTPServer(self._handler(), "otlp-receiver")

    # -- lifecycle --

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                try:
                    if self.path.rstrip("/") != "/v1/traces":
                        self._reply(404, b"not found", "text/plain")
                        return
                    if encoding == "gzip":
                        body = gzip.decompress(body)
                    elif encoding == "deflate":
                        body = zlib.decompress(body)
                    ctype = self.headers.get("Content-Type", "")
                    if "protobuf" not in ctype:
                        raise ValueError(f"unsupported content type {ctype!r}")
                    spans = decode(body)
                except Exception as exc:
                    with receiver._lock:
                        receiver.errors.append(repr(exc))
                    self._reply(400, str(exc).encode(), "text/plain")
                    return
                with receiver._lock:
                    receiver._spans.extend(spans)
                    receiver.requests += 1
                self._reply(200, ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

            def _reply(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def __enter__(self) -> OTLPReceiver:
        self._http.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._http.stop()

    # -- access --

    @property
    def endpoint(self) -> str:
        """Base URL, for `OTEL_EXPORTER_OTLP_ENDPOINT` (the exporter appends `/v1/traces`)."""
        return self._http.url

    @property
    def traces_endpoint(self) -> str:
        """Full URL, for `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`."""
        return f"{self.endpoint}/v1/traces"

    @property
    def spans(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._spans)

    def named(self, name: str) -> list[dict[str, Any]]:
        return [s for s in self.spans if s["name"] == name]

    def clear(self) -> None:
        with self._lock:
            self._spans.clear()
            self.requests = 0

    def wait_for(
        self, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = HANG_GUARD
    ) -> list[dict[str, Any]]:
        """Poll until `predicate(spans)` holds; returns the spans, or raises AssertionError after `timeout` (a
        guard against a hang, not a speed claim)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans
            if predicate(spans):
                return spans
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"timed out after {timeout}s; received {[s['name'] for s in spans]} errors={self.errors}"
                )
            time.sleep(0.02)
