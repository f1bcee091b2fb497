"""Adaptive mode: the supervisor model delegates through `handoff_to_<specialist>` tools turn by turn.

Each turn is one model call whose tool calls are classified before any runs (`turn.classify`);
the valid handoffs run concurrently, their results go back as tool results, and the supervisor
re-plans from them until it finalizes. Bad tool calls (unknown specialists, malformed arguments)
go back to it as error results, never crash the run; a model that keeps making the same mistake is
stopped (`Mistakes`). An answer cut off at the output limit, or a refusal, is never a complete answer.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from mcp_team.errors import BudgetExhausted
from mcp_team.handoffs.approval import REVISE_PREFIX, approve_turn
from mcp_team.handoffs.context import RunContext
from mcp_team.handoffs.execution import dispatch
from mcp_team.handoffs.judge import CONFLICTS_INSTRUCTIONS, has_judge, note_conflicts, with_conflicts
from mcp_team.handoffs.prompts import SUPERVISOR_INSTRUCTIONS, describe_team
from mcp_team.handoffs.schema import HandoffArgs, HandoffRecord
from mcp_team.handoffs.synthesis import FINALIZE_TOOL, note_cut_off, short
from mcp_team.handoffs.turn import HANDOFF_PREFIX, Continue, Final, Stop, TurnOutcome, TurnPlan, classify
from mcp_team.llm import (
    SUPERVISOR,
    ContentBlock,
    Message,
    ModelError,
    ModelRequest,
    ToolDefinition,
    ToolResultBlock,
)
from mcp_team.llm.text_calls import TEXT_TOOL_CALL_FEEDBACK, text_tool_call
from mcp_team.llm.types import built, defaults_of
from mcp_team.specialists import Specialist

_HANDOFF_SCHEMA = {k: v for k, v in HandoffArgs.model_json_schema().items() if k != "title"}

# What each kind of rejected call says about the supervisor, for the message that stops a run it keeps repeating.
_MISTAKES = {
    "unknown_specialist": "called unknown tool {name}",
    "malformed_handoff": "called {name} with arguments that could not be read",
    "finalize": "called finalize and had it refused",
}


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


async def run_adaptive(ctx: RunContext) -> Final | Stop:
    """Drive the supervisor turn by turn until it finalizes or stops."""
    instructions = SUPERVISOR_INSTRUCTIONS.format(team=describe_team(ctx.workers))
    finalize = FINALIZE_TOOL
    if has_judge(ctx):  # its finalize may report conflicts for the judge
        instructions, finalize = instructions + CONFLICTS_INSTRUCTIONS, with_conflicts(FINALIZE_TOOL)
    tools = [*(handoff_tool(s) for s in ctx.workers), finalize]
    messages = [Message(role="user", content=ctx.request)]
    mistakes = Mistakes()
    for _turn in range(ctx.settings.max_supervisor_turns):
        system = instructions + _run_notes(ctx)
        outcome = await supervisor_turn(
            ctx, ModelRequest(system=system, messages=messages, tools=tools, phase="act", member=SUPERVISOR), mistakes
        )
        if not isinstance(outcome, Continue):
            return outcome
        messages += (outcome.reply, outcome.results)
    used = f"the supervisor used all {ctx.settings.max_supervisor_turns} of its turns without finalizing"
    if mistakes.times:  # the turns ended on mistakes: the cause, not only the count
        used += f"; it {mistakes.what} on its last {mistakes.times} turn(s){mistakes.last_error}"
    return Stop(used)


@dataclass
class Mistakes:
    """The supervisor's latest mistake (a turn whose every call was rejected, or a call written as text) and
    how many turns in a row it made it. A model that cannot follow the tool schemas makes the same one again
    and again, which would use up every turn and hide the cause; so, as for identical handoffs (see
    `execution._refuse_duplicate`), the run stops once it is repeated `max_repeats` times."""

    what: str = ""  # e.g. `called unknown tool handoff_to_wizard`
    detail: str = ""  # the latest rejection's reason, if it says more than `what`
    times: int = 0

    @property
    def last_error(self) -> str:
        return f". The last error: {self.detail}" if self.detail else ""

    def made(self, ctx: RunContext, what: str, detail: str) -> Stop | None:
        """Count a turn that made the mistake `what`; the `Stop` when it has been repeated too often."""
        self.times = self.times + 1 if what == self.what else 1
        self.what, self.detail = what, detail.rstrip(".")
        if self.times <= ctx.settings.max_repeats:
            return None
        return Stop(
            f"the supervisor {what} {self.times} times in a row; use a supervisor model that follows the tool "
            f"schemas it is given{self.last_error}"
        )

    def clear(self) -> None:
        """The turn made progress (it handed work off)."""
        self.what, self.detail, self.times = "", "", 0


def _run_notes(ctx: RunContext) -> str:
    """What the supervisor should know about the run's state, for its instructions. Never inside a tool
    result: a result is a specialist's words, which the supervisor passes on and quotes, notes included."""
    if not ctx.revisions:
        return ""
    left = max(ctx.settings.max_revisions - ctx.revisions, 0)
    return f"\n\nReviewers asked for {ctx.revisions} revision(s) so far; {left} revision(s) left in this run."


