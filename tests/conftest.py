"""Shared fixtures: the anyio backend, one session-wide in-memory span exporter, and hypothesis settings.

OpenTelemetry lets a process set its tracer provider once, so every test shares this one and
`spans` clears it first. Under pytest-xdist each worker is a process of its own, with its own provider
and exporter, and runs one test at a time, so `spans` sees only its test's spans.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from support.spans import Spans

_EXPORTER = InMemorySpanExporter()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
trace.set_tracer_provider(_provider)

# No wall-clock limits in property tests either: a loaded machine must not fail an example for being slow.
settings.register_profile("mcp-team", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("mcp-team")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def spans() -> Spans:
    _EXPORTER.clear()
    return Spans(_EXPORTER)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers a core. Most of the suite's time is spent waiting (servers and subprocesses
    starting, a model's latency, a lease running out), not computing: with one worker a core the cores sat
    idle a third of the time."""
    import os

    return 2 * len(os.sched_getaffinity(0))
