"""Adaptive mode: the supervisor model delegates through `handoff_to_<specialist>` tools turn by turn.

Handoffs emitted in one turn run concurrently; their results come back as tool results and the
supervisor re-plans from them until it calls `finalize`. Bad tool calls (unknown specialists,
malformed arguments) go back to it as error results, never crash the run.
"""

from __future__ import annotations

import functools

from pydantic import ValidationError

from mcp_team.handoffs.executor import FINALIZE_TOOL, RunContext, dispatch
from mcp_team.handoffs.prompts import SUPERVISOR_INSTRUCTIONS, describe_team
from mcp_team.handoffs.schema import Handoff, HandoffArgs, HandoffRecord, validation_problems
from mcp_team.llm import ContentBlock, Message, ModelError, ModelRequest, ToolDefinition, ToolResultBlock, ToolUseBlock
from mcp_team.specialists import Specialist

HANDOFF_PREFIX = "handoff_to_"


_HANDOFF_SCHEMA = {k: v for k, v in HandoffArgs.model_json_schema().items() if k != "title"}


@functools.lru_cache(maxsize=1024)
def _handoff_tool(name: str, description: str) -> ToolDefinition:
    return ToolDefinition(
        name=f"{HANDOFF_PREFIX}{name}",
        description=f"Hand a task to the {name}: {description} It sees only the task, context and "
        f"expected_output you give it.",
        input_schema=_HANDOFF_SCHEMA,
    )


def handoff_tool(specialist: Specialist) -> ToolDefinition:
    """The `handoff_to_<name>` tool; cached, since every run offers it again."""
    return _handoff_tool(specialist.name, specialist.description)


async def run_adaptive(ctx: RunContext) -> str | None:
    """Drive the supervisor until it finalizes; None when it stopped without an answer."""
    system = SUPERVISOR_INSTRUCTIONS.format(team=describe_team(ctx.team.values()))
    tools = [*(handoff_tool(s) for s in ctx.team.values()), FINALIZE_TOOL]
    messages = [Message(role="user", content=ctx.request)]
    for _turn in range(ctx.settings.max_supervisor_turns):
        if ctx.stopped_by or ctx.budget.exhausted:
            ctx.stopped_by = ctx.stopped_by or ctx.budget.exhausted
            return None
        request = ModelRequest(system=system, messages=messages, tools=tools, phase="act")
        try:
            response = await ctx.supervisor_call(request)
        except ModelError as exc:
            ctx.fail(exc.kind, "supervisor", f"the supervisor's model call failed: {exc.message}")
            if exc.kind == "budget_exhausted":
                ctx.stopped_by = ctx.stopped_by or ctx.budget.exhausted
            return None
        uses = response.tool_uses
        if not uses:
            if response.text.strip():
                return response.text
            ctx.fail("empty_answer", "supervisor", "the supervisor's model returned neither an answer nor a handoff")
            return None
        handoff_uses = [u for u in uses if u.name != "finalize"]
        finalize = next((u for u in uses if u.name == "finalize"), None)
        if finalize is not None and not handoff_uses:
            answer = finalize.input.get("answer")
            if isinstance(answer, str) and answer.strip():
                return answer
        messages.append(Message(role="assistant", content=list(response.content)))
        messages.append(Message(role="user", content=await _run_turn(ctx, uses)))
    ctx.stopped_by = ctx.stopped_by or (
        f"the supervisor used all {ctx.settings.max_supervisor_turns} of its turns without finalizing"
    )
    return None


async def _run_turn(ctx: RunContext, uses: list[ToolUseBlock]) -> list[ContentBlock]:
    """Answer every tool call of one supervisor turn; the valid handoffs run concurrently."""
    answers: dict[str, ToolResultBlock] = {}
    handoffs: list[Handoff] = []
    for use in uses:
        if use.name == "finalize":
            has_handoffs = len(uses) > 1
            error = (
                "not finalized: handoffs in the same turn are still running; call finalize again once you have "
                "their results"
                if has_handoffs
                else "finalize needs a non-empty 'answer' string"
            )
            answers[use.id] = ToolResultBlock(tool_use_id=use.id, content=error, is_error=True)
            continue
        target = use.name.removeprefix(HANDOFF_PREFIX)
        if not use.name.startswith(HANDOFF_PREFIX) or target not in ctx.team:
            reason = f"there is no specialist '{target}' (tool {use.name}). Available: {', '.join(ctx.team)}."
            ctx.fail("unknown_specialist", target, reason, str(use.input.get("task", "")), recovered=True)
            answers[use.id] = ToolResultBlock(tool_use_id=use.id, content=reason, is_error=True)
            continue
        try:
            args = HandoffArgs.model_validate(use.input)
        except ValidationError as exc:
            problems = "; ".join(validation_problems(exc))
            reason = f"malformed handoff to {target}: {problems}. Expected {{task, context?, expected_output?}}."
            ctx.fail("malformed_handoff", target, reason, recovered=True)
            answers[use.id] = ToolResultBlock(tool_use_id=use.id, content=reason, is_error=True)
            continue
        handoffs.append(
            Handoff(id=ctx.next_id(), run_id=ctx.run_id, target=target, call_id=use.id, **args.model_dump())
        )
    for handoff, record in zip(handoffs, await dispatch(ctx, handoffs), strict=True):
        answers[handoff.call_id] = _tool_result(ctx, handoff.call_id, record)
    return [answers[u.id] for u in uses]


def _tool_result(ctx: RunContext, call_id: str, record: HandoffRecord) -> ToolResultBlock:
    if record.status == "completed":
        text = record.output
        if record.verdict is not None and record.verdict.verdict == "REVISE":
            left = max(ctx.settings.max_revisions - ctx.revisions, 0)
            text += f"\n\n[{left} revision(s) left in this run]"
        return ToolResultBlock(tool_use_id=call_id, content=text)
    if record.status == "refused" and record.error_type == "duplicate_handoff":
        return ToolResultBlock(tool_use_id=call_id, content=f"{record.error}\n\n{record.output}", is_error=True)
    attempts = f" after {record.attempt} attempt(s)" if record.status == "failed" else ""
    return ToolResultBlock(
        tool_use_id=call_id,
        is_error=True,
        content=f"{record.target} {record.status}{attempts} ({record.error_type}): {record.error}",
    )
