"""The specialist agent loop: call the model, run the tools it asks for, repeat until it answers.

The loop never raises for a failed model call or tool: it returns a `SpecialistResult` with
status `failed` and the reason. Cancellation propagates (the caller records it).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, Protocol, TypeVar

import anyio
from pydantic import BaseModel, Field

from mcp_team.errors import BudgetExhausted
from mcp_team.llm import (
    Message,
    Meter,
    ModelError,
    ModelRequest,
    ModelSet,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    chat,
)
from mcp_team.llm.answers import feedback, not_an_answer
from mcp_team.llm.text_calls import read_calls, reads_text_calls
from mcp_team.llm.types import NO_USAGE, built, defaults_of, no_usage
from mcp_team.specialists.definition import Specialist
from mcp_team.specialists.tools import MAX_RESULT_CHARS, ToolFailed, capped
from mcp_team.specialists.verdict import Verdict, parse_verdict
from mcp_team.telemetry import spans
from mcp_team.telemetry.attributes import AGENT_TURNS, TOOL_CALL_ARGUMENTS, TOOL_CALL_RESULT

TOOL_TIMEOUT = 60.0

T = TypeVar("T")


class Gather(Protocol):
    """Awaits calls concurrently and returns their results in the order given.

    The loop uses it for the tool calls of one turn, each of which calls at most one tool. A run
    passes its runtime's, so a durable runtime can number those calls before any of them starts.
    """

    def __call__(self, calls: Sequence[Callable[[], Awaitable[T]]], /) -> Awaitable[list[T]]: ...


async def gather_concurrently(calls: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """The plain `Gather`: one task per call in a task group (none for a single call)."""
    if len(calls) == 1:
        return [await calls[0]()]
    results: list[T | None] = [None] * len(calls)

    async def run_one(i: int) -> None:
        results[i] = await calls[i]()

    async with anyio.create_task_group() as tg:
        for i in range(len(calls)):
            tg.start_soon(run_one, i)
    return results  # type: ignore[return-value]  # every slot was filled: the task group waited for all


class SpecialistResult(BaseModel, defer_build=True):
    specialist: str
    status: Literal["completed", "failed"]
    output: str = ""
    error: str | None = None
    error_type: str | None = Field(default=None, description="Low-cardinality failure kind, e.g. rate_limited.")
    turns: int = 0
    usage: Usage = Field(default_factory=no_usage)
    verdict: Verdict | None = None


# Built with `built`, not validated: a turn's request and a completed result hold only what the loop took from
# validated models (the specialist, the model's response, the tools' results), and they are made on every handoff.
_REQUEST_DEFAULTS = defaults_of(ModelRequest)
_RESULT_DEFAULTS = defaults_of(SpecialistResult)


def handoff_message(task: str, context: str = "", expected_output: str = "") -> str:
    """What a specialist sees as its one user message: the task and only the context it was given."""
    parts = [f"Task:\n{task}"]
    if context:
        parts.append(f"Context from the supervisor:\n{context}")
    if expected_output:
        parts.append(f"Expected output:\n{expected_output}")
    return "\n\n".join(parts)


async def run_specialist(
    specialist: Specialist,
    task: str,
    models: ModelSet,
    *,
    context: str = "",
    expected_output: str = "",
    meter: Meter | None = None,
    call_timeout: float | None = None,
    agent_id: str = "",
    gather: Gather = gather_concurrently,
) -> SpecialistResult:
    """Run `specialist` on one task, traced as `invoke_agent {name}`. `gather` runs a turn's tool calls."""
    model = models.for_member(specialist.name, specialist.model_role)
    with spans.agent_span(
        specialist.name, description=specialist.description, agent_id=agent_id, provider=model.provider
    ) as span:
        result = await _loop(specialist, task, context, expected_output, models, meter, call_timeout, gather)
        u = result.usage
        spans.record_usage(
            span,
            u.input_tokens,
            u.output_tokens,
            u.cache_read_input_tokens,
            u.cache_creation_input_tokens,
            {AGENT_TURNS: result.turns},
        )
        if result.status == "failed":
            spans.mark_error(span, result.error_type or "failed", message=result.error or "")
        return result


