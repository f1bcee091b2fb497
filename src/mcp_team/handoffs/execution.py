"""Running handoffs: attempts, retries with a refined task, fallbacks, and the order of what they record.

A handoff is first admitted or refused (handoffs.admission), then run to completion in its own branch of the run
(`Runtime.branches`): every attempt and every refine call of a handoff happens in its branch, one after
another. Decisions whose outcome depends on how other branches were timed go through `Runtime.decide` (a
retry once a breaker may have opened; a start that waited for other branches), so a replay takes the same
ones; nothing else here does.

`dispatch` admits a turn's handoffs in order, then runs the admitted ones at once, each in its branch,
so one failed branch never discards its siblings' results. Both adaptive and planned runs go through
`execute`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from operator import attrgetter

import anyio

from mcp_team.errors import BudgetExhausted
from mcp_team.handoffs.admission import (
    admit,
    fallback_of,
    fingerprint_of,
    not_run,
    note_fan_out,
    refusal_of,
    retry_blocked,
    settle,
)
from mcp_team.handoffs.approval import approve_handoff
from mcp_team.handoffs.budget import Budget
from mcp_team.handoffs.context import RunContext, now
from mcp_team.handoffs.prompts import REFINE_INSTRUCTIONS
from mcp_team.handoffs.review import count_revise, gate_revision
from mcp_team.handoffs.runtime import Branch
from mcp_team.handoffs.schema import Handoff, HandoffRecord, finish_record, started_record
from mcp_team.handoffs.subteam import SubTeam, run_subteam
from mcp_team.llm import SUPERVISOR, Message, ModelError, ModelRequest, ToolDefinition, Usage
from mcp_team.llm.call import MeterWrapper
from mcp_team.specialists import run_specialist
from mcp_team.telemetry import spans
from mcp_team.telemetry.attributes import FALLBACK_MODEL, HANDOFF_TASK, TOOL_CALL_ARGUMENTS, TOOL_CALL_RESULT

_PAYLOAD = {"task", "context", "expected_output"}

# Failures that a retry cannot fix.
_FINAL_ERRORS = {"budget_exhausted", "unavailable", "auth", "bad_request"}

_REFINE_TOOL = ToolDefinition(
    name="refine_task",
    description="Submit the rewritten task.",
    input_schema={"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]},
)


async def dispatch(ctx: RunContext, handoffs: Sequence[Handoff]) -> list[HandoffRecord]:
    """Admit the handoffs in order, run the admitted ones concurrently; their final records in the same order."""
    results: list[HandoffRecord | None] = [None] * len(handoffs)
    prints = [fingerprint_of(h) for h in handoffs]  # once each: admission reads them, completion records them

    async def run(i: int) -> None:
        results[i] = record = await execute(ctx, handoffs[i])
        if record.status == "completed":
            ctx.fingerprints[prints[i]] = record

    with in_handoff_order(ctx, settle_breakers=True):
        admitted = []
        for i, handoff in enumerate(handoffs):
            if (refused := admit(ctx, handoff, fingerprint=prints[i])) is None:
                admitted.append(i)
            else:
                results[i] = refused
        note_fan_out(ctx, "handoffs asked for in one turn", results, len(admitted))
        if admitted:
            branches = [Branch(branch_key(ctx, handoffs[i]), functools.partial(run, i)) for i in admitted]
            await ctx.config.runtime.branches(branches)
    return [r for r in results if r is not None]


def branch_key(ctx: RunContext, handoff: Handoff) -> str:
    """The name of `handoff`'s branch, unique within the run tree: a sub-run's id is its handoff's, qualified by
    its parent run's (`<run id>/h2.1`), so a retried sub-team's new sub-run never reuses its first one's keys."""
    return f"{ctx.config.run_id}/{handoff.id}"


