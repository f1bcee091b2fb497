"""Adaptive mode: the supervisor model delegates through `handoff_to_<specialist>` tools turn by turn.

Each turn is one model call whose tool calls are classified before any runs (`turn.classify`);
the valid handoffs run concurrently, their results go back as tool results, and the supervisor
re-plans from them until it finalizes. Bad tool calls (unknown specialists, malformed arguments)
go back to it as error results, never crash the run; a model that keeps making the same mistake is
stopped (`Mistakes`). An answer cut off at the output limit, or a refusal, is never a complete answer.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from mcp_team.errors import BudgetExhausted
from mcp_team.handoffs.approval import REVISE_PREFIX, approve_turn
from mcp_team.handoffs.context import RunContext
from mcp_team.handoffs.execution import dispatch
from mcp_team.handoffs.judge import CONFLICTS_INSTRUCTIONS, has_judge, note_conflicts, with_conflicts
from mcp_team.handoffs.planner import PLAN_TOOL
from mcp_team.handoffs.prompts import SUPERVISOR_INSTRUCTIONS, describe_team
from mcp_team.handoffs.schema import Failure, HandoffArgs, HandoffRecord
from mcp_team.handoffs.synthesis import FINALIZE_TOOL, note_cut_off, short, supervisor_tools
from mcp_team.handoffs.turn import HANDOFF_PREFIX, Continue, Final, Stop, TurnOutcome, TurnPlan, classify
from mcp_team.llm import (
    SUPERVISOR,
    ContentBlock,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
)
from mcp_team.llm.answers import NoAnswer, feedback, not_an_answer
from mcp_team.llm.text_calls import as_tool_calls, read_calls, reads_text_calls
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
    instructions = SUPERVISOR_INSTRUCTIONS.format(team=describe_team(ctx.config.workers))
    finalize = FINALIZE_TOOL
    if has_judge(ctx):  # its finalize may report conflicts for the judge
        instructions, finalize = instructions + CONFLICTS_INSTRUCTIONS, with_conflicts(FINALIZE_TOOL)
    tools = [*(handoff_tool(s) for s in ctx.config.workers), finalize]
    messages = [Message(role="user", content=ctx.config.request)]
    mistakes = Mistakes()
    schema: dict[str, Any] | None = None  # the last turn's `Continue.reply_schema`
    for _turn in range(ctx.config.settings.max_supervisor_turns):
        system = instructions + _run_notes(ctx)
        request = ModelRequest(
            system=system, messages=messages, tools=tools, reply_schema=schema, phase="act", member=SUPERVISOR
        )
        outcome = await supervisor_turn(ctx, request, mistakes)
        if not isinstance(outcome, Continue):
            return outcome
        messages += (outcome.reply, outcome.results)
        schema = outcome.reply_schema
    used = f"the supervisor used all {ctx.config.settings.max_supervisor_turns} of its turns without finalizing"
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
    no_answers: int = 0  # replies taken as answers that were none, since the last progress
    first_answer: str = ""  # its answer before any work was done, when it was sent back once to delegate
    # The failures of these mistakes: recovered only once the supervisor makes progress (see `clear`), so a run
    # that ends on them does not call them recovered.
    pending: list[Failure] = field(default_factory=list)

    @property
    def last_error(self) -> str:
        return f". The last error: {self.detail}" if self.detail else ""

    def made(self, ctx: RunContext, what: str, detail: str) -> Stop | None:
        """Count a turn that made the mistake `what`; the `Stop` when it has been repeated too often."""
        self.times = self.times + 1 if what == self.what else 1
        self.what, self.detail = what, detail.rstrip(".")
        if self.times <= ctx.config.settings.max_repeats:
            return None
        return Stop(
            f"the supervisor {what} {self.times} times in a row; use a supervisor model that follows the tool "
            f"schemas it is given{self.last_error}"
        )

    def clear(self) -> None:
        """The turn made progress (it handed work off, or answered): the mistakes so far are recovered."""
        self.what, self.detail, self.times, self.no_answers = "", "", 0, 0
        for failure in self.pending:
            failure.recovered = True
        self.pending.clear()


def _run_notes(ctx: RunContext) -> str:
    """What the supervisor should know about the run's state, for its instructions. Never inside a tool
    result: a result is a specialist's words, which the supervisor passes on and quotes, notes included."""
    if not ctx.revisions:
        return ""
    left = max(ctx.config.settings.max_revisions - ctx.revisions, 0)
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
    read_text = reads_text_calls(ctx.config.models.for_role(SUPERVISOR))
    if not uses and read_text and (named := _named_handoffs(ctx, response, request.tools)) is not None:
        response, uses = named, named.tool_uses  # a handoff called by its member's name (or its member's tool)
    if not uses:
        if (reading := read_calls(response.text, request.tools, aliases=team_aliases(ctx))).calls:
            # Not an answer: calls written as text that did not run (not read for this model, or not runnable:
            # `llm.text_calls`). Back to the model with what was wrong, as a malformed handoff would go.
            called = ", ".join(reading.names)
            wrong = "; ".join(reading.problems)
            reason = f"the supervisor wrote a call of {called} as text " + (
                f"that could not run: {wrong}" if wrong else "instead of calling the tool"
            )
            mistakes.pending.append(ctx.fail("malformed_tool_call", "supervisor", reason))
            what = f"wrote a call of {called} as text " + ("that could not run" if wrong else "instead of calling it")
            if (stop := mistakes.made(ctx, what, wrong)) is not None:
                return stop
            # Read but not runnable, before any work: the next reply is held to a handoff, as when it answers itself
            # (`_delegate_first`). Qwen2.5-Coder-1.5B wrote `calculate_factorial` three times, then the run failed.
            return Continue(
                Message(role="assistant", content=response.text),
                Message(role="user", content=feedback(reading, read_text)),
                _handoff_call_schema(ctx) if read_text and not ctx.records else None,
            )
        if response.stop_reason == "refusal":  # e.g. OpenAI's `refusal`: its words are no answer to the request
            said = f": {short(response.text, 300)}" if response.text.strip() else ""
            ctx.fail("model_refused", "supervisor", f"the supervisor's model declined the request{said}")
            return Stop()
        replied = Message(role="assistant", content=response.text or "(an empty reply)")
        if (no := _not_an_answer(ctx, request, response.text)) is not None:
            return _no_answer(ctx, mistakes, no, replied)
        if read_text and (again := _delegate_first(ctx, mistakes, replied, response.text)) is not None:
            return again
        mistakes.clear()
        return _answer(ctx, _settled(ctx, mistakes, response.text), response.stop_reason)
    plan = classify(uses, ctx.config.team, ctx.config.run_id, ctx.last_seq + 1)
    reply = Message(role="assistant", content=list(response.content))
    if plan.answer is not None:
        if (no := _not_an_answer(ctx, request, plan.answer)) is not None:
            return _no_answer(ctx, mistakes, no, reply, [u.id for u in uses])
        if read_text and (again := _delegate_first(ctx, mistakes, reply, plan.answer, [u.id for u in uses])):
            return again
        note_conflicts(ctx, response)
        mistakes.clear()
        return _answer(ctx, _settled(ctx, mistakes, plan.answer), response.stop_reason)
    if not plan.handoffs:  # every call was rejected: each goes back as an error, unless this keeps happening
        before = len(ctx.failures)
        results = await run_turn(ctx, plan)
        mistakes.pending += ctx.failures[before:]  # recovered once the supervisor makes progress
        names = {u.id: u.name for u in uses}
        what = " and ".join(dict.fromkeys(_MISTAKES[r.kind].format(name=names[r.call_id]) for r in plan.rejected))
        if (stop := mistakes.made(ctx, what, plan.rejected[-1].reason)) is not None:
            return stop
        return Continue(reply, Message(role="user", content=results))
    mistakes.clear()
    if (decision := await approve_turn(ctx, list(plan.handoffs))) is None:  # the `plan` checkpoint stopped the run
        return Stop()
    if decision.action == "revise":
        revise = f"{REVISE_PREFIX}: {decision.feedback}. Hand off again with the changes."
        answers: list[ContentBlock] = [ToolResultBlock(tool_use_id=u.id, content=revise, is_error=True) for u in uses]
        return Continue(reply, Message(role="user", content=answers))
    ctx.last_seq += len(plan.handoffs)
    results = await run_turn(ctx, plan)
    return Continue(reply, Message(role="user", content=results))


