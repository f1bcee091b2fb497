"""Composing the answer: the closing synthesis, the finalize tool, and what the answer says is missing.

Only the last attempt of a task speaks for it: a failed attempt that a retry replaced is neither
shown to the synthesizer nor listed as missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mcp_team.errors import BudgetExhausted
from mcp_team.handoffs.context import RunContext
from mcp_team.handoffs.judge import CONFLICTS_INSTRUCTIONS, RULINGS_HEADING, has_judge, note_conflicts, with_conflicts
from mcp_team.handoffs.planner import PLAN_TOOL
from mcp_team.handoffs.prompts import FINALIZE_DESCRIPTION, SYNTHESIS_INSTRUCTIONS
from mcp_team.handoffs.schema import HandoffRecord
from mcp_team.handoffs.turn import HANDOFF_PREFIX
from mcp_team.llm import (
    SUPERVISOR,
    ContentBlock,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    ToolDefinition,
    ToolResultBlock,
)
from mcp_team.llm.answers import not_an_answer

FINALIZE_TOOL = ToolDefinition(
    name="finalize",
    description=FINALIZE_DESCRIPTION,
    input_schema={"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
)


def supervisor_tools(ctx: RunContext) -> list[str]:
    """The names of the supervisor's own tools: its handoffs, finalize and submit_plan. An answer that names them
    as code is about the run, not an answer (`llm.answers.not_an_answer`)."""
    return [*(f"{HANDOFF_PREFIX}{s.name}" for s in ctx.config.workers), FINALIZE_TOOL.name, PLAN_TOOL.name]


def _superseded(records: Sequence[HandoffRecord]) -> set[str]:
    """Ids of attempts that a retry replaced: only the last attempt of a task speaks for it."""
    return {r.retry_of for r in records if r.retry_of}


def describe_results(records: Sequence[HandoffRecord]) -> str:
    """The latest outcome per task, as the synthesizer reads it."""
    superseded = _superseded(records)
    parts = []
    for r in records:
        if r.status == "refused" or r.id in superseded:
            continue
        if r.status == "completed":
            parts.append(f"### {r.target} (completed): {r.task[:200]}\n{r.output}")
        else:
            parts.append(f"### {r.target} ({r.status}): {r.task[:200]}\n{r.error or ''}")
    return "\n\n".join(parts) or "(no results)"


TRUNCATED = (
    "the supervisor's answer was cut off at its output token limit; raise the limit with "
    """MCP_TEAM_SUPERVISOR_SAMPLING='{"max_tokens": N}' (or supervisor_sampling = { max_tokens = N } under """
    "[models] in the team file), or ask for a shorter answer"
)


def note_cut_off(ctx: RunContext, stop_reason: str, what: str = "") -> None:
    """An answer of the supervisor's cut off at its output limit is kept, but recorded as a failure, so the run
    says what is missing instead of passing it off as complete."""
    if stop_reason == "max_tokens":
        ctx.fail("truncated", "supervisor", f"{what}{TRUNCATED}")


async def synthesize(ctx: RunContext, how: str = "", rulings: str = "") -> str:
    """The closing answer from the results, with the synthesis prompt; a plain merge if no call is possible.

    With a judge on the team the synthesis may report conflicts (see `judge`); `rulings` are the judge's
    verdicts on them, which this synthesis follows."""
    await ctx.emit("synthesizing", "synthesizing the answer")
    combine = f"How to combine the results:\n{how}\n\n" if how else ""
    message = f"Request:\n{ctx.config.request}\n\n{combine}Results:\n{describe_results(ctx.records)}"
    system, tool = SYNTHESIS_INSTRUCTIONS, FINALIZE_TOOL
    if rulings:
        message += f"\n\n{RULINGS_HEADING}\n{rulings}"
    elif has_judge(ctx):
        system, tool = system + CONFLICTS_INSTRUCTIONS, with_conflicts(FINALIZE_TOOL)
    messages = [Message(role="user", content=message)]
    shapes = [tool, PLAN_TOOL]  # what a synthesis's answer must not be: JSON meant for these
    for attempt in (1, 2):
        request = ModelRequest(system=system, messages=messages, tools=[tool], phase="synthesize", member=SUPERVISOR)
        try:
            response = await ctx.supervisor_call(request, final=True)
        except ModelError as exc:
            ctx.fail(exc.kind, "supervisor", f"the closing synthesis failed: {exc.message}")
            return fallback_answer(ctx.records)
        except BudgetExhausted as exc:
            ctx.fail("budget_exhausted", "supervisor", f"the closing synthesis failed: {exc.budget}")
            return fallback_answer(ctx.records)
        answer = _answer_of(response)
        if (no := not_an_answer(answer, ctx.config.request, shapes, supervisor_tools(ctx))) is None:
            if not rulings:
                note_conflicts(ctx, response)
            note_cut_off(ctx, response.stop_reason, "the closing synthesis: ")
            return answer
        if attempt == 2:  # told why once already: the run says so, and gives the finished results as they are
            ctx.fail(no.kind, "supervisor", f"the closing synthesis gave no answer, twice: {no.why}")
            ctx.note(
                "no_synthesis",
                f"The closing synthesis gave no answer ({no.why}), also after being told why; the answer is the "
                "finished results as they are.",
            )
            return fallback_answer(ctx.records)
        # Once more, told why: after its reply (a finalize call's answer goes back as that call's error result).
        finalizes = [u for u in response.tool_uses if u.name == "finalize"]
        if finalizes:
            messages.append(Message(role="assistant", content=list(response.content)))
            told: list[ContentBlock] = [
                ToolResultBlock(tool_use_id=u.id, content=no.feedback, is_error=True) for u in response.tool_uses
            ]
            messages.append(Message(role="user", content=told))
        else:
            messages.append(Message(role="assistant", content=response.text or "(an empty reply)"))
            messages.append(Message(role="user", content=no.feedback))
    raise AssertionError("unreachable: the second attempt returns")


def _answer_of(response: ModelResponse) -> str:
    """A synthesis's answer: its finalize call's, else its text."""
    for use in response.tool_uses:
        if use.name == "finalize" and isinstance(use.input.get("answer"), str):
            return str(use.input["answer"])
    return response.text


def fallback_answer(records: Iterable[HandoffRecord]) -> str:
    """The best answer without a model: the completed results, as they are."""
    done = [r for r in records if r.status == "completed"]
    if not done:
        return "No specialist finished any work, so there is no answer."
    body = "\n\n".join(f"## {r.target}: {r.task[:120]}\n{r.output}" for r in done)
    return f"The supervisor could not write a closing synthesis; here are the finished results.\n\n{body}"


def missing_section(ctx: RunContext) -> str:
    """A plain list of what the answer lacks: every unrecovered failure and any early stop."""
    lines = []
    if ctx.stop_reason:
        lines.append(f"- The run stopped early: {ctx.stop_reason}.")
    superseded = _superseded(ctx.records)
    seen: set[object] = set()
    for f in ctx.failures:
        key = f.handoff_id or (f.specialist, f.kind, f.reason)
        if f.recovered or f.handoff_id in superseded or key in seen:
            continue
        seen.add(key)
        task = short(f.task.split("\n", 1)[0]) if f.task else ""
        lines.append(f"- {f.specialist}" + (f' on "{task}"' if task else "") + f": {f.kind}: {f.reason}")
    return "Incomplete. This answer is missing:\n" + "\n".join(lines) if lines else ""


def short(text: str, width: int = 160) -> str:
    """`text` cut to `width` characters, an ellipsis last."""
    return text if len(text) <= width else text[: width - 1] + "…"
