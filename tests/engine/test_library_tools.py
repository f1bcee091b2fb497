"""A specialist with a tool of the user's own, run through `Team.run`: a tool written wrongly (a plain `def`, a
return value that is not text) is named, with what it must be, to the model and on the tool's span."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_team import ModelSet, Specialist, Team, Tool, use_tracing
from mcp_team.llm import ModelRequest, ModelResponse, TextBlock, ToolUseBlock
from mcp_team.llm.offline import OfflineModel

pytestmark = pytest.mark.anyio


class Caller:
    """The offline team, except that the specialist `scout` calls `lookup` once, then answers with what it got."""

    name, provider = "caller", "mine"

    def __init__(self) -> None:
        self.offline = OfflineModel()
        self.tool_results: list[tuple[str, bool]] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.member != "scout":
            return await self.offline.complete(request)
        results = [b for m in request.messages for b in m.blocks if b.type == "tool_result"]
        if not results:
            call = ToolUseBlock(id="t1", name="lookup", input={"q": "bees"})
            return ModelResponse(content=[call], stop_reason="tool_use", model=self.name)
        self.tool_results += [(r.content, r.is_error) for r in results]
        return ModelResponse(content=[TextBlock(text="Bees: see the lookup.")], model=self.name)


def returns_a_dict() -> Callable[[dict[str, Any]], Any]:
    async def run(arguments: dict[str, Any]) -> Any:
        return {"fact": "bees dance"}

    return run


def plain_def() -> Callable[[dict[str, Any]], Any]:
    def run(arguments: dict[str, Any]) -> str:
        return "bees dance"

    return run


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (returns_a_dict, "lookup returned dict, not text: a Tool's run must return a str"),
        (plain_def, "lookup's run is not async: a Tool's run must be an `async def` returning a str"),
    ],
)
async def test_a_tool_written_wrongly_is_named_with_what_it_must_be(
    make: Callable[[], Callable[[dict[str, Any]], Any]], message: str
) -> None:
    model = Caller()
    lookup = Tool("lookup", "Looks a fact up.", {"type": "object"}, make(), read_only=True)
    scout = Specialist(name="scout", description="Finds facts.", system_prompt="Use lookup.", tools=(lookup,))
    memory = InMemorySpanExporter()
    with use_tracing(processors=[SimpleSpanProcessor(memory)]):
        result = await Team(ModelSet.single(model), [scout]).run("Find facts about bees")
    assert result.status == "complete"
    assert model.tool_results == [(message, True)]
    (span,) = [s for s in memory.get_finished_spans() if s.name == "execute_tool lookup"]
    assert span.status.description == message


async def test_a_plain_function_takes_progress_events(caplog: pytest.LogCaptureFixture) -> None:
    # `on_event=print`, or a list's append: each event arrived as a logged TypeError ("can't be used in 'await'").
    seen: list[str] = []
    scout = Specialist(name="scout", description="Finds facts.", system_prompt="List facts only.")
    result = await Team(ModelSet.single(OfflineModel()), [scout]).run(
        "Find facts", on_event=lambda e: seen.append(e.kind)
    )
    assert result.status == "complete"
    assert seen == ["run_started", "handoff_started", "handoff_finished"]
    assert "progress report failed" not in caplog.text