def _named_handoffs(ctx: RunContext, response: ModelResponse, tools: list[ToolDefinition]) -> ModelResponse | None:
    """`response` with the handoffs its text calls by another name made real calls (see `team_aliases`); None when
    it has none, or any call in it cannot run. A call of a member's own tool (`calculate`) with that tool's
    arguments, not a handoff's, still means that member: it gets the request, with the call as its context."""
    if (named := as_tool_calls(response, tools, team_aliases(ctx))) is not None:
        return named
    reading = read_calls(response.text, tools, aliases=team_aliases(ctx))
    owned = _tool_owners(ctx)
    if not reading.calls or reading.ambiguous:
        return None
    uses: list[TextBlock | ToolUseBlock] = []
    digest = hashlib.sha256(response.text.encode()).hexdigest()[:12]  # as llm.text_calls names its calls
    for n, call in enumerate(reading.calls):
        arguments = call.arguments
        if call.problem is not None:
            if owned.get(call.called) != call.name:  # not a member's tool: it goes back, saying what was wrong
                return None
            asked = f"{call.called}({json.dumps(call.arguments)})" if call.arguments else call.called
            arguments = {"task": ctx.config.request, "context": f"The supervisor asked for: {asked}"}
        uses.append(ToolUseBlock(id=f"call_text_{digest}_{n}", name=call.name, input=arguments, from_text=True))
    return response.model_copy(update={"content": uses, "stop_reason": "tool_use"})