async def supervisor_turn(ctx: RunContext, request: ModelRequest, mistakes: Mistakes) -> TurnOutcome:
    """One supervisor turn: ask the model, classify its tool calls, run the handoffs among them.
    `mistakes` counts the turns in a row that only made the same mistake."""
    if ctx.stopped_by or ctx.budget.exhausted:
        return Stop(ctx.stopped_by or ctx.budget.exhausted)
    try:
        response = await ctx.supervisor_call(request)
    except ModelError as exc:
        ctx.fail(exc.kind, "supervisor", f"the supervisor's model call failed: {exc.message}")
        return Stop()
    except BudgetExhausted as exc:
        ctx.fail("budget_exhausted", "supervisor", f"the supervisor's model call failed: {exc.budget}")
        return Stop(exc.budget)
    uses = response.tool_uses
    if not uses:
        offered = {t.name for t in request.tools}
        if (name := text_tool_call(response.text, offered)) is not None:
            # Not an answer: a call the model wrote as text. Back to it, as a malformed handoff would go.
            reason = f"the supervisor wrote a call of {name} as text instead of calling the tool"
            ctx.fail("malformed_tool_call", "supervisor", reason, recovered=True)
            if (stop := mistakes.made(ctx, f"wrote a call of {name} as text instead of calling it", "")) is not None:
                return stop
            feedback = TEXT_TOOL_CALL_FEEDBACK.format(name=name)
            return Continue(Message(role="assistant", content=response.text), Message(role="user", content=feedback))
        if response.stop_reason == "refusal":  # e.g. OpenAI's `refusal`: its words are no answer to the request
            said = f": {short(response.text, 300)}" if response.text.strip() else ""
            ctx.fail("model_refused", "supervisor", f"the supervisor's model declined the request{said}")
            return Stop()
        if response.text.strip():
            return _answer(ctx, response.text, response.stop_reason)
        ctx.fail("empty_answer", "supervisor", "the supervisor's model returned neither an answer nor a handoff")
        return Stop()
    plan = classify(uses, ctx.team, ctx.run_id, ctx.last_seq + 1)
    if plan.answer is not None:
        note_conflicts(ctx, response)
        return _answer(ctx, plan.answer, response.stop_reason)
    reply = Message(role="assistant", content=list(response.content))
    if not plan.handoffs:  # every call was rejected: each goes back as an error, unless this keeps happening
        results = await run_turn(ctx, plan)
        names = {u.id: u.name for u in uses}
        what = " and ".join(dict.fromkeys(_MISTAKES[r.kind].format(name=names[r.call_id]) for r in plan.rejected))
        if (stop := mistakes.made(ctx, what, plan.rejected[-1].reason)) is not None:
            return stop
        return Continue(reply, Message(role="user", content=results))
    mistakes.clear()
    if (decision := await approve_turn(ctx, list(plan.handoffs))) is None:  # the `plan` checkpoint stopped the run
        return Stop()
    if decision.action == "revise":
        feedback = f"{REVISE_PREFIX}: {decision.feedback}. Hand off again with the changes."
        answers: list[ContentBlock] = [ToolResultBlock(tool_use_id=u.id, content=feedback, is_error=True) for u in uses]
        return Continue(reply, Message(role="user", content=answers))
    ctx.last_seq += len(plan.handoffs)
    results = await run_turn(ctx, plan)
    return Continue(reply, Message(role="user", content=results))


def _answer(ctx: RunContext, answer: str, stop_reason: str) -> Final:
    note_cut_off(ctx, stop_reason)
    return Final(answer)


async def run_turn(ctx: RunContext, plan: TurnPlan) -> list[ContentBlock]:
    """Answer every tool call of a classified turn; the handoffs run concurrently."""
    answers: dict[str, ToolResultBlock] = {}
    for rejected in plan.rejected:
        if rejected.kind != "finalize":
            ctx.fail(rejected.kind, rejected.specialist, rejected.reason, rejected.task, recovered=True)
        answers[rejected.call_id] = ToolResultBlock(
            tool_use_id=rejected.call_id, content=rejected.reason, is_error=True
        )
    records = await dispatch(ctx, plan.handoffs)
    for handoff, record in zip(plan.handoffs, records, strict=True):
        answers[handoff.call_id] = _tool_result(handoff.call_id, record)
    return [answers[call_id] for call_id in plan.call_ids]


_RESULT_DEFAULTS = defaults_of(ToolResultBlock)


def _tool_result(call_id: str, record: HandoffRecord) -> ToolResultBlock:
    if record.status == "completed":  # every handoff's: built, not validated, from the model's id and the record
        return built(ToolResultBlock, _RESULT_DEFAULTS, {"tool_use_id": call_id, "content": record.output})
    if record.status == "refused" and record.error_type == "duplicate_handoff":
        return ToolResultBlock(tool_use_id=call_id, content=f"{record.error}\n\n{record.output}", is_error=True)
    attempts = f" after {record.attempt} attempt(s)" if record.status == "failed" else ""
    return ToolResultBlock(
        tool_use_id=call_id,
        is_error=True,
        content=f"{record.target} {record.status}{attempts} ({record.error_type}): {record.error}",
    )
