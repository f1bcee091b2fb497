"""How a run goes, once it has its context: plan or supervise, then synthesize; on a deadline or a dead end, the
best partial answer (`orchestrate`). A run of `Team`, or the sub-run of a member that is itself a team
(`subteam`: the one import circle of the engine, a team inside a team)."""

from __future__ import annotations

import functools

import anyio

from mcp_team.handoffs.approval import approve_plan
from mcp_team.handoffs.context import RunContext, now
from mcp_team.handoffs.judge import rule, rulings_text
from mcp_team.handoffs.planner import PlanError, make_plan, run_plan
from mcp_team.handoffs.review import note_unpassed_reviews
from mcp_team.handoffs.schema import Plan
from mcp_team.handoffs.supervisor import run_adaptive
from mcp_team.handoffs.synthesis import fallback_answer, missing_section, synthesize
from mcp_team.handoffs.turn import Final


async def orchestrate(ctx: RunContext) -> None:
    """Plan or supervise, then synthesize; on a deadline or a dead end, the best partial answer.

    A run, or a sub-run of a member that is a team (see `subteam`)."""
    answer: str | None = None
    with anyio.move_on_after((ctx.config.deadline_at - now()).total_seconds()) as deadline:
        how = ""
        if ctx.config.settings.mode == "planned":
            try:
                ctx.plan = await make_plan(ctx)
                approved = await approve_plan(ctx, ctx.plan, functools.partial(_replan, ctx))
            except PlanError as exc:
                ctx.fail("invalid_plan", "supervisor", str(exc))
                ctx.status, ctx.answer = "failed", f"No answer: {exc}."
                return
            if approved is None:
                _stopped_at_checkpoint(ctx)
                return
            ctx.plan = approved
            await ctx.emit("plan_ready", f"plan: {len(ctx.plan.tasks)} tasks")
            await run_plan(ctx, ctx.plan)
            how = ctx.plan.combine
        else:
            outcome = await run_adaptive(ctx)
            if isinstance(outcome, Final):
                answer = outcome.answer
            elif outcome.reason is not None:
                ctx.stopped_by = ctx.stopped_by or outcome.reason
        if ctx.checkpoint_stop is not None:
            _stopped_at_checkpoint(ctx)
            return
        if answer is None and (ctx.completed() or ctx.budget.exhausted):
            # The synthesis prompt closes the run; after a budget ran out it spends the reserved call,
            # even with no finished work (the answer then says what could not be done).
            answer = await synthesize(ctx, how)
        if answer is not None and ctx.pending_conflicts:  # the judge rules, the synthesis follows its rulings
            rulings = rulings_text(await rule(ctx))
            answer = await synthesize(ctx, how, rulings) if ctx.completed() else answer
            if rulings not in answer and "judge" not in answer.lower():
                answer += f"\n\nConflicts between results, as the judge ruled:\n{rulings}"
    if deadline.cancelled_caught:
        ctx.stopped_by = f"the deadline ({ctx.config.settings.budgets.deadline_seconds:g} s) passed"
        for r in ctx.records:
            if r.status == "cancelled":
                ctx.fail("deadline", r.target, "stopped by the run's deadline", r.task, r.id)
    note_unpassed_reviews(ctx)
    missing = missing_section(ctx)
    # A supervisor's own answer cut off at its token limit is part of an answer, even with no handoff finished.
    cut = answer is not None and any(f.kind == "truncated" and f.specialist == "supervisor" for f in ctx.failures)
    ctx.status = "complete" if not missing else "partial" if ctx.completed() or cut else "failed"
    answer = answer or fallback_answer(ctx.records)
    ctx.answer = f"{answer}\n\n---\n{missing}" if missing else answer


async def _replan(ctx: RunContext, feedback: str) -> Plan:
    ctx.plan = await make_plan(ctx, feedback)
    return ctx.plan


def _stopped_at_checkpoint(ctx: RunContext) -> None:
    """A checkpoint ended the run: no synthesis; the answer says why and gives what had finished."""
    stop = ctx.checkpoint_stop
    assert stop is not None
    if stop.status == "failed":
        ctx.fail("checkpoint_unanswerable", "supervisor", stop.reason)
    ctx.status = stop.status
    done = [f"## {r.target}: {r.task[:120]}\n{r.output}" for r in ctx.records if r.status == "completed"]
    finished = "What had finished:\n\n" + "\n\n".join(done) if done else "No work had finished."
    ctx.answer = f"The run stopped: {stop.reason}.\n\n{finished}"
