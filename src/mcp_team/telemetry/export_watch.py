"""What an operator is told about the OTLP collector: one line when spans stop reaching it, one when they
reach it again.

The SDK's OTLP exporters log every failed batch themselves, a warning per retry and an error per batch
given up (the gRPC one with a traceback for some codes), so an absent collector wrote two to four raw lines
after every tool call a server answered, for as long as it stayed away. `WatchedExporter` wraps the
exporter, keeps those records out of the log (the first one's words become the reason it gives) and says
what changed, once per outage. Runs never wait on it: the batch processor exports in its own thread.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

_log = logging.getLogger("mcp_team.telemetry")

# The loggers the SDK's OTLP span exporters report failed exports on (HTTP, and gRPC's shared exporter).
EXPORTER_LOGGERS: Final = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
)
_REASON_CHARS: Final = 300


def reason_of(said: str) -> str:
    """The cause in the SDK's words without its retry framing: the OS's error for a connection (HTTP), the
    details (gRPC), else the line itself."""
    said = " ".join(said.split())
    if errno := re.search(r"\[Errno -?\d+\] ([^\"')]+)", said):
        return errno.group(1).strip()
    if "Error details: " in said:
        return said.rsplit("Error details: ", 1)[1][:_REASON_CHARS]
    return said[:_REASON_CHARS]


class WatchedExporter(SpanExporter):
    """An OTLP span exporter whose failures are said once per outage, with the collector's URL."""

    def __init__(self, inner: SpanExporter, endpoint: str) -> None:
        self.inner, self.endpoint = inner, endpoint
        self.down = False
        self._reason = threading.local()  # what the SDK logged during this thread's export
        for name in EXPORTER_LOGGERS:
            logging.getLogger(name).addFilter(self._take)

    def _take(self, record: logging.LogRecord) -> bool:
        """Keep the SDK's warnings and errors about an export out of the log; the first is the reason."""
        if record.levelno < logging.WARNING:
            return True
        if getattr(self._reason, "said", None) is None:
            self._reason.said = reason_of(record.getMessage())
        return False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self._reason.said = None
        try:
            result = self.inner.export(spans)
        except Exception as exc:  # an exporter bug must not reach the batch processor's thread as a traceback
            self._reason.said = f"{type(exc).__name__}: {exc}"
            result = SpanExportResult.FAILURE
        said, self._reason.said = self._reason.said, None
        if result is SpanExportResult.SUCCESS:
            if self.down:
                self.down = False
                _log.warning("traces reach the OTLP endpoint %s again", self.endpoint)
        elif not self.down:
            self.down = True
            _log.warning(
                "traces cannot be exported to the OTLP endpoint %s (%s); runs go on, and their spans are dropped "
                "until it answers (check --otlp-endpoint / OTEL_EXPORTER_OTLP_ENDPOINT, or start the collector)",
                self.endpoint,
                said or "the export failed",
            )
        return result

    def shutdown(self) -> None:
        try:
            self.inner.shutdown()
        finally:
            for name in EXPORTER_LOGGERS:
                logging.getLogger(name).removeFilter(self._take)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)
