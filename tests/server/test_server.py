"""The MCP surface through the in-process `mcp.Client`, on both protocol revisions."""

from __future__ import annotations

import json
import re

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp_types import SamplingCapability, SamplingToolsCapability

from mcp_team.handoffs import RunResult
from mcp_team.llm import Message, ModelRequest, TextBlock, ToolDefinition, ToolResultBlock, ToolUseBlock
from mcp_team.llm.offline import OfflineModel
from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server
from mcp_team.teamfile.loading import TeamSpec
from support import RUN_TOOLS, run_listed
from support.fake_messages_api import member_from_prompt

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
REQUEST = "Research bees, calculate 2+2, write a short report and review it"


@pytest.fixture(params=["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def offline(**kw: object) -> ModelSettings:
    return ModelSettings(model="offline", **kw)  # type: ignore[arg-type]


async def test_tools_have_typed_inputs_output_schemas_and_annotations(mode: str) -> None:
    async with Client(build_server(offline()), mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "run_team" in (client.instructions or "") and "researcher" in (client.instructions or "")

    assert set(tools) == {"run_team", "plan_team", "researcher", "analyst", "writer", "coder", "reviewer", *RUN_TOOLS}
    run = tools["run_team"]
    # One definition of a run's arguments: start_run takes exactly what run_team takes.
    assert {**tools["start_run"].input_schema, "title": ""} == {**run.input_schema, "title": ""}
    # Its descriptions are read by the client's model: no names of the code behind them.
    assert not re.search(r"llm\.|handoffs\.|Budgets\.|ModelSet", json.dumps(run.output_schema)), run.output_schema
    assert run.input_schema["required"] == ["request"]
    for prop in ("request", "mode", "max_handoffs", "max_model_calls", "max_tokens", "deadline_seconds"):
        assert run.input_schema["properties"][prop]["description"]
    assert set(run.output_schema["properties"]) >= {
        "answer",
        "status",
        "handoffs",
        "failures",
        "usage",
        "run_id",
        "trace_id",
    }
    assert run.annotations.read_only_hint is True and run.annotations.destructive_hint is False
    analyst = tools["analyst"]
    assert analyst.input_schema["required"] == ["task"] and "context" in analyst.input_schema["properties"]
    assert "quantitative" not in analyst.description or "numbers" in analyst.description
    assert set(analyst.output_schema["properties"]) >= {"status", "output", "error", "turns", "usage"}


async def test_run_team_returns_the_structured_result_with_progress(mode: str) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append((p, total, message))

    async with Client(build_server(offline()), mode=mode) as client:
        result = await client.call_tool("run_team", {"request": REQUEST}, progress_callback=on_progress)

    assert not result.is_error
    run = RunResult.model_validate(result.structured_content)
    assert run.status == "complete"
    assert [h.target for h in run.handoffs] == ["researcher", "analyst", "writer", "reviewer"]
    values = [p for p, _, _ in progress]
    assert values == sorted(values) and len(set(values)) == len(values) == 8  # strictly increasing
    messages = [m or "" for _, _, m in progress]
    for name in ("researcher", "analyst", "writer", "reviewer"):
        assert any(m.startswith(f"{name}:") for m in messages)  # started: names the specialist and task
        assert f"{name} done" in messages


async def test_run_is_recorded_as_a_resource(mode: str) -> None:
    async with Client(build_server(offline()), mode=mode) as client:
        result = await client.call_tool("run_team", {"request": REQUEST, "mode": "planned"})
        run_id = result.structured_content["run_id"]
        record = json.loads((await client.read_resource(f"team://runs/{run_id}")).contents[0].text)
        index = json.loads((await client.read_resource("team://runs")).contents[0].text)
        team = json.loads((await client.read_resource("team://specialists")).contents[0].text)
        with pytest.raises(Exception, match="no run 'nope'"):
            await client.read_resource("team://runs/nope")

    assert record["request"] == REQUEST and record["status"] == "complete" and record["plan"]["tasks"]
    assert record["handoffs"][0]["task"] and "output" in record["handoffs"][0]
    assert index["runs"][0]["run_id"] == run_id
    analyst = next(s for s in team["specialists"] if s["name"] == "analyst")
    assert analyst["tools"] == ["calculate"] and analyst["max_turns"] == 6


async def test_plan_team_returns_the_validated_plan(mode: str) -> None:
    async with Client(build_server(offline()), mode=mode) as client:
        result = await client.call_tool("plan_team", {"request": REQUEST})
    plan = result.structured_content
    assert [t["specialist"] for t in plan["tasks"]] == ["researcher", "analyst", "writer", "reviewer"]
    assert plan["tasks"][3]["depends_on"] == ["t3"]


async def test_specialist_tools_and_their_errors(mode: str) -> None:
    settings = offline(faults="server_error:coder")
    async with Client(build_server(settings), mode=mode) as client:
        ok = await client.call_tool("analyst", {"task": "compute 6*7", "context": "for the report"})
        failed = await client.call_tool("coder", {"task": "write fizzbuzz"})
        empty = await client.call_tool("run_team", {"request": ""})
        with pytest.raises(MCPError) as unknown:  # the spec's protocol error for an unknown tool
            await client.call_tool("wizard", {"task": "x"})

    assert not ok.is_error and ok.structured_content["status"] == "completed"
    assert "6*7 = 42" in ok.structured_content["output"]
    assert failed.is_error and "coder failed (server_error)" in failed.content[0].text
    assert empty.is_error and "request" in empty.content[0].text
    assert unknown.value.code == types.INVALID_PARAMS and "wizard" in unknown.value.message


async def test_a_failed_run_is_a_tool_error_a_person_can_act_on(mode: str) -> None:
    async with Client(build_server(offline(faults="server_error:researcher")), mode=mode) as client:
        result = await client.call_tool("run_team", {"request": "Research bees"})
    assert result.is_error
    text = result.content[0].text
    assert "could not answer" in text and "team://runs/" in text and "server_error" in text


async def test_budget_overrides_give_a_partial_answer(mode: str) -> None:
    async with Client(build_server(offline()), mode=mode) as client:
        result = await client.call_tool("run_team", {"request": REQUEST, "max_handoffs": 1})
        bad = await client.call_tool("run_team", {"request": REQUEST, "max_handoffs": 0})
    assert result.structured_content["status"] == "partial"
    assert "handoff budget (1)" in result.structured_content["answer"]
    assert bad.is_error and "max_handoffs" in bad.content[0].text


async def test_a_blank_task_or_request_is_refused_before_any_model_call(mode: str) -> None:
    async with Client(build_server(offline()), mode=mode) as client:
        blank_task = await client.call_tool("researcher", {"task": " \n\t"})
        blank_plan = await client.call_tool("plan_team", {"request": "   "})
        blank_run = await client.call_tool("run_team", {"request": " "})
    assert blank_task.is_error and "'task' is empty: say what the specialist should do" in blank_task.content[0].text  # type: ignore[union-attr]
    for result in (blank_plan, blank_run):
        assert result.is_error and "'request' is empty: say what the team should do" in result.content[0].text  # type: ignore[union-attr]


async def test_budgets_must_be_numbers_not_strings_or_booleans(mode: str) -> None:
    # Coerced before: "3" was 3, and true was a budget of 1 handoff.
    async with Client(build_server(offline()), mode=mode) as client:
        for args, says in [({"max_handoffs": "3"}, "must be a number, not a string"),
                           ({"max_handoffs": True}, "must be a number, not a boolean"),
                           ({"max_cost": "1"}, "Input should be a valid number")]:  # fmt: skip
            result = await client.call_tool("run_team", {"request": "Research bees", **args})
            (name,) = args
            text = result.content[0].text  # type: ignore[union-attr]
            assert result.is_error and f"{name}: {says}" in text, text
        schema = {t.name: t for t in (await client.list_tools()).tools}["run_team"].input_schema
        assert {"minimum": 1, "type": "integer"} in schema["properties"]["max_handoffs"]["anyOf"]  # JSON Schema's word
        # a whole number written as a float (some clients' JSON) is that number
        fine = await client.call_tool("run_team", {"request": "Research bees", "max_handoffs": 3.0,
                                                   "deadline_seconds": 60})  # fmt: skip
    assert not fine.is_error, fine.content


async def test_prompts_let_the_client_model_play_each_role(mode: str) -> None:
    async with Client(build_server(offline()), mode=mode) as client:
        names = {p.name for p in (await client.list_prompts()).prompts}
        supervisor = await client.get_prompt("supervisor", {"request": "Plan a trip"})
        writer = await client.get_prompt("writer", {"task": "Write a haiku", "context": "about bees"})
    assert names == {"supervisor", "researcher", "analyst", "writer", "coder", "reviewer"}
    text = supervisor.messages[0].content.text
    assert "Plan a trip" in text and "- researcher:" in text and "with this server's tool named after it" in text
    assert "handoff_to_" not in text and "finalize" not in text  # the engine's own tools, which a client has not
    text = writer.messages[0].content.text
    assert text.startswith("You are the writer specialist") and "Write a haiku" in text and "about bees" in text


async def test_cancellation_stops_all_work_promptly_and_records_the_run(mode: str) -> None:
    server = build_server(offline(offline_latency_ms=300))
    both_started = anyio.Event()

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        if p == 2:  # two handoffs started: both specialists are inside their 300 ms model calls
            both_started.set()

    async with Client(server, mode=mode) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: client.call_tool(
                    "run_team", {"request": "Research bees and calculate 2+2"}, progress_callback=on_progress
                )
            )
            await both_started.wait()
            tg.cancel_scope.cancel()
        run = await run_listed(client)
        await anyio.sleep(0.5)  # had anything kept running, it would have finished by now
        again = await run_listed(client)

    assert run["status"] == "cancelled"
    # Both were inside their model calls when the record was saved: it was saved on the cancellation,
    # not after the work finished.
    handoffs = [(h["target"], h["status"]) for h in run["handoffs"]]
    assert handoffs == [("researcher", "cancelled"), ("analyst", "cancelled")]
    assert again["status"] == "cancelled"  # nothing overwrote it after the cancel


def _wire_to_request(params: types.CreateMessageRequestParams) -> ModelRequest:
    messages = []
    for m in params.messages:
        blocks: list[TextBlock | ToolUseBlock | ToolResultBlock] = []
        for b in m.content_as_list:
            if isinstance(b, types.TextContent):
                blocks.append(TextBlock(text=b.text))
            elif isinstance(b, types.ToolUseContent):
                blocks.append(ToolUseBlock(id=b.id, name=b.name, input=b.input))
            elif isinstance(b, types.ToolResultContent):
                text = "".join(c.text for c in b.content if isinstance(c, types.TextContent))
                blocks.append(ToolResultBlock(tool_use_id=b.tool_use_id, content=text, is_error=bool(b.is_error)))
        messages.append(Message(role=m.role, content=blocks))
    tools = [
        ToolDefinition(name=t.name, description=t.description or "", input_schema=t.input_schema)
        for t in params.tools or []
    ]
    system = params.system_prompt or ""
    return ModelRequest(
        system=system, messages=messages, tools=tools, max_tokens=params.max_tokens, member=member_from_prompt(system)
    )


class ClientModel:
    """The client's own model, answering sampling requests (the offline model behind a callback)."""

    def __init__(self) -> None:
        self.model = OfflineModel()
        self.requests: list[types.CreateMessageRequestParams] = []

    async def __call__(
        self, context: object, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResultWithTools:
        self.requests.append(params)
        response = await self.model.complete(_wire_to_request(params))
        content: list[types.SamplingMessageContentBlock] = []
        for b in response.content:
            if isinstance(b, TextBlock):
                content.append(types.TextContent(type="text", text=b.text))
            else:
                content.append(types.ToolUseContent(type="tool_use", id=b.id, name=b.name, input=b.input))
        stop = "toolUse" if response.stop_reason == "tool_use" else "endTurn"
        return types.CreateMessageResultWithTools(
            role="assistant", model="client-llm", content=content, stop_reason=stop
        )


async def test_sampling_runs_the_team_on_the_client_model(mode: str) -> None:
    client_model = ClientModel()
    async with Client(
        build_server(ModelSettings()),
        mode=mode,
        sampling_callback=client_model,
        sampling_capabilities=SamplingCapability(tools=SamplingToolsCapability()),
    ) as client:
        result = await client.call_tool("run_team", {"request": REQUEST})
        single = await client.call_tool("analyst", {"task": "compute 6*7"})

    assert not result.is_error, result.content
    run = RunResult.model_validate(result.structured_content)
    assert run.status == "complete" and len(run.handoffs) == 4
    assert "2+2 = 4" in run.answer
    assert any(t.name == "handoff_to_writer" for t in client_model.requests[0].tools or [])
    assert client_model.requests[0].system_prompt.startswith("You are the supervisor")
    assert "6*7 = 42" in single.structured_content["output"]


async def test_no_model_and_no_sampling_is_a_clear_error(mode: str) -> None:
    async with Client(build_server(ModelSettings()), mode=mode) as client:
        result = await client.call_tool("run_team", {"request": "Research bees"})
    assert result.is_error
    text = result.content[0].text
    assert "no model is available" in text and "ANTHROPIC_API_KEY" in text and "sampling" in text


async def test_sampling_rounds_batch_parallel_branches_to_fit_the_round_limit() -> None:
    from mcp_team.specialists import Specialist

    crew = [Specialist(name=f"w{i}", description="works", system_prompt="work") for i in range(12)]
    client_model = ClientModel()
    # 14 model calls (supervisor, 12 specialists, supervisor) would need 14 rounds one by one; the client allows 10.
    async with Client(
        build_server(ModelSettings(), TeamSpec.of(crew)),
        mode="auto",
        sampling_callback=client_model,
        sampling_capabilities=SamplingCapability(tools=SamplingToolsCapability()),
    ) as client:
        result = await client.call_tool("run_team", {"request": "Do the work"})

    assert not result.is_error, result.content
    assert result.structured_content["status"] == "complete"
    assert len(result.structured_content["handoffs"]) == 12
    assert len(client_model.requests) == 14
