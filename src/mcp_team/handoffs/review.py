"""Review outcomes: quality gates sending work back, planned mode honouring REVISE, and runs whose review never passed.

Three rules share the run's revision cap (`RunSettings.max_revisions`). One count: `ctx.revisions` is the
revisions the run granted (work sent back), whether a reviewer's REVISE or a failed gate asked for it; a
reviewer's REVISE at the cap grants none and marks the cap reached (`ctx.revision_cap_hit`). One wording for
that count (`revisions_made`), wherever a run says it:
- a member's output that fails its quality gates goes back to it with the gates' messages, like a
  REVISE verdict (`gate_revision`, from `execution.execute`);
- in planned mode a review task that answers REVISE sends its input's author back to work with the
  reasons, then reviews the new draft (`revise_in_plan`, from `planner.run_plan`);
- at the end of a run, a member whose last verdict is still REVISE makes the run partial: the answer
  says the review did not pass (`note_unpassed_reviews`, from `team.orchestrate`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp_team.handoffs.context import RunContext
from mcp_team.handoffs.schema import Handoff, HandoffRecord
from mcp_team.specialists import Verdict
from mcp_team.telemetry import spans

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

GATE_FAILED = "quality_gate"
OFFLINE = "offline"  # the offline backend's provider (llm.offline): its text is a stand-in, not a model's


def count_revise(ctx: RunContext) -> None:
    """A reviewer's REVISE verdict: one more revision granted while the cap allows; at the cap, none (the latest
    draft stands) and the cap is reached."""
    if ctx.revisions < ctx.config.settings.max_revisions:
        ctx.revisions += 1
    else:
        ctx.revision_cap_hit = True


def revisions_made(ctx: RunContext) -> str:
    """The run's revisions, as every message says them: e.g. "2 revisions (max_revisions = 2)"."""
    n = ctx.revisions
    return f"{n} revision{'' if n == 1 else 's'} (max_revisions = {ctx.config.settings.max_revisions})"


def revision_blocked(ctx: RunContext) -> str | None:
    """What stops one more revision now: the cap, a stopping run, the handoff budget; None when it may go."""
    if ctx.revisions >= ctx.config.settings.max_revisions:
        return "revision_cap"
    if ctx.stopped_by is not None:
        return "stopped"
    if not ctx.budget.can_hand_off():
        return "handoff_budget"
    return None


async def gate_revision(ctx: RunContext, handoff: Handoff, record: HandoffRecord) -> Handoff | None:
    """Check `record`'s output against its member's gates; the revision to run next, or None to keep it.

    A failed gate is recorded on the attempt as a REVISE verdict whose reasons are the gates' messages.
    """
    gates = ctx.config.settings.gates.get(handoff.target)
    if gates is None:
        return None
    with spans.step_span("quality_gate", handoff.target, {"mcp_team.handoff.id": handoff.id}) as span:
        problems = gates.check(record.output)
        if not problems:
            return None
        spans.mark_error(span, GATE_FAILED, message="; ".join(problems))
    record.verdict = Verdict(verdict="REVISE", reasons=problems)
    blocked = await ctx.config.runtime.decide(f"revise {handoff.attempt + 1}", lambda: revision_blocked(ctx))
    if blocked == "handoff_budget":
        ctx.budget.handoffs_used_up()
    if blocked is not None:
        return None
    ctx.revisions += 1
    ctx.budget.charge_handoff()
    reasons = "\n".join(f"- {p}" for p in problems)
    return handoff.model_copy(
        update={
            "id": f"{handoff.id.split('.')[0]}.{handoff.attempt + 1}",
            "task": f"{_original_task(handoff)}\n\nYour previous answer did not pass the team's quality gates:\n"
            f"{reasons}\nWrite it again so that it passes them.",
            "context": f"{handoff.context}\n\nYour previous answer:\n{record.output}".strip(),
            "attempt": handoff.attempt + 1,
            "retry_of": record.id,
        }
    )


def _original_task(handoff: Handoff) -> str:
    return handoff.task.split("\n\nYour previous answer did not pass", 1)[0]


