"""Where a run stops at its checkpoints (see `checkpoints`): after planning, and before a named member starts.

A revise re-plans (or refines the next handoff) with the person's feedback and asks again, at most
`max_checkpoint_rounds` times; after that the latest version goes ahead. A stop (reject, no answer,
nobody to ask under the `fail` policy) is set on `ctx.checkpoint_stop` and `ctx.stopped_by`, so every
branch winds down as after any other stop, and `team.orchestrate` ends the run with its status.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from mcp_team.handoffs.checkpoints import Checkpoint, Decision, Stop, ask
from mcp_team.handoffs.context import RunContext
from mcp_team.handoffs.schema import Handoff, Plan


def wants(ctx: RunContext, name: str) -> bool:
    return name in ctx.config.settings.checkpoints


async def _ask(ctx: RunContext, name: str, summary: str, round_: int) -> Decision | None:
    """The person's decision; None when the run must stop (recorded on `ctx`)."""
    await ctx.emit("checkpoint", f"checkpoint {name}: waiting for approval")
    config = ctx.config
    timeout = config.settings.checkpoint_timeout
    answer = await ask(
        config.approve,
        Checkpoint(name=name, summary=summary, round=round_, run_id=config.run_id, timeout=timeout),
        policy=config.settings.checkpoint_policy,
        timeout=config.settings.checkpoint_timeout,
        records=ctx.checkpoints,
    )
    if isinstance(answer, Stop):
        ctx.checkpoint_stop = ctx.checkpoint_stop or answer
        ctx.stopped_by = ctx.stopped_by or answer.reason
    # Told whatever the answer (a reject, no answer too; `ask` recorded it): the run's record and its caller's
    # progress show it now, not only once the run has wound down.
    await ctx.emit("checkpoint", f"checkpoint {name}: {ctx.checkpoints[-1].action}")
    return None if isinstance(answer, Stop) else answer


def describe_plan(plan: Plan) -> str:
    lines = []
    for t in plan.tasks:
        after = f" (after {', '.join(t.depends_on)})" if t.depends_on else ""
        lines.append(f"{t.id}. {t.specialist}: {t.description}{after}")
    return "\n".join(lines)


async def approve_plan(ctx: RunContext, plan: Plan, replan: Callable[[str], Awaitable[Plan]]) -> Plan | None:
    """The plan to run once a person approved it (re-planned on revise); None when the run stops."""
    if not wants(ctx, "plan"):
        return plan
    rounds = ctx.config.settings.max_checkpoint_rounds
    for round_ in range(1, rounds + 2):
        decision = await _ask(ctx, "plan", describe_plan(plan), round_)
        if decision is None:
            return None
        if decision.action == "approve":
            return plan
        if round_ > rounds:
            ctx.note("checkpoint_rounds", _capped("plan", rounds))
            return plan
        plan = await replan(decision.feedback)
    return plan


def describe_handoff(handoff: Handoff) -> str:
    parts = [f"{handoff.target} will get this task:\n{handoff.task}"]
    if handoff.context:
        parts.append(f"With this context:\n{handoff.context}")
    return "\n\n".join(parts)


async def approve_handoff(ctx: RunContext, handoff: Handoff) -> Handoff | None:
    """`before:<member>`: the handoff to run once approved (refined on revise); None when the run stops.

    Asked once per member and run: before its first handoff."""
    name = f"before:{handoff.target}"
    if not wants(ctx, name) or any(c.name == name for c in ctx.checkpoints):
        return handoff
    rounds = ctx.config.settings.max_checkpoint_rounds
    for round_ in range(1, rounds + 2):
        decision = await _ask(ctx, name, describe_handoff(handoff), round_)
        if decision is None:
            return None
        if decision.action == "approve":
            return handoff
        if round_ > rounds:
            ctx.note("checkpoint_rounds", _capped(name, rounds))
            return handoff
        # The person's words go to the member as they are: they refine the task, not replace it.
        handoff = handoff.model_copy(
            update={"task": f"{handoff.task}\n\nThe person approving this step asked: {decision.feedback}"}
        )
    return handoff


def _capped(name: str, rounds: int) -> str:
    return (
        f"checkpoint '{name}' was sent back for revision {rounds} time(s), the cap, so the latest version ran. "
        f"Raise max_checkpoint_rounds in the team file's [supervisor] to allow more rounds."
    )


REVISE_PREFIX = "not run: the person approving the plan asked for changes"


async def approve_turn(ctx: RunContext, handoffs: list[Handoff]) -> Decision | None:
    """Adaptive mode's `plan` checkpoint: a supervisor turn's handoffs, until a person approved one turn.

    Approve (or no checkpoint): Decision approve. Revise: the turn does not run and its handoffs are
    answered with the feedback, so the supervisor plans again. None: the run stops."""
    asked = [c for c in ctx.checkpoints if c.name == "plan"]
    if not wants(ctx, "plan") or not handoffs or any(c.action == "approve" for c in asked):
        return Decision(action="approve")
    round_ = len(asked) + 1
    summary = "\n".join(f"{i}. {h.target}: {h.task}" for i, h in enumerate(handoffs, start=1))
    decision = await _ask(ctx, "plan", summary, round_)
    rounds = ctx.config.settings.max_checkpoint_rounds
    if decision is not None and decision.action == "revise" and round_ > rounds:
        ctx.note("checkpoint_rounds", _capped("plan", rounds))
        return Decision(action="approve")
    return decision
