"""Admission of handoffs: whether one may start now (the handoff budget, circuit breakers, the revision cap, a
stopping run, a repeat of a completed handoff), the record of one that may not, and what the result says when a
fan-out was cut by the budget or ran in waves.

`admit` decides at once (a supervisor turn's handoffs, a plan's first tasks); `execute` (handoffs.execution)
asks `refusal_of` through `Runtime.decide` for a start that waited for other branches, and `retry_blocked` before
a retry. `refusal_of` and `fallback_of` read the run's state and change nothing; `settle` applies a decision.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from mcp_team.handoffs.context import RunContext, now
from mcp_team.handoffs.review import revisions_made
from mcp_team.handoffs.schema import Handoff, HandoffRecord, HandoffStatus


class Refusal(BaseModel, frozen=True, defer_build=True):
    """Why a handoff may not start: `kind` becomes its `error_type`, `reason` goes back to the supervisor."""

    kind: str
    reason: str


def note_fan_out(ctx: RunContext, what: str, records: Sequence[HandoffRecord | None], width: int) -> None:
    """Say in the result when a fan-out was cut by the handoff budget, or ran in waves for the concurrency limit.

    `records` holds what became of each of `what` so far (None: not settled yet); `width` is how
    many were ready to run at once.
    """
    refusals = [r.error_type for r in records if r is not None and r.status == "refused"]
    if "budget_exhausted" in refusals:  # the first refusal stops the run; the rest are refused as "stopped"
        refused = sum(kind in ("budget_exhausted", "stopped") for kind in refusals)
        limit = ctx.config.settings.budgets.max_handoffs
        ctx.note(
            "handoff_budget",
            f"{refused} of the {len(records)} {what} were not started: the handoff budget ({limit}, retries "
            f"included) ran out. Raise max_handoffs to run them all (Budgets(max_handoffs=...) in Python, "
            f"--max-handoffs on the command line, the team file's [supervisor.budgets] or run_team's max_handoffs).",
        )
    if width > (limit := ctx.config.models.max_concurrency):
        ctx.note(
            "concurrency",
            f"{width} {what} were ready to run at once, but at most {limit} model calls run at a time, so they "
            f"ran in waves. Raise max_concurrency to run them together (ModelSet(max_concurrency=...) in Python, "
            f"MCP_TEAM_MAX_CONCURRENCY, or the team file's [supervisor] max_concurrency).",
        )


def admit(
    ctx: RunContext, handoff: Handoff, *, dedupe: bool = True, fingerprint: tuple[str, str, str] | None = None
) -> HandoffRecord | None:
    """Decide now whether `handoff` may start: None if so (the handoff budget is charged), else its refusal record.

    For a start whose moment does not depend on other branches (the handoffs of a supervisor turn,
    a plan's first tasks); a start that waited for other branches uses `execute(contested=True)`.
    `fingerprint`: the handoff's, when the caller has it already (see `dispatch`).
    """
    if dedupe and (earlier := ctx.fingerprints.get(fingerprint or fingerprint_of(handoff))) is not None:
        return _refuse_duplicate(ctx, handoff, earlier)
    return settle(ctx, handoff, refusal_of(ctx, handoff))


def fallback_of(ctx: RunContext, name: str) -> str | None:
    """The specialist that takes `name`'s handoffs now: its fallback once its circuit is open (if that one's
    circuit is closed), else None."""
    fallback = ctx.config.team[name].fallback
    if fallback is None or fallback not in ctx.config.team or not ctx.breakers.is_open(name):
        return None
    return None if ctx.breakers.is_open(fallback) else fallback


def retry_blocked(ctx: RunContext, handoff: Handoff) -> str | None:
    """What stops a retry of a failed handoff now: `circuit_open`, `handoff_budget`, or None."""
    if ctx.breakers.is_open(handoff.target) and fallback_of(ctx, handoff.target) is None:
        return "circuit_open"
    if not ctx.budget.can_hand_off():
        return "handoff_budget"
    return None


def fingerprint_of(handoff: Handoff) -> tuple[str, str, str]:
    return handoff.target, " ".join(handoff.task.lower().split()), " ".join(handoff.context.lower().split())


def _refuse_duplicate(ctx: RunContext, handoff: Handoff, earlier: HandoffRecord) -> HandoffRecord:
    ctx.repeats += 1
    reason = (
        f"identical to handoff {earlier.id}, which already completed; its result is repeated below. "
        f"Use it instead of handing the same task off again."
    )
    ctx.fail("duplicate_handoff", handoff.target, reason, handoff.task, handoff.id, recovered=True)
    if ctx.repeats >= ctx.config.settings.max_repeats:
        ctx.stopped_by = ctx.stopped_by or (
            f"the supervisor repeated the same handoff {ctx.repeats} times (loop detected)"
        )
    return not_run(ctx, handoff, "refused", "duplicate_handoff", reason, output=earlier.output)


def refusal_of(ctx: RunContext, handoff: Handoff) -> Refusal | None:
    """Why `handoff` may not start now, or None when it may. Reads the run's state, changes nothing."""
    settings = ctx.config.settings
    if ctx.breakers.is_open(handoff.target) and fallback_of(ctx, handoff.target) is None:
        return Refusal(
            kind="circuit_open",
            reason=f"{handoff.target} failed {settings.breaker_threshold} times in a row; its circuit is open "
            f"for the rest of this run. Work around it or finalize without it.",
        )
    if ctx.config.team[handoff.target].returns_verdict and ctx.revision_cap_hit:
        # Each REVISE honoured is re-reviewed once; past the cap the latest draft stands.
        return Refusal(
            kind="revision_cap",
            reason=f"the revision cap is reached after {revisions_made(ctx)}; finalize with the latest draft and "
            "mention the open review points.",
        )
    if ctx.stopped_by is not None:
        return Refusal(
            kind="stopped",
            reason=f"not started: the run is stopping ({ctx.stopped_by}). Finalize with what you have.",
        )
    if not ctx.budget.can_hand_off():
        exhausted = ctx.budget.exhausted or f"the handoff budget ({settings.budgets.max_handoffs}) was used up"
        return Refusal(kind="budget_exhausted", reason=f"not started: {exhausted}. Finalize with what you have.")
    return None


def settle(ctx: RunContext, handoff: Handoff, refusal: Refusal | None) -> HandoffRecord | None:
    """Apply an admission decision: charge the handoff budget, or record the refusal."""
    if refusal is None:
        ctx.budget.charge_handoff()
        return None
    if refusal.kind == "budget_exhausted":
        ctx.stopped_by = ctx.stopped_by or ctx.budget.handoffs_used_up()
    recovered = refusal.kind == "revision_cap"  # a decision, not lost work
    ctx.fail(refusal.kind, handoff.target, refusal.reason, handoff.task, handoff.id, recovered=recovered)
    return not_run(ctx, handoff, "refused", refusal.kind, refusal.reason)


def not_run(
    ctx: RunContext, handoff: Handoff, status: HandoffStatus, error_type: str, error: str, output: str = ""
) -> HandoffRecord:
    """Record a handoff that was refused or skipped before it ran."""
    at = now()
    record = HandoffRecord.model_validate(
        {
            **handoff.__dict__,
            "status": status,
            "started_at": at,
            "ended_at": at,
            "output": output,
            "error": error,
            "error_type": error_type,
        }
    )
    ctx.records.append(record)
    return record