async def revise_in_plan(
    ctx: RunContext,
    review: HandoffRecord,
    authors: list[HandoffRecord],
    run: Callable[[Handoff], Awaitable[HandoffRecord]],
) -> HandoffRecord:
    """Planned mode: while `review` says REVISE and the cap allows, the authors revise and the draft is reviewed again.

    `authors` are the completed results the review read (its dependencies); `run` executes a handoff
    in the plan's way. Returns the last review.
    """
    while review.status == "completed" and review.verdict is not None and review.verdict.verdict == "REVISE":
        if await ctx.config.runtime.decide(f"plan revise {review.id}", lambda: _plan_blocked(ctx)) is not None:
            break
        reasons = "\n".join(f"- {r}" for r in review.verdict.reasons) or "- (no reasons given)"
        revised = []
        for author in authors:
            seq = await next_seq(ctx, f"revise {author.id}")
            handoff = Handoff(
                id=f"h{seq}",
                seq=seq,
                run_id=ctx.config.run_id,
                target=author.target,
                call_id=author.call_id,
                task=f"{author.task}\n\nThe review asked for a revision:\n{reasons}\nRevise your answer accordingly.",
                context=f"{author.context}\n\nYour previous answer:\n{author.output}".strip(),
                retry_of=author.id,  # the new draft replaces the old one in the synthesis
            )
            revised.append(await run(handoff))
        if any(r.status != "completed" for r in revised):
            break
        authors = revised
        seq = await next_seq(ctx, f"review again {review.id}")
        context = "\n\n".join(f"Result of {r.call_id} ({r.target}):\n{r.output}" for r in revised)
        review = await run(
            Handoff(
                id=f"h{seq}",
                seq=seq,
                run_id=ctx.config.run_id,
                target=review.target,
                call_id=review.call_id,
                task=review.task,
                context=context,
                retry_of=review.id,
            )
        )
    return review


async def next_seq(ctx: RunContext, name: str) -> int:
    """The number of a handoff added while other branches run (a review's revisions): taken in whatever order the
    branches get here, so it is a decision of the runtime, and a replay numbers the handoff as the run did."""
    seq = await ctx.config.runtime.decide(f"seq {name}", lambda: ctx.last_seq + 1)
    ctx.last_seq = max(ctx.last_seq, seq)
    return seq


def _plan_blocked(ctx: RunContext) -> str | None:
    # The REVISE being answered is counted already (`count_revise`, from execution._attempt).
    if ctx.revision_cap_hit:
        return "revision_cap"
    if ctx.stopped_by is not None or not ctx.budget.can_hand_off():
        return "stopped"
    return None


def note_unpassed_reviews(ctx: RunContext) -> None:
    """A failure for each member whose last verdict (a reviewer's, or a quality gate's) is still REVISE."""
    superseded = {r.retry_of for r in ctx.records if r.retry_of}
    last: dict[str, HandoffRecord] = {}
    for r in ctx.records:
        if r.status == "completed" and r.verdict is not None and r.id not in superseded:
            last[r.target] = r
    for target, r in last.items():
        if r.verdict is not None and r.verdict.verdict == "REVISE":
            _explain_offline_gates(ctx, target, r.verdict.reasons)
            points = "; ".join(r.verdict.reasons) or "no reasons given"
            ctx.fail(
                "review_not_passed",
                target,
                f"the review did not pass: the last verdict was REVISE after {revisions_made(ctx)}; open points: "
                f"{points}",
                r.task,
                r.id,
            )


def _explain_offline_gates(ctx: RunContext, target: str, reasons: list[str]) -> None:
    """A note when quality gates failed on the offline backend's text: they judge what a model writes, and the
    offline stand-in never writes what they ask for, so such a run ends partial for that alone (a preset with
    gates, tried offline right after `mcp-team init --preset`)."""
    gated = [r for r in reasons if r.startswith("quality gate")]
    member = ctx.config.team.get(target)
    if not gated or member is None or ctx.config.models.for_member(target, member.model_role).provider != OFFLINE:
        return
    ctx.note(
        "offline gates",
        f"{target}'s quality gates judge a model's real text, and the offline backend writes stand-in text that "
        f"cannot pass them ({'; '.join(gated)}), so offline this run is partial for that alone. On a model the "
        "gates work as meant; to try the team offline without them, leave gates out of its entry in the team file.",
    )