async def execute(ctx: RunContext, handoff: Handoff, *, contested: bool = False) -> HandoffRecord:
    """Run an admitted handoff in its branch, retrying a failure with a task the supervisor refines, up to the cap.

    `contested`: the handoff is not admitted yet and its start waited for other branches (a planned
    task after its dependencies); it is admitted here, through `Runtime.decide`.
    """
    first = handoff
    failed_ids: list[str] = []
    if contested:
        refusal = await ctx.config.runtime.decide("start", lambda: refusal_of(ctx, first))
        if (refused := settle(ctx, handoff, refusal)) is not None:
            return refused
    if (approved := await approve_handoff(ctx, handoff)) is None:  # a before:<member> checkpoint stopped it
        return not_run(ctx, handoff, "refused", "checkpoint", ctx.stopped_by or "stopped at a checkpoint")
    first = handoff = approved
    handoff = await _to_fallback(ctx, handoff)
    while True:
        record = await _attempt(ctx, handoff)
        if record.status == "completed":
            if (revised := await gate_revision(ctx, handoff, record)) is None:
                break
            handoff = revised
            continue
        if record.status != "failed":
            break
        failed_ids.append(record.id)
        if record.error_type in _FINAL_ERRORS or len(failed_ids) > ctx.config.settings.max_retries:
            break
        # Other branches may have opened the breaker or spent the handoff budget meanwhile.
        blocked = await ctx.config.runtime.decide(f"retry {handoff.attempt + 1}", lambda: retry_blocked(ctx, first))
        if blocked == "handoff_budget":
            ctx.budget.handoffs_used_up()
        if blocked is not None:
            break
        ctx.budget.charge_handoff()
        task = await _refine(ctx, handoff, record.error or "unknown error")
        handoff = handoff.model_copy(
            update={
                "id": f"{first.id}.{handoff.attempt + 1}",
                "task": task,
                "attempt": handoff.attempt + 1,
                "retry_of": record.id,
            }
        )
        handoff = await _to_fallback(ctx, handoff)
    if failed_ids and record.status == "completed":
        for failure in ctx.failures:
            if failure.handoff_id in failed_ids:
                failure.recovered = True
    return record


async def _to_fallback(ctx: RunContext, handoff: Handoff) -> Handoff:
    """`handoff`, or the same handoff to its target's fallback specialist when the target's circuit is open.

    Whether a circuit is open depends on how branches were timed, so it is a decision of the runtime; a
    specialist without a fallback never asks (a durable run records nothing for it)."""
    if ctx.config.team[handoff.target].fallback is None:
        return handoff
    name = await ctx.config.runtime.decide(f"fallback {handoff.attempt}", lambda: fallback_of(ctx, handoff.target))
    if name is None:
        return handoff
    note = f"specialist {name} took it: the circuit of {handoff.target} is open"
    return handoff.model_copy(update={"target": name, "fallback": note})


@contextmanager
def in_handoff_order(ctx: RunContext, *, settle_breakers: bool = False) -> Iterator[None]:
    """Puts the records and failures added inside in handoff order (seq, attempt) when it ends.

    Branches finish in whatever order their models answer; what the run shows and what the
    synthesizer reads afterwards must not depend on it. With `settle_breakers`, the breakers are
    recounted in that order too (see `Breakers.settle`).
    """
    records, failures = len(ctx.records), len(ctx.failures)
    breakers = ctx.breakers.snapshot() if settle_breakers else {}
    try:
        yield
    finally:
        added = ctx.records[records:]
        if len(added) > 1:
            added.sort(key=_HANDOFF_ORDER)
            ctx.records[records:] = added
        if len(ctx.failures) > failures:  # with no failure, every order gives the same breakers: skip the work
            order = {r.id: i for i, r in enumerate(added)}
            failed = ctx.failures[failures:]
            failed.sort(key=lambda f: order.get(f.handoff_id or "", len(order)))
            ctx.failures[failures:] = failed
            if settle_breakers:
                ran = [(r.target, r.status == "completed") for r in added if r.status in ("completed", "failed")]
                ctx.breakers.settle(breakers, ran)


_HANDOFF_ORDER = attrgetter("seq", "attempt")


