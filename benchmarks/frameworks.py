"""One workload, built in each framework: a supervisor hands work to workers, several at once.

The workload is a list of levels, e.g. `[32]` (one fan-out of 32) or `[2, 1, 1]` (a 3-level DAG:
two workers in parallel, then one, then one). The supervisor's model call number t asks for the
workers of level t, all in one response (parallel tool calls); after the last level it answers.
Every worker makes exactly one model call. Every model call of every framework is a fake model
that sleeps `latency` seconds and answers from a fixed script: no network, no LLM.

Each builder imports its framework when called (the child process times that import) and returns
`(run_once, calls)`: `await run_once()` runs the whole workload once; `calls` counts model calls,
so the bench can check that every framework really did `sum(levels) + len(levels) + 1` of them.
Peers run in the documented shape for "a supervisor with sub-agents":
- openai-agents: workers as tools of the supervisor agent (`Agent.as_tool`); handoffs proper hand
  the conversation over to one agent, so they cannot fan out;
- pydantic-ai: agent delegation, a supervisor tool per worker that awaits `worker.run(task)`;
- langgraph-supervisor: `create_supervisor` over `create_react_agent` workers, parallel tool
  calls on (each handoff becomes a `Send`).
mcp-team runs with tracing ON (SDK provider, batch processor, a span-counting exporter). The
peers' own tracing is off (openai-agents' default exporter would need the network).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

Levels = Sequence[int]
RunOnce = Callable[[], Awaitable[None]]

TASK = "Work on the task"
ANSWER = "All work is done."


@dataclass
class Calls:
    """Model calls made so far, by the supervisor and by workers."""

    supervisor: int = 0
    worker: int = 0

    def expected(self, levels: Levels, runs: int) -> tuple[int, int]:
        return runs * (len(levels) + 1), runs * sum(levels)


def names(levels: Levels) -> list[list[str]]:
    """Worker names per level: w0, w1, ... numbered across levels."""
    out, n = [], 0
    for size in levels:
        out.append([f"w{n + i}" for i in range(size)])
        n += size
    return out


def _turn(called: set[str | None], plan: list[list[str]]) -> int:
    """The supervisor's turn, from the workers called so far: the levels all of whose workers were."""
    return sum(1 for level in plan if all(w in called for w in level))


async def _sleep(latency: float) -> None:
    if latency:
        await asyncio.sleep(latency)


# --- mcp-team ----------------------------------------------------------------------------------------


def mcp_team(levels: Levels, latency: float) -> tuple[RunOnce, Calls]:
    import anyio
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from mcp_team import Budgets, ModelSet, RunSettings, Specialist, Team
    from mcp_team.llm.types import ModelRequest, ModelResponse, TextBlock, ToolUseBlock

    class CountingExporter(SpanExporter):
        def export(self, spans: Sequence[object]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(CountingExporter(), max_queue_size=1 << 16))
    trace.set_tracer_provider(provider)

    calls, plan = Calls(), names(levels)

    class FakeModel:
        name = "fake"
        provider = "fake"

        async def complete(self, request: ModelRequest) -> ModelResponse:
            if latency:
                await anyio.sleep(latency)
            if request.member != "supervisor":
                calls.worker += 1
                return ModelResponse(content=[TextBlock(text=f"{request.member}: done")], model="fake")
            calls.supervisor += 1
            turn = sum(1 for m in request.messages if m.role == "assistant")
            if turn < len(plan):
                uses = [
                    ToolUseBlock(id=f"c{turn}_{i}", name=f"handoff_to_{w}", input={"task": TASK})
                    for i, w in enumerate(plan[turn])
                ]
                return ModelResponse(content=uses, stop_reason="tool_use", model="fake")
            final = ToolUseBlock(id="final", name="finalize", input={"answer": ANSWER})
            return ModelResponse(content=[final], stop_reason="tool_use", model="fake")

    workers = [Specialist(name=w, description="A worker.", system_prompt="Do the work.") for lv in plan for w in lv]
    budgets = Budgets(max_handoffs=1000, max_model_calls=10_000, max_tokens=10**12, deadline_seconds=600.0)
    team = Team(ModelSet.single(FakeModel(), max_concurrency=64), workers, RunSettings(budgets=budgets))

    async def run_once() -> None:
        result = await team.run(TASK)
        if result.status != "complete":
            raise RuntimeError(f"mcp-team run ended {result.status}: {result.answer[:200]}")

    return run_once, calls


# --- openai-agents ---------------------------------------------------------------------------------


