"""A tool's huge result or error reaches the model cut, with a note it can act on: a tool of the user's own
through `Team.run`, and an external MCP server's tool through an MCP client, with `[tools] max_result_chars`.

Before, a user's tool returning 10 MB went into the next model request whole, and that call failed on the token
budget or the provider's context limit with an error that did not name the tool."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_team import ModelSet, Specialist, Team, Tool, use_tracing
from mcp_team.llm import ModelRequest, ModelResponse, TextBlock, ToolResultBlock, ToolUseBlock
from mcp_team.llm.offline import OfflineModel
from mcp_team.llm.settings import ModelSettings
from mcp_team.runs.types import RunRequest
from mcp_team.server.app import build_server
from mcp_team.teamfile.loading import load_team
from mcp_team.telemetry import content
from mcp_team.telemetry.attributes import TOOL_CALL_RESULT
from support import ECHO_MCP_SERVER
from support.fake_openai_api import FakeOpenAIAPI

pytestmark = [pytest.mark.anyio, pytest.mark.process]

TEN_MB = 10 * 1024 * 1024
BEES = "🐝 bees dance é\n"  # multi-byte in UTF-8 (4 and 2 bytes), and the bee is outside the BMP


def huge(n: int = TEN_MB) -> str:
    return (BEES * (n // len(BEES) + 1))[:n]


class Caller:
    """The offline team, except that the specialist `scout` calls `lookup` once, then answers; it keeps the
    tool results it was sent."""

    name, provider = "caller", "mine"

    def __init__(self) -> None:
        self.offline = OfflineModel()
        self.tool_results: list[ToolResultBlock] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.member != "scout":
            return await self.offline.complete(request)
        results = [b for m in request.messages for b in m.blocks if isinstance(b, ToolResultBlock)]
        if not results:
            call = ToolUseBlock(id="t1", name="lookup", input={"q": "bees"})
            return ModelResponse(content=[call], stop_reason="tool_use", model=self.name)
        self.tool_results += results
        return ModelResponse(content=[TextBlock(text="Bees: see the lookup.")], model=self.name)


@pytest.fixture
def capture_on() -> Iterator[None]:
    content.set_capture_enabled(True)
    yield
    content.set_capture_enabled(None)


async def run_scout(lookup: Tool) -> tuple[ToolResultBlock, Any]:
    """What `scout`'s model was sent after calling `lookup` once, and the tool's span."""
    model = Caller()
    scout = Specialist(name="scout", description="Finds facts.", system_prompt="Use lookup.", tools=(lookup,))
    memory = InMemorySpanExporter()
    with use_tracing(processors=[SimpleSpanProcessor(memory)]):
        result = await Team(ModelSet.single(model), [scout]).run("Find facts about bees")
    assert result.status == "complete", result.failures
    (seen,) = model.tool_results
    (span,) = [s for s in memory.get_finished_spans() if s.name == "execute_tool lookup"]
    return seen, span


def note(what: str, length: int, shown: int) -> str:
    return (
        f"\n\n[truncated: the {what} is {length:,} characters; only the first {shown:,} are shown. If you need the "
        "rest, ask the tool for less at a time (a narrower query, a part or a page).]"
    )


async def test_a_huge_result_reaches_the_model_cut_with_a_note_and_the_span_records_that(capture_on: None) -> None:
    big = huge()

    async def run(arguments: dict[str, Any]) -> str:
        return big

    seen, span = await run_scout(Tool("lookup", "Looks a fact up.", {"type": "object"}, run, read_only=True))

    assert not seen.is_error
    assert seen.content == big[:100_000] + note("result", TEN_MB, 100_000)
    seen.content.encode("utf-8")  # whole characters only: strict UTF-8 takes it
    recorded = json.loads(span.attributes[TOOL_CALL_RESULT])  # the span's content cut is of what the model saw
    assert recorded == f"{seen.content[:2000]}…[+{len(seen.content) - 2000} chars]"


async def test_a_huge_error_reaches_the_model_cut_the_same_way() -> None:
    async def run(arguments: dict[str, Any]) -> str:
        raise RuntimeError(huge())

    seen, span = await run_scout(Tool("lookup", "Looks a fact up.", {"type": "object"}, run))

    said = "lookup failed: RuntimeError: " + huge()
    assert seen.is_error and seen.content == said[:100_000] + note("error", len(said), 100_000)
    assert span.status.description == seen.content


async def test_a_tool_says_how_much_of_its_result_a_model_sees() -> None:
    async def run(arguments: dict[str, Any]) -> str:
        return "🐝" * 30

    seen, _ = await run_scout(Tool("lookup", "Looks a fact up.", {"type": "object"}, run, max_result_chars=10))
    assert seen.content == "🐝" * 10 + note("result", 30, 10)

    for wrong in (0, True, "10"):
        with pytest.raises(ValueError, match=f"tool 'lookup': max_result_chars must be a positive int, not {wrong!r}"):
            Tool("lookup", "Looks a fact up.", {"type": "object"}, run, max_result_chars=wrong)  # type: ignore[arg-type]


def echoing_brain(request: ModelRequest) -> ModelResponse:
    """The model behind the fake API: `echoer` calls the echo server's `echo` with 2,000 characters, then
    answers with what it was sent back."""
    results = [b for m in request.messages for b in m.blocks if isinstance(b, ToolResultBlock)]
    if not results:
        call = ToolUseBlock(id="e1", name="echo", input={"text": "é" * 2000})
        return ModelResponse(content=[call], stop_reason="tool_use", model="gpt-4o-mini")
    return ModelResponse(content=[TextBlock(text=results[0].content)], model="gpt-4o-mini")


async def test_an_mcp_servers_tool_is_cut_at_the_team_files_max_result_chars(tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    team.write_text(
        "[tools]\nmax_result_chars = 500\n"
        + ECHO_MCP_SERVER
        + '\n[[specialists]]\nname = "echoer"\ndescription = "Echoes."\nprompt = "Echo."\ntools = ["echo/echo"]\n'
    )
    with FakeOpenAIAPI(brain=echoing_brain) as api:
        settings = ModelSettings(model="openai:gpt-4o-mini", openai_api_key="sk-test", openai_base_url=api.base_url)
        async with Client(build_server(settings, load_team(str(team)))) as client:
            result = await client.call_tool("echoer", {"task": "Echo a long text"})

    assert not result.is_error, result.content
    assert result.structured_content["output"] == "é" * 500 + note("result", 2000, 500)  # type: ignore[index]


async def test_a_durable_run_cuts_at_the_tools_own_limit_and_records_no_more_than_the_model_sees(
    tmp_path: Path,
) -> None:
    """Durable runs (the default of `serve` and `run`) wrap each tool as a step: the wrapper was a new `Tool`
    with the default limit, so a tool's own (or `[tools] max_result_chars`) was ignored there."""
    from mcp_team.runs import open_runs, resolve
    from mcp_team.runs.team_engine import TeamEngine

    async def run(arguments: dict[str, Any]) -> str:
        return "x" * 30

    model = Caller()
    lookup = Tool("lookup", "Looks a fact up.", {"type": "object"}, run, max_result_chars=10)
    scout = Specialist(name="scout", description="Finds facts.", system_prompt="Use lookup.", tools=(lookup,))
    async with open_runs(
        resolve(state_dir=tmp_path, environ={}), TeamEngine(Team(ModelSet.single(model), [scout]))
    ) as runs:
        started = await runs.start(RunRequest(request="Find facts about bees"))
        record = await runs.wait(started.run_id, timeout=60)
    assert record is not None and record.status == "complete", record
    (seen,) = model.tool_results
    assert seen.content == "x" * 10 + note("result", 30, 10)
    with sqlite3.connect(tmp_path / "runs.sqlite") as db:
        outputs = [str(row[0]) for row in db.execute("SELECT output FROM operation_outputs")]
    assert any("x" * 10 in out for out in outputs), outputs  # the tool's step was recorded
    assert not any("x" * 11 in out for out in outputs), outputs  # and only what the model saw of it


async def test_an_error_is_cut_at_the_tools_own_limit() -> None:
    async def run(arguments: dict[str, Any]) -> str:
        raise RuntimeError("y" * 50)

    seen, _ = await run_scout(Tool("lookup", "Looks a fact up.", {"type": "object"}, run, max_result_chars=20))
    said = "lookup failed: RuntimeError: " + "y" * 50
    assert seen.is_error and seen.content == said[:20] + note("error", len(said), 20)


async def test_a_result_that_only_looks_cut_already_is_cut() -> None:
    # `capped` leaves text it cut itself as it is (a durable step cuts, then the loop); a tool's own text with the
    # note's start at the limit and more after it is no such text.
    posing = "x" * 10 + "\n\n[truncated: the result is 11 characters" + "y" * 5000

    async def run(arguments: dict[str, Any]) -> str:
        return posing

    seen, _ = await run_scout(Tool("lookup", "Looks a fact up.", {"type": "object"}, run, max_result_chars=10))
    assert seen.content == "x" * 10 + note("result", len(posing), 10)