async def _loop(
    specialist: Specialist,
    task: str,
    context: str,
    expected_output: str,
    models: ModelSet,
    meter: Meter | None,
    call_timeout: float | None,
    gather: Gather,
) -> SpecialistResult:
    messages = [Message(role="user", content=handoff_message(task, context, expected_output))]
    instructions = specialist.instructions  # a property that formats the prompt: once a handoff
    tools = [t.definition for t in specialist.tools]
    read_text = reads_text_calls(models.for_member(specialist.name, specialist.model_role))
    usage = NO_USAGE
    last_text = ""
    asked_again = False  # a reply that was no answer went back once; the next one is final

    def failed(error_type: str, error: str, turns: int) -> SpecialistResult:
        return SpecialistResult(
            specialist=specialist.name,
            status="failed",
            output=last_text,
            error=error,
            error_type=error_type,
            turns=turns,
            usage=usage,
        )

    for turn in range(1, specialist.max_turns + 1):
        # The lists are copied, as validating them would: a later turn's messages must not change a request sent.
        request = built(
            ModelRequest,
            _REQUEST_DEFAULTS,
            {"system": instructions, "messages": list(messages), "tools": list(tools), "member": specialist.name},
        )
        try:
            response = await chat(models, specialist.model_role, request, timeout=call_timeout, meter=meter)
        except ModelError as exc:
            return failed(exc.kind, exc.message, turn)
        except BudgetExhausted as exc:
            return failed("budget_exhausted", exc.budget, turn)
        usage = usage + response.usage
        text = response.text  # a property that joins the text blocks: once a turn
        last_text = text or last_text
        uses = response.tool_uses
        if not uses and turn < specialist.max_turns and (reading := read_calls(text, tools)).calls:
            # Calls written as text that did not run (`llm.text_calls`: not read for this model, or not runnable)
            # are no answer: back to the model, with what was wrong and a turn left to make them properly.
            messages.append(Message(role="assistant", content=text))
            messages.append(Message(role="user", content=feedback(reading, read_text)))
            continue
        if not uses:
            if response.stop_reason == "refusal":
                return failed("model_refused", _declined(text), turn)
            if response.stop_reason == "max_tokens":
                return failed("truncated", TRUNCATED.format(name=specialist.name), turn)
            if (no := not_an_answer(text, task, tools)) is not None:
                if asked_again or turn == specialist.max_turns:
                    return failed(no.kind, f"{specialist.name} gave no answer: {no.why}", turn)
                asked_again = True  # once more, told why; a model that does it again has no answer to give
                messages.append(Message(role="assistant", content=text if text.strip() else "(an empty reply)"))
                messages.append(Message(role="user", content=no.feedback))
                continue
            verdict = parse_verdict(text) if specialist.returns_verdict else None
            return built(
                SpecialistResult,
                _RESULT_DEFAULTS,
                {
                    "specialist": specialist.name,
                    "status": "completed",
                    "output": text,
                    "turns": turn,
                    "usage": usage,
                    "verdict": verdict,
                },
            )
        if specialist.max_tokens is not None and usage.total_tokens >= specialist.max_tokens:
            return failed(
                "budget_exhausted",
                f"{specialist.name} used {usage.total_tokens} tokens, its budget is "
                f"{specialist.max_tokens}, before reaching an answer",
                turn,
            )
        messages.append(Message(role="assistant", content=list(response.content)))
        if turn == specialist.max_turns:
            break  # no turn is left to read tool results in: don't run them
        results = await gather([functools.partial(_run_tool, specialist, use) for use in uses])
        messages.append(Message(role="user", content=[*results]))

    called = sorted({b.name for m in messages for b in m.blocks if isinstance(b, ToolUseBlock)})
    return failed(
        "max_turns",
        f"{specialist.name} stopped after {specialist.max_turns} turns without a final "
        f"answer (it kept calling: {', '.join(called)})",
        specialist.max_turns,
    )


TRUNCATED = (
    "the answer was cut off at the output token limit; ask for less, or raise the limit: sampling = "
    "{{ max_tokens = N }} in {name}'s entry of the team file (specialist_sampling under [models], or "
    """MCP_TEAM_SPECIALIST_SAMPLING='{{"max_tokens": N}}', for every specialist)"""
)


def _declined(text: str) -> str:
    """Why a specialist failed whose model refused: in its own words, or (a content filter's stop says none) so."""
    if text.strip():
        return f"the model declined the task: {text[:300]}"
    return "the model declined the task without saying why (a provider's content filter stops an answer so)"


class _NotText(Exception):
    """A tool of the user's own is not written as a tool must be (async, returning text)."""


async def _run_tool(specialist: Specialist, use: ToolUseBlock) -> ToolResultBlock:
    with spans.tool_span(use.name, use.id, specialist.name) as span:
        spans.record_content(span, TOOL_CALL_ARGUMENTS, lambda: use.input)
        tool = specialist.tool(use.name)
        if use.input_error is not None:  # never run a call whose arguments could not be read
            error, kind = (
                f"{use.name} was not run: {use.input_error}. Call it again with a JSON object.",
                "bad_arguments",
            )
        elif tool is None:
            own = ", ".join(t.name for t in specialist.tools) or "none"
            error, kind = f"unknown tool '{use.name}'; your tools are: {own}", "unknown_tool"
        else:
            try:
                with anyio.fail_after(TOOL_TIMEOUT):
                    pending = tool.run(use.input)
                    if not inspect.isawaitable(pending):  # a plain def would block every branch while it runs
                        raise _NotText(
                            f"{use.name}'s run is not async: a Tool's run must be an `async def` returning a str"
                        )
                    output = await pending
                if not isinstance(output, str):  # a tool of the user's own: say which, and what it must return
                    raise _NotText(
                        f"{use.name} returned {type(output).__name__}, not text: a Tool's run must return a str"
                    )
                output = capped(output, tool.max_result_chars)  # the span records what the model sees
                spans.record_content(span, TOOL_CALL_RESULT, lambda: output)
                return ToolResultBlock(tool_use_id=use.id, content=output)
            except _NotText as exc:
                error, kind = str(exc), "bad_tool_result"
            except ToolFailed as exc:
                error, kind = str(exc), "tool_refused"
            except TimeoutError:
                error, kind = f"{use.name} took longer than {TOOL_TIMEOUT:g} s", "timeout"
            except Exception as exc:  # a broken tool must not crash the specialist
                error, kind = f"{use.name} failed: {type(exc).__name__}: {exc}", type(exc).__name__
        error = capped(error, tool.max_result_chars if tool else MAX_RESULT_CHARS, "error")
        spans.mark_error(span, kind, message=error)
        spans.record_content(span, TOOL_CALL_RESULT, lambda: error)
        return ToolResultBlock(tool_use_id=use.id, content=error, is_error=True)