def _tool_owners(ctx: RunContext) -> dict[str, str]:
    """The tools only one member has, each with that member's handoff tool."""
    owners: dict[str, list[str]] = {}
    for s in ctx.config.workers:
        for tool in s.tools:
            owners.setdefault(tool.name, []).append(f"{HANDOFF_PREFIX}{s.name}")
    return {tool: handoffs[0] for tool, handoffs in owners.items() if len(handoffs) == 1}


def team_aliases(ctx: RunContext) -> dict[str, str]:
    """Names a model that writes its calls as text may give a handoff, each meaning one member alone: the member's
    name (`analyst`, `handoff_analyst`), or the name of a tool only that member has (`calculate`, which small
    models call with a handoff's arguments after reading the team's description)."""
    aliases: dict[str, str] = {}
    for s in ctx.config.workers:
        handoff = f"{HANDOFF_PREFIX}{s.name}"
        for alias in (s.name, f"handoff_{s.name}", f"{s.name}_specialist", f"transfer_to_{s.name}"):
            aliases[alias] = handoff
    return {**aliases, **_tool_owners(ctx)}


def _answer(ctx: RunContext, answer: str, stop_reason: str) -> Final:
    note_cut_off(ctx, stop_reason)
    return Final(answer)


# What an answer must not be besides the calls of the supervisor's own tools: the arguments of a plan.
ANSWER_SHAPES = (PLAN_TOOL,)


def _not_an_answer(ctx: RunContext, request: ModelRequest, answer: str) -> NoAnswer | None:
    """Why the supervisor's `answer` is none (`llm.answers.not_an_answer`): a call or the arguments of one of its
    tools, or a reply that names them as code."""
    return not_an_answer(answer, ctx.config.request, [*request.tools, *ANSWER_SHAPES], supervisor_tools(ctx))


DELEGATE_FIRST = (
    "Do not answer yourself: your team does the work. Reply with only the call that hands the request to the team "
    'member who should do it, {{"name": "handoff_to_<member>", "arguments": {{"task": "<the task>"}}}}, one of:\n'
    "{team}\nCall finalize only once you have their results."
)


