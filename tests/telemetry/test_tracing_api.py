"""Tracing through a caller's provider or span processors (`mcp_team.use_tracing`), spans kept in memory."""

from __future__ import annotations

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_team import ModelSet, RunResult, Team, use_tracing
from mcp_team.llm.offline import OfflineModel
from mcp_team.telemetry import attributes as A
from support import HANG_GUARD, clean_env
from support.spans import Spans

pytestmark = [pytest.mark.process]

REQUEST = "Research bees and calculate 2+2"


def team() -> Team:
    return Team(ModelSet.single(OfflineModel()))


def run_ids(exporter: InMemorySpanExporter) -> set[object]:
    return {(s.attributes or {}).get(A.CONVERSATION_ID) for s in exporter.get_finished_spans()}


@pytest.mark.anyio
async def test_processors_collect_a_runs_spans_in_memory_and_the_global_provider_gets_none(spans: Spans) -> None:
    memory = InMemorySpanExporter()
    with use_tracing(processors=[SimpleSpanProcessor(memory)]) as provider:
        result = await team().run(REQUEST)
    assert isinstance(provider, TracerProvider)
    names = [s.name for s in memory.get_finished_spans()]
    assert "invoke_agent supervisor" in names and "execute_tool transfer_to_analyst" in names
    assert "execute_tool calculate" in names
    assert run_ids(memory) == {result.run_id}
    assert result.trace_id == trace.format_trace_id(memory.get_finished_spans()[0].context.trace_id)
    assert spans.all == []  # nothing went to the global provider

    # Outside the block, spans go to the global provider again.
    after = await team().run(REQUEST)
    assert {spans.attr(s, A.CONVERSATION_ID) for s in spans.all} == {after.run_id}
    assert run_ids(memory) == {result.run_id}


@pytest.mark.anyio
async def test_concurrent_runs_trace_to_their_own_providers(spans: Spans) -> None:
    exporters = [InMemorySpanExporter(), InMemorySpanExporter()]
    results: list[RunResult] = [None, None]  # type: ignore[list-item]

    async def traced(i: int) -> None:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporters[i]))
        with use_tracing(provider):
            results[i] = await team().run(REQUEST)

    async with anyio.create_task_group() as tg:
        tg.start_soon(traced, 0)
        tg.start_soon(traced, 1)
    for i in (0, 1):
        assert run_ids(exporters[i]) == {results[i].run_id}
        assert len(exporters[i].get_finished_spans()) >= 8
    assert spans.all == []


def test_processors_need_an_sdk_provider() -> None:
    with (
        pytest.raises(TypeError, match="takes no span processors; pass an SDK TracerProvider"),
        use_tracing(trace.NoOpTracerProvider(), processors=[SimpleSpanProcessor(InMemorySpanExporter())]),
    ):
        pass


def test_a_global_provider_installed_after_a_run_gets_the_next_runs_spans() -> None:
    """The global tracer is looked up once (telemetry/spans.py): a run made before any provider is installed
    costs no-op spans, and a provider installed afterwards still gets every span of the runs after it. In a
    process of its own: the global provider can be set only once per process."""
    import subprocess
    import sys

    code = """
import anyio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from mcp_team import ModelSet, Team
from mcp_team.llm.offline import OfflineModel

team = Team(ModelSet.single(OfflineModel()))
before = anyio.run(team.run, "Research bees")
memory = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(memory))
trace.set_tracer_provider(provider)
after = anyio.run(team.run, "Research bees")
ids = {s.attributes.get("gen_ai.conversation.id") for s in memory.get_finished_spans()}
print(len(memory.get_finished_spans()), ids == {after.run_id}, before.trace_id is None)
"""
    done = subprocess.run(
        [sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=HANG_GUARD, check=True
    )
    count, only_after, untraced_before = done.stdout.split()
    assert int(count) >= 3 and only_after == "True" and untraced_before == "True", done.stdout


@pytest.mark.anyio
@pytest.mark.parametrize("shape", ["tuple", "generator"])
async def test_processors_may_come_in_any_iterable(spans: Spans, shape: str) -> None:
    # Refused since use_tracing checks its arguments up front (it asked for a Sequence); the SDK takes any.
    memory = InMemorySpanExporter()
    made = [SimpleSpanProcessor(memory)]
    processors = tuple(made) if shape == "tuple" else (p for p in made)
    with use_tracing(processors=processors):
        result = await team().run(REQUEST)
    assert run_ids(memory) == {result.run_id}