async def _attempt(ctx: RunContext, handoff: Handoff) -> HandoffRecord:
    config = ctx.config
    specialist = config.team[handoff.target]
    record = started_record(handoff, now())
    ctx.records.append(record)
    try:
        if config.on_event is not None:  # the message is built only for a sink that reads it
            await ctx.emit("handoff_started", f"{handoff.target}: {handoff.task[:120]}", record)
        with spans.transfer_span(handoff.source, handoff.target, handoff.call_id, handoff.id, handoff.attempt) as span:
            if capturing := spans.capturing(span):
                spans.record_content(span, HANDOFF_TASK, lambda: handoff.task)
                spans.record_content(span, TOOL_CALL_ARGUMENTS, lambda: handoff.model_dump(include=_PAYLOAD))
            if isinstance(specialist, SubTeam):  # a member that is a team: a sub-run under this span
                result, record.subrun = await run_subteam(ctx, specialist, handoff)
                record.usage = result.usage
            else:
                result = await run_specialist(
                    specialist,
                    handoff.task,
                    config.models,
                    context=handoff.context,
                    expected_output=handoff.expected_output,
                    meter=_HandoffMeter(ctx.budget, record),
                    call_timeout=config.settings.call_timeout,
                    agent_id=handoff.id,
                    gather=config.runtime.gather,
                )
            if capturing:
                spans.record_content(span, TOOL_CALL_RESULT, lambda: result.output or result.error)
            if record.fallback and span.is_recording():
                span.set_attribute(FALLBACK_MODEL, record.fallback)
            if result.status == "failed":
                spans.mark_error(span, result.error_type or "failed", message=result.error or "")
    except anyio.get_cancelled_exc_class():
        record.status, record.ended_at, record.error_type = "cancelled", now(), "cancelled"
        record.error = "cancelled before it finished"
        raise
    finish_record(
        record,
        status=result.status,
        ended_at=now(),
        output=result.output,
        error=result.error,
        error_type=result.error_type,
        turns=result.turns,
        verdict=result.verdict,
    )
    ctx.breakers.record(handoff.target, result.status == "completed")
    if result.status == "failed":
        ctx.fail(result.error_type or "failed", handoff.target, result.error or "", handoff.task, handoff.id)
    elif result.verdict is not None and result.verdict.verdict == "REVISE":
        count_revise(ctx)
    if config.on_event is not None:
        status = "done" if result.status == "completed" else f"failed ({result.error_type})"
        await ctx.emit("handoff_finished", f"{handoff.target} {status}", record)
    return record


class _HandoffMeter(MeterWrapper):
    """Charges the run budget and keeps the handoff's own usage current, call by call, so a cancelled
    handoff still reports the tokens it spent."""

    def __init__(self, budget: Budget, record: HandoffRecord) -> None:
        super().__init__(budget)
        self.record = record

    def after_call(self, usage: Usage) -> None:
        self.meter.after_call(usage)
        self.record.usage = self.record.usage + usage

    def used_fallback(self, note: str) -> None:
        self.record.fallback = self.record.fallback or note


async def _refine(ctx: RunContext, handoff: Handoff, error: str) -> str:
    """The supervisor rewrites a failed task using the error; the original task if it cannot."""
    message = (
        f"Specialist: {handoff.target}\n\nFailed task:\n{handoff.task}\n\nError:\n{error}\n\n"
        f"This will be attempt {handoff.attempt + 1} of {ctx.config.settings.max_retries + 1}."
    )
    request = ModelRequest(
        system=REFINE_INSTRUCTIONS,
        messages=[Message(role="user", content=message)],
        tools=[_REFINE_TOOL],
        max_tokens=1024,
        phase="refine",
        member=SUPERVISOR,
    )
    try:
        response = await ctx.supervisor_call(request)
    except (ModelError, BudgetExhausted):
        return handoff.task
    for use in response.tool_uses:
        task = use.input.get("task")
        if use.name == "refine_task" and isinstance(task, str) and task.strip():
            return task
    return response.text.strip() or handoff.task