def _delegate_first(
    ctx: RunContext, mistakes: Mistakes, reply: Message, answer: str, call_ids: list[str] | None = None
) -> Continue | None:
    """A supervisor that answers before any member did any work is sent back, once, to delegate: small models whose
    calls are read from their text often do the work themselves, which is not what a team is for. Its next reply
    must be a handoff (`_handoff_call_schema`), where the server can hold a reply to a schema. None: an answer
    stands (work was done, or it was sent back once already and answered again: then its first answer stands,
    given before it was pressed, in `mistakes.first_answer`)."""
    if ctx.records or mistakes.first_answer:
        return None
    mistakes.first_answer = answer
    team = "\n".join(f"- {HANDOFF_PREFIX}{s.name}: {s.description}" for s in ctx.config.workers)
    told = DELEGATE_FIRST.format(team=team)
    schema = _handoff_call_schema(ctx)
    if call_ids:
        results: list[ContentBlock] = [ToolResultBlock(tool_use_id=i, content=told, is_error=True) for i in call_ids]
        return Continue(reply, Message(role="user", content=results), schema)
    return Continue(reply, Message(role="user", content=told), schema)


def _handoff_call_schema(ctx: RunContext) -> dict[str, Any]:
    """The JSON schema of one handoff of the run's whole request to one of its members, written as text:
    `{"name": "handoff_to_<member>", "arguments": {"task": request}}`, the form `llm.text_calls` reads. A server
    that holds the reply to it (llama.cpp, vLLM, Ollama: a grammar) leaves the model only the choice of the member.
    The task is the request as the user wrote it: held to a schema with a task of its own, Qwen2.5-Coder-1.5B
    handed "Write a haiku about the sea." to the researcher as "Summarize the latest research on climate change"."""
    return {
        "type": "object",
        "properties": {
            "name": {"type": "string", "enum": [f"{HANDOFF_PREFIX}{s.name}" for s in ctx.config.workers]},
            "arguments": {
                "type": "object",
                "properties": {"task": {"type": "string", "const": ctx.config.request}},
                "required": ["task"],
            },
        },
        "required": ["name", "arguments"],
    }


def _settled(ctx: RunContext, mistakes: Mistakes, answer: str) -> str:
    """The answer that stands: with no work done after being sent back to delegate, the first one (see
    `_delegate_first`), else `answer`."""
    return mistakes.first_answer if mistakes.first_answer and not ctx.records else answer


def _no_answer(
    ctx: RunContext, mistakes: Mistakes, no: NoAnswer, reply: Message, call_ids: list[str] | None = None
) -> Continue | Stop:
    """A reply taken as the answer that is none (`llm.text_calls.not_an_answer`): back to the supervisor once,
    told why; the second time the run stops, saying why it has no answer. `call_ids`: the finalize calls that
    held it, answered with the feedback as their error results."""
    if mistakes.no_answers >= 1:
        why = f"the supervisor's model gave no answer: {no.why}"
        ctx.fail(no.kind, "supervisor", f"{why} (twice in a row, after being told why)")
        ctx.note(
            "no_answer",
            f"The run has no answer from its supervisor: {no.why}. Its model did not write an answer after being "
            "told why; it needs a model that writes its answers out (or calls finalize).",
        )
        return Stop(why)
    mistakes.no_answers += 1
    mistakes.pending.append(ctx.fail(no.kind, "supervisor", f"the supervisor's reply was no answer: {no.why}"))
    if call_ids:
        results: list[ContentBlock] = [
            ToolResultBlock(tool_use_id=i, content=no.feedback, is_error=True) for i in call_ids
        ]
        return Continue(reply, Message(role="user", content=results))
    return Continue(reply, Message(role="user", content=no.feedback))


async def run_turn(ctx: RunContext, plan: TurnPlan) -> list[ContentBlock]:
    """Answer every tool call of a classified turn; the handoffs run concurrently."""
    answers: dict[str, ToolResultBlock] = {}
    for rejected in plan.rejected:
        if rejected.kind != "finalize":  # recovered when handoffs of the same turn go on (else see `Mistakes`)
            ctx.fail(rejected.kind, rejected.specialist, rejected.reason, rejected.task, recovered=bool(plan.handoffs))
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