def openai_agents(levels: Levels, latency: float) -> tuple[RunOnce, Calls]:
    from agents import Agent, ModelSettings, Runner, set_tracing_disabled
    from agents import ModelResponse as AgentsResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    set_tracing_disabled(True)
    calls, plan = Calls(), names(levels)

    def message(text: str) -> ResponseOutputMessage:
        return ResponseOutputMessage(
            id="msg",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )

    class FakeModel(Model):
        def __init__(self, worker: str | None) -> None:
            self.worker = worker

        async def get_response(self, system_instructions, input, *args, **kwargs):  # type: ignore[no-untyped-def]
            await _sleep(latency)
            if self.worker is not None:
                calls.worker += 1
                return AgentsResponse(output=[message(f"{self.worker}: done")], usage=Usage(), response_id=None)
            calls.supervisor += 1
            items = input if isinstance(input, list) else []
            turn = _turn({_get(i, "name") for i in items if _get(i, "type") == "function_call"}, plan)
            if turn < len(plan):
                output = [
                    ResponseFunctionToolCall(
                        type="function_call",
                        id=f"fc{turn}_{i}",
                        call_id=f"c{turn}_{i}",
                        name=w,
                        arguments='{"input": "Work on the task"}',
                    )
                    for i, w in enumerate(plan[turn])
                ]
                return AgentsResponse(output=output, usage=Usage(), response_id=None)
            return AgentsResponse(output=[message(ANSWER)], usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    tools = [
        Agent(name=w, instructions="Do the work.", model=FakeModel(w)).as_tool(
            tool_name=w, tool_description="A worker."
        )
        for lv in plan
        for w in lv
    ]
    supervisor = Agent(
        name="supervisor",
        instructions="Delegate the work.",
        model=FakeModel(None),
        tools=tools,
        model_settings=ModelSettings(parallel_tool_calls=True),
    )

    async def run_once() -> None:
        result = await Runner.run(supervisor, TASK, max_turns=len(plan) + 2)
        if result.final_output != ANSWER:
            raise RuntimeError(f"openai-agents run ended with {result.final_output!r}")

    return run_once, calls


def _get(item: object, key: str) -> str | None:
    value = item.get(key) if isinstance(item, dict) else getattr(item, key, None)
    return value if isinstance(value, str) else None


# --- pydantic-ai -----------------------------------------------------------------------------------


def pydantic_ai(levels: Levels, latency: float) -> tuple[RunOnce, Calls]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.tools import Tool

    calls, plan = Calls(), names(levels)

    async def supervisor_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await _sleep(latency)
        calls.supervisor += 1
        called = {
            p.tool_name
            for m in messages
            if isinstance(m, ModelResponse)
            for p in m.parts
            if isinstance(p, ToolCallPart)
        }
        turn = _turn(set(called), plan)
        if turn < len(plan):
            return ModelResponse(
                parts=[ToolCallPart(w, {"task": TASK}, tool_call_id=f"c{turn}_{i}") for i, w in enumerate(plan[turn])]
            )
        return ModelResponse(parts=[TextPart(ANSWER)])

    def worker_model(name: str) -> FunctionModel:
        async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            await _sleep(latency)
            calls.worker += 1
            return ModelResponse(parts=[TextPart(f"{name}: done")])

        return FunctionModel(answer)

    def delegate(worker: Agent[None, str]) -> Tool[None]:
        async def run_worker(task: str) -> str:
            result = await worker.run(task)
            return result.output

        return Tool(run_worker, takes_ctx=False, name=worker.name or "worker", description="A worker.")

    workers = [Agent(worker_model(w), name=w, instructions="Do the work.") for lv in plan for w in lv]
    supervisor = Agent(
        FunctionModel(supervisor_model), instructions="Delegate the work.", tools=[delegate(w) for w in workers]
    )

    async def run_once() -> None:
        result = await supervisor.run(TASK)
        if result.output != ANSWER:
            raise RuntimeError(f"pydantic-ai run ended with {result.output!r}")

    return run_once, calls


# --- langgraph-supervisor --------------------------------------------------------------------------


def langgraph(levels: Levels, latency: float) -> tuple[RunOnce, Calls]:
    from typing import Any

    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langgraph.prebuilt import create_react_agent
    from langgraph_supervisor import create_supervisor

    calls, plan = Calls(), names(levels)

    class FakeChat(BaseChatModel):
        worker: str | None = None

        @property
        def _llm_type(self) -> str:
            return "fake"

        def bind_tools(self, tools: Any, **kwargs: Any) -> FakeChat:
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
            raise NotImplementedError("the bench runs async only")

        async def _agenerate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
            await _sleep(latency)
            if self.worker is not None:
                calls.worker += 1
                return ChatResult(generations=[ChatGeneration(message=AIMessage(content=f"{self.worker}: done"))])
            calls.supervisor += 1
            # The supervisor's own tool calls do not come back in the state (each handoff is a `Send`
            # carrying its own copy), so the turn is read from the workers' answers.
            called = {
                str(m.content).partition(":")[0] for m in messages if isinstance(m, AIMessage) and not m.tool_calls
            }
            turn = _turn(set(called), plan)
            if turn < len(plan):
                # Only the level's workers that have not answered: with langgraph 1.2 the first handoff's
                # `Command` ends the supervisor's tool step, so the others of one response never run and
                # the supervisor is asked again (the bench's call check then reports the extra calls).
                tool_calls = [
                    {"name": f"transfer_to_{w}", "args": {}, "id": f"c{turn}_{i}", "type": "tool_call"}
                    for i, w in enumerate(plan[turn])
                    if w not in called
                ]
                message = AIMessage(content="", tool_calls=tool_calls)
            else:
                message = AIMessage(content=ANSWER)
            return ChatResult(generations=[ChatGeneration(message=message)])

    workers = [
        create_react_agent(FakeChat(worker=w), tools=[], name=w, prompt="Do the work.") for lv in plan for w in lv
    ]
    app = create_supervisor(workers, model=FakeChat(), prompt="Delegate the work.", parallel_tool_calls=True).compile()

    async def run_once() -> None:
        state = await app.ainvoke(
            {"messages": [{"role": "user", "content": TASK}]}, {"recursion_limit": 10 * (sum(levels) + 2)}
        )
        if state["messages"][-1].content != ANSWER:
            raise RuntimeError(f"langgraph run ended with {state['messages'][-1].content!r}")

    return run_once, calls


BUILDERS: dict[str, Callable[[Levels, float], tuple[RunOnce, Calls]]] = {
    "mcp-team": mcp_team,
    "openai-agents": openai_agents,
    "pydantic-ai": pydantic_ai,
    "langgraph-supervisor": langgraph,
}
# The distribution whose version is reported for each framework.
DISTRIBUTIONS = {
    "mcp-team": "mcp-team",
    "openai-agents": "openai-agents",
    "pydantic-ai": "pydantic-ai-slim",
    "langgraph-supervisor": "langgraph-supervisor",
}
