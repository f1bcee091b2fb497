"""The finished spans of one test (the `spans` fixture of tests/conftest.py), with helpers to walk the tree."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class Spans:
    """The finished spans of one test, with helpers to walk the tree."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self._exporter = exporter

    @property
    def all(self) -> list[ReadableSpan]:
        return list(self._exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.all if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"expected one span {name!r}, found {len(found)}: {[s.name for s in self.all]}"
        return found[0]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        pid = parent.context.span_id
        return sorted(
            (s for s in self.all if s.parent is not None and s.parent.span_id == pid), key=lambda s: s.start_time or 0
        )

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        return next((s for s in self.all if s.context.span_id == span.parent.span_id), None)

    def attr(self, span: ReadableSpan, key: str) -> object:
        return (span.attributes or {}).get(key)
