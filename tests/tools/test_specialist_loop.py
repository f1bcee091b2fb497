"""One specialist on one task (`run_specialist`): tool round trips, tool isolation, every failure path, its spans."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mcp_team.errors import BudgetExhausted
from mcp_team.llm import (
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    ModelSet,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from mcp_team.llm.call import SPECIALIST, SUPERVISOR, CallNeed, Granted
from mcp_team.llm.scripted import ScriptedModel, text, tool_calls
from mcp_team.specialists import Specialist, SpecialistResult, Tool, ToolFailed, handoff_message, run_specialist
from mcp_team.specialists import loop as loop_module
from mcp_team.specialists.calculator import CALCULATE
from mcp_team.specialists.verdict import parse_verdict
from mcp_team.telemetry import attributes as A
from support import HANG_GUARD

TASK = "Compute 12*(3+4)/2 for the report."


def specialist(name: str = "analyst", tools: tuple[Tool, ...] = (CALCULATE,), **fields: Any) -> Specialist:
    return Specialist(
        name=name, description=f"The {name}.", system_prompt=f"Do the {name}'s work carefully.", tools=tools, **fields
    )


def make_tool(name: str, run: Any) -> Tool:
    return Tool(name=name, description=f"The {name} tool.", input_schema={"type": "object"}, run=run)


async def run(spec: Specialist, *steps: Any, task: str = TASK, **kwargs: Any) -> tuple[SpecialistResult, ScriptedModel]:
    model = ScriptedModel(list(steps))
    result = await run_specialist(spec, task, ModelSet.single(model), **kwargs)
    return result, model


def tool_results(request: ModelRequest) -> list[ToolResultBlock]:
    last = request.messages[-1]
    assert last.role == "user"
    return [b for b in last.blocks if isinstance(b, ToolResultBlock)]


class HangingModel:
    name = "hanging"
    provider = "scripted"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


class CallBudget:
    """A Meter allowing `calls` model calls."""

    def __init__(self, calls: int) -> None:
        self.left = calls
        self.charged: list[Usage] = []

    async def before_call(self, need: CallNeed) -> Granted:
        if self.left == 0:
            raise BudgetExhausted("the run's model-call budget is used up")
        self.left -= 1
        return Granted(need.max_tokens)

    def after_call(self, usage: Usage) -> None:
        self.charged.append(usage)

    def used_fallback(self, note: str) -> None:
        raise AssertionError(f"no fallback is configured: {note}")

    async def waiting(self, limit: str, seconds: float) -> None:
        raise AssertionError(f"no rate limit is configured: {limit}")

    def note(self, topic: str, text: str) -> None:
        raise AssertionError(f"nothing to note: {text}")


pytestmark = pytest.mark.anyio


# --- the happy path ---------------------------------------------------------------------------------------------


async def test_tool_round_trip(spans) -> None:
    result, model = await run(
        specialist(),
        tool_calls(("calculate", {"expression": "12*(3+4)/2"})),
        text("The result is 42.", input_tokens=30, output_tokens=7),
    )

    assert (result.status, result.output, result.turns) == ("completed", "The result is 42.", 2)
    assert (result.error, result.error_type, result.verdict) == (None, None, None)
    assert result.usage == Usage(input_tokens=40, output_tokens=12, cost_usd=None)
    assert len(model.requests) == 2
    second = model.requests[1]
    assert second.messages[-2].role == "assistant"
    assert second.messages[-2].blocks == [
        ToolUseBlock(id="call_0", name="calculate", input={"expression": "12*(3+4)/2"})
    ]
    assert second.messages[-1] == Message(
        role="user", content=[ToolResultBlock(tool_use_id="call_0", content="12*(3+4)/2 = 42")]
    )
    assert second.messages[0] == model.requests[0].messages[0]  # the history is kept, in order


async def test_span_tree(spans) -> None:
    await run(specialist(), tool_calls(("calculate", {"expression": "2+2"}), prefix="toolu"), text("4"))

    agent = spans.one("invoke_agent analyst")
    assert spans.parent(agent) is None
    assert [s.name for s in spans.children(agent)] == ["chat scripted", "execute_tool calculate", "chat scripted"]
    assert spans.attr(agent, A.OPERATION_NAME) == "invoke_agent"
    assert spans.attr(agent, A.AGENT_NAME) == "analyst"
    assert spans.attr(agent, A.AGENT_DESCRIPTION) == "The analyst."
    assert spans.attr(agent, A.PROVIDER_NAME) == "scripted"
    assert spans.attr(agent, A.AGENT_TURNS) == 2
    assert spans.attr(agent, A.USAGE_INPUT_TOKENS) == 20
    assert spans.attr(agent, A.USAGE_OUTPUT_TOKENS) == 10
    tool = spans.one("execute_tool calculate")
    assert spans.attr(tool, A.TOOL_CALL_ID) == "toolu_0"
    assert spans.attr(tool, A.TOOL_NAME) == "calculate"
    assert spans.attr(tool, A.AGENT_NAME) == "analyst"
    assert spans.attr(tool, A.OPERATION_NAME) == "execute_tool"
    chat = spans.children(agent)[0]
    assert spans.attr(chat, A.PHASE) == "specialist"
    assert spans.attr(chat, A.REQUEST_MODEL) == "scripted"
    assert all(spans.attr(s, A.ERROR_TYPE) is None for s in spans.all)
    assert all(s.status.status_code.name != "ERROR" for s in spans.all)


async def test_specialist_sees_only_its_handoff() -> None:
    spec = specialist()
    result, model = await run(
        spec,
        text("Done."),
        task="Estimate the cost.",
        context="Prices: 3 units at 4 EUR.",
        expected_output="One number in EUR.",
    )

    assert result.status == "completed"
    (first,) = model.requests[:1]
    assert first.system == spec.instructions
    assert first.system.startswith("You are the analyst specialist")
    assert "Do the analyst's work carefully." in first.system
    assert len(first.messages) == 1
    (message,) = first.messages
    assert message.role == "user"
    assert message.content == handoff_message("Estimate the cost.", "Prices: 3 units at 4 EUR.", "One number in EUR.")
    assert message.content == (
        "Task:\nEstimate the cost.\n\nContext from the supervisor:\nPrices: 3 units at 4 EUR.\n\n"
        "Expected output:\nOne number in EUR."
    )
    assert first.tools == [CALCULATE.definition]
    assert first.phase == "specialist"


async def test_handoff_without_context_has_only_the_task() -> None:
    _, model = await run(specialist(tools=()), text("Done."), task="Say hi.")
    (message,) = model.requests[0].messages
    assert message.content == "Task:\nSay hi."
    assert model.requests[0].tools == []


async def test_specialist_uses_the_model_of_its_role() -> None:
    supervisor, worker = ScriptedModel([], name="boss"), ScriptedModel([text("from the worker")], name="worker")
    models = ModelSet({SUPERVISOR: supervisor, SPECIALIST: worker})

    result = await run_specialist(specialist(), TASK, models)
    assert result.output == "from the worker"
    assert supervisor.requests == []

    supervisor_role = ScriptedModel([text("from the boss")])
    models = ModelSet({SUPERVISOR: supervisor_role, SPECIALIST: ScriptedModel([])})
    result = await run_specialist(specialist(model_role=SUPERVISOR), TASK, models)
    assert result.output == "from the boss"


# --- tools ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ((), "unknown tool 'calculate'; your tools are: none"),
        (
            (make_tool("lookup", None), make_tool("search", None)),
            "unknown tool 'calculate'; your tools are: lookup, search",
        ),
    ],
)
async def test_a_tool_the_specialist_does_not_own_is_an_error_result(spans, tools, message) -> None:
    result, model = await run(
        specialist("writer", tools=tools),
        tool_calls(("calculate", {"expression": "2+2"})),
        text("Wrote it without the calculator."),
    )

    assert (result.status, result.turns) == ("completed", 2)
    assert tool_results(model.requests[1]) == [ToolResultBlock(tool_use_id="call_0", content=message, is_error=True)]
    tool = spans.one("execute_tool calculate")
    assert spans.attr(tool, A.ERROR_TYPE) == "unknown_tool"
    assert tool.status.status_code.name == "ERROR"
    assert spans.parent(tool) == spans.one("invoke_agent writer")
    assert spans.attr(spans.one("invoke_agent writer"), A.ERROR_TYPE) is None


async def test_a_crashing_tool_becomes_an_error_result(spans) -> None:
    async def explode(args: dict[str, Any]) -> str:
        raise RuntimeError(f"the disk is on fire ({args['where']})")

    result, model = await run(
        specialist(tools=(make_tool("explode", explode),)),
        tool_calls(("explode", {"where": "rack 3"})),
        text("The tool broke; here is what I know."),
    )

    assert result.status == "completed"
    assert tool_results(model.requests[1]) == [
        ToolResultBlock(
            tool_use_id="call_0", content="explode failed: RuntimeError: the disk is on fire (rack 3)", is_error=True
        )
    ]
    tool = spans.one("execute_tool explode")
    assert spans.attr(tool, A.ERROR_TYPE) == "RuntimeError"
    assert tool.status.description == "explode failed: RuntimeError: the disk is on fire (rack 3)"


async def test_a_refusal_becomes_an_error_result(spans) -> None:
    result, model = await run(
        specialist(),
        tool_calls(("calculate", {"expression": "1/0"}), prefix="a"),
        tool_calls(("calculate", {"expression": "__import__('os')"}), prefix="b"),
        text("Cannot divide by zero."),
    )

    assert (result.status, result.turns) == ("completed", 3)
    assert tool_results(model.requests[1]) == [
        ToolResultBlock(tool_use_id="a_0", content="division by zero", is_error=True)
    ]
    (refused,) = tool_results(model.requests[2])
    assert refused.is_error and refused.tool_use_id == "b_0"
    assert refused.content.startswith("'__import__('os')' is not allowed")
    tools = spans.named("execute_tool calculate")
    assert [spans.attr(s, A.ERROR_TYPE) for s in tools] == ["tool_refused", "tool_refused"]
    assert [spans.attr(s, A.TOOL_CALL_ID) for s in tools] == ["a_0", "b_0"]
    assert tools[0].status.description == "division by zero"


async def test_a_custom_tool_refusal_goes_back_verbatim(spans) -> None:
    async def lookup(args: dict[str, Any]) -> str:
        raise ToolFailed(f"no customer {args['id']}; ids look like C-123")

    _, model = await run(
        specialist(tools=(make_tool("lookup", lookup),)), tool_calls(("lookup", {"id": 42})), text("Not found.")
    )
    assert tool_results(model.requests[1]) == [
        ToolResultBlock(tool_use_id="call_0", content="no customer 42; ids look like C-123", is_error=True)
    ]
    assert spans.attr(spans.one("execute_tool lookup"), A.ERROR_TYPE) == "tool_refused"


async def test_a_bad_tool_input_becomes_an_error_result() -> None:
    _, model = await run(specialist(), tool_calls(("calculate", {"expr": "2+2"})), text("ok"))
    (result,) = tool_results(model.requests[1])
    assert result.is_error and "'expression' must be a string" in result.content


async def test_a_slow_tool_times_out(spans, monkeypatch) -> None:
    monkeypatch.setattr(loop_module, "TOOL_TIMEOUT", 0.05)

    async def slow(args: dict[str, Any]) -> str:
        await anyio.sleep_forever()
        return "never"

    with anyio.fail_after(HANG_GUARD):
        result, model = await run(
            specialist(tools=(make_tool("slow", slow),)), tool_calls(("slow", {})), text("Gave up waiting.")
        )

    assert result.status == "completed"
    assert tool_results(model.requests[1]) == [
        ToolResultBlock(tool_use_id="call_0", content="slow took longer than 0.05 s", is_error=True)
    ]
    assert spans.attr(spans.one("execute_tool slow"), A.ERROR_TYPE) == "timeout"


async def test_parallel_tool_calls_run_concurrently_and_results_keep_call_order(spans) -> None:
    second_ran = anyio.Event()

    async def first(args: dict[str, Any]) -> str:
        with anyio.fail_after(HANG_GUARD):  # only finishes if `second` runs while this waits
            await second_ran.wait()
        return "first done"

    async def second(args: dict[str, Any]) -> str:
        second_ran.set()
        return "second done"

    result, model = await run(
        specialist(tools=(make_tool("first", first), make_tool("second", second))),
        tool_calls(("first", {}), ("second", {}), ("calculate", {"expression": "1+1"})),
        text("All done."),
    )

    assert result.status == "completed"
    assert tool_results(model.requests[1]) == [
        ToolResultBlock(tool_use_id="call_0", content="first done"),
        ToolResultBlock(tool_use_id="call_1", content="second done"),
        ToolResultBlock(
            tool_use_id="call_2", content="unknown tool 'calculate'; your tools are: first, second", is_error=True
        ),
    ]
    agent = spans.one("invoke_agent analyst")
    tool_spans = [s for s in spans.children(agent) if s.name.startswith("execute_tool")]
    assert sorted(s.name for s in tool_spans) == [
        "execute_tool calculate",
        "execute_tool first",
        "execute_tool second",
    ]


# --- failures ---------------------------------------------------------------------------------------------------


async def test_max_turns_exhausted(spans) -> None:
    result, model = await run(
        specialist(max_turns=3),
        tool_calls(("calculate", {"expression": "1+1"}), prefix="t1"),
        tool_calls(("calculate", {"expression": "1+2"}), prefix="t2"),
        tool_calls(("calculate", {"expression": "1+3"}), prefix="t3"),
    )

    assert (result.status, result.error_type, result.turns) == ("failed", "max_turns", 3)
    assert result.error == "analyst stopped after 3 turns without a final answer (it kept calling: calculate)"
    assert result.usage == Usage(input_tokens=30, output_tokens=15, cost_usd=None)
    assert len(model.requests) == 3
    # No turn is left to read the last tool results in, so the last call's tools are not run.
    assert [spans.attr(s, A.TOOL_CALL_ID) for s in spans.named("execute_tool calculate")] == ["t1_0", "t2_0"]
    agent = spans.one("invoke_agent analyst")
    assert spans.attr(agent, A.ERROR_TYPE) == "max_turns"
    assert agent.status.status_code.name == "ERROR"
    assert spans.attr(agent, A.AGENT_TURNS) == 3


async def test_one_turn_with_a_tool_call_is_max_turns() -> None:
    result, _ = await run(specialist(max_turns=1), tool_calls(("calculate", {"expression": "1+1"})))
    assert (result.status, result.error_type, result.turns) == ("failed", "max_turns", 1)


async def test_token_budget_exhausted(spans) -> None:
    result, model = await run(
        specialist(max_tokens=25),
        tool_calls(("calculate", {"expression": "1+1"}), prefix="t1"),  # 15 tokens: under budget
        tool_calls(("calculate", {"expression": "1+2"}), prefix="t2"),  # 30 tokens: over
    )

    assert (result.status, result.error_type, result.turns) == ("failed", "budget_exhausted", 2)
    assert result.error == "analyst used 30 tokens, its budget is 25, before reaching an answer"
    assert result.usage.total_tokens == 30
    assert len(model.requests) == 2
    assert [spans.attr(s, A.TOOL_CALL_ID) for s in spans.named("execute_tool calculate")] == ["t1_0"]
    assert spans.attr(spans.one("invoke_agent analyst"), A.ERROR_TYPE) == "budget_exhausted"


async def test_an_answer_is_kept_even_when_it_crosses_the_budget() -> None:
    result, _ = await run(specialist(max_tokens=25), tool_calls(("calculate", {"expression": "1+1"})), text("2"))
    assert (result.status, result.output, result.usage.total_tokens) == ("completed", "2", 30)


async def test_meter_refusal_fails_the_specialist() -> None:
    meter = CallBudget(calls=1)
    result, model = await run(specialist(), tool_calls(("calculate", {"expression": "1+1"})), text("2"), meter=meter)

    assert (result.status, result.error_type, result.turns) == ("failed", "budget_exhausted", 2)
    assert result.error == "the run's model-call budget is used up"
    assert meter.charged == [Usage(input_tokens=10, output_tokens=5, cost_usd=None)]  # scripted: no price
    assert len(model.requests) == 1


async def test_model_error_fails_with_its_kind_and_message(spans) -> None:
    result, _ = await run(
        specialist(),
        ModelResponse(
            content=[TextBlock(text="Let me compute that."), ToolUseBlock(id="u1", name="calculate", input={})],
            stop_reason="tool_use",
            model="scripted",
            usage=Usage(input_tokens=10, output_tokens=5),
        ),
        ModelError("rate_limited", "HTTP 429: slow down", status=429),
    )

    assert (result.status, result.error_type, result.error, result.turns) == (
        "failed",
        "rate_limited",
        "HTTP 429: slow down",
        2,
    )
    assert result.output == "Let me compute that."  # the last thing it said is kept
    assert result.usage == Usage(input_tokens=10, output_tokens=5, cost_usd=None)
    agent = spans.one("invoke_agent analyst")
    assert spans.attr(agent, A.ERROR_TYPE) == "rate_limited"
    assert agent.status.description == "HTTP 429: slow down"
    failed_chat = spans.children(agent)[-1]
    assert failed_chat.name == "chat scripted"
    assert spans.attr(failed_chat, A.ERROR_TYPE) == "rate_limited"


async def test_call_timeout_fails_with_timeout() -> None:
    with anyio.fail_after(HANG_GUARD):
        result = await run_specialist(specialist(), TASK, ModelSet.single(HangingModel()), call_timeout=0.05)
    assert (result.status, result.error_type, result.turns) == ("failed", "timeout", 1)
    assert result.error is not None and result.error.startswith("the hanging call took longer than 0.05 s; ")
    assert "MCP_TEAM_CALL_TIMEOUT" in result.error and "--call-timeout" in result.error


@pytest.mark.parametrize(
    "response",
    [text(""), text("  \n\t"), ModelResponse(content=[], model="scripted")],
    ids=["empty", "whitespace", "no-content"],
)
async def test_an_empty_answer_is_asked_for_once_more_then_fails(spans, response: ModelResponse) -> None:
    result, model = await run(specialist(), response, response)
    assert (result.status, result.error_type, result.turns) == ("failed", "empty_answer", 2)
    assert result.error is not None and result.error.startswith("analyst gave no answer: the reply was empty")
    told = model.requests[1].messages[-1].content
    assert isinstance(told, str) and told.startswith("Your last reply is not an answer: the reply was empty")
    assert spans.attr(spans.one("invoke_agent analyst"), A.ERROR_TYPE) == "empty_answer"


async def test_an_empty_answer_then_a_real_one_completes() -> None:
    result, _ = await run(specialist(), text(""), text("42"))
    assert (result.status, result.output, result.turns) == ("completed", "42", 2)


# --- verdicts ---------------------------------------------------------------------------------------------------

REVIEW = "The draft is fine.\nVERDICT: REVISE\n- state the total up front\n- cite the price source"


async def test_verdict_is_parsed_for_verdict_specialists() -> None:
    result, _ = await run(specialist("reviewer", tools=(), returns_verdict=True), text(REVIEW))
    assert result.verdict is not None
    assert result.verdict.verdict == "REVISE"
    assert result.verdict.reasons == ["state the total up front", "cite the price source"]
    assert result.output == REVIEW


async def test_verdict_is_not_parsed_for_other_specialists() -> None:
    result, _ = await run(specialist("writer", tools=()), text(REVIEW))
    assert result.status == "completed"
    assert result.verdict is None


async def test_verdict_specialist_without_a_verdict_still_completes() -> None:
    result, _ = await run(specialist("reviewer", tools=(), returns_verdict=True), text("Looks fine to me."))
    assert (result.status, result.verdict) == ("completed", None)


def test_parse_verdict_pass_without_reasons() -> None:
    verdict = parse_verdict("All good.\nVERDICT: PASS")
    assert verdict is not None
    assert (verdict.verdict, verdict.reasons) == ("PASS", [])


def test_parse_verdict_reasons_are_bullet_lines_after_the_verdict() -> None:
    verdict = parse_verdict(
        "- not a reason, it comes before\n  verdict: revise  \n- first\n  * second\nplain line\n-third"
    )
    assert verdict is not None
    assert verdict.verdict == "REVISE"  # case-insensitive, normalised
    assert verdict.reasons == ["first", "second", "third"]


def test_parse_verdict_last_verdict_wins() -> None:
    verdict = parse_verdict("VERDICT: REVISE\n- old reason\n\nAfter the fix:\nVERDICT: PASS\n- fixed")
    assert verdict is not None
    assert (verdict.verdict, verdict.reasons) == ("PASS", ["fixed"])


@pytest.mark.parametrize(
    "text_",
    ["", "Looks good to me.", "VERDICT: MAYBE", "VERDICT: PASSED", "The VERDICT: PASS is inline", "VERDICT PASS"],
)
def test_parse_verdict_none(text_: str) -> None:
    assert parse_verdict(text_) is None


async def test_a_tool_call_whose_arguments_could_not_be_read_is_answered_with_the_error_not_run() -> None:
    ran: list[dict[str, Any]] = []

    async def record(args: dict[str, Any]) -> str:
        ran.append(args)
        return "ran"

    broken = ModelResponse(
        content=[ToolUseBlock(id="c1", name="lookup", input_error="the arguments are not valid JSON: {'q': 1")],
        stop_reason="tool_use",
        model="scripted",
    )
    result, model = await run(specialist(tools=(make_tool("lookup", record),)), broken, text("Fixed it."))
    assert result.status == "completed" and not ran
    [answer] = tool_results(model.requests[1])
    assert answer.is_error and "not run" in answer.content and "not valid JSON" in answer.content


async def test_a_tool_call_written_as_text_goes_back_to_the_model_and_is_not_the_answer() -> None:
    written = '```json\n{"name": "calculate", "arguments": {"expression": "2+2"}}\n```'
    result, model = await run(
        specialist(), text(written), tool_calls(("calculate", {"expression": "2+2"})), text("The result is 4.")
    )
    assert (result.status, result.output, result.turns) == ("completed", "The result is 4.", 3)
    feedback = model.requests[1].messages[-1]
    assert feedback.role == "user" and "wrote a tool call as text (calculate)" in str(feedback.content)


async def test_an_answer_holding_json_is_still_an_answer() -> None:
    answer = '```json\n{"result": 4}\n```'
    result, _ = await run(specialist(), text(answer))
    assert (result.status, result.output) == ("completed", answer)
