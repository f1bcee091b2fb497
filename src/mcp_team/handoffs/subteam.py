"""Teams inside teams: a member that is itself a team, handed off to like any specialist.

A `SubTeam` is a `Specialist` (so it has a handoff tool, an MCP tool and a prompt like every member)
that carries its own members and run settings. Handing off to it runs a sub-run: its own supervisor
(adaptive or planned), its own handoffs, its own synthesis, on the parent's models, in the parent's
trace (its `invoke_agent` span sits under the parent's handoff span) and with a budget carved out of
what the parent has left. Every call and handoff of the sub-run is charged to the parent too, so the
parent's limits hold over the whole tree. Its record nests in the parent's handoff (`subrun`), and
its progress is named by path (`research_team/researcher`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from mcp_team.handoffs.budget import Budget
from mcp_team.handoffs.context import EventSink, RunConfig, RunContext, RunEvent, now
from mcp_team.handoffs.schema import Budgets, Handoff, RunResult, RunSettings
from mcp_team.llm import Usage
from mcp_team.specialists import Specialist, SpecialistResult, handoff_message
from mcp_team.telemetry import spans

T = TypeVar("T")


class SubTeam(Specialist):
    """A member that is a team: `members` and `settings` are its own; `description` routes to it."""

    members: tuple[Specialist, ...]
    settings: RunSettings = RunSettings()


@dataclass
class TreeBudget(Budget):
    """A sub-run's budget: its own limits, and every charge also made to the parent's (which keeps its reserve)."""

    parent: Budget | None = None

    def can_hand_off(self) -> bool:
        return super().can_hand_off() and (self.parent is None or self.parent.can_hand_off())

    def charge_handoff(self) -> None:
        super().charge_handoff()
        if self.parent is not None:
            self.parent.charge_handoff()

    @property
    def chain(self) -> tuple[Budget, ...]:
        # A call of the sub-run is admitted by every budget up the tree; the parents keep their closing answer's.
        return (self, *(self.parent.chain if self.parent is not None else ()))

    def after_call(self, usage: Usage) -> None:
        super().after_call(usage)
        if self.parent is not None:
            self.parent.after_call(usage)


def carve(ctx: RunContext, own: Budgets) -> Budgets:
    """The sub-run's limits: its own, cut to what the parent has left."""
    parent = ctx.budget
    left = (ctx.config.deadline_at - now()).total_seconds()
    return Budgets(
        max_handoffs=max(min(own.max_handoffs, parent.handoffs_left), 1),
        max_model_calls=max(min(own.max_model_calls, parent.limits.max_model_calls - parent.model_calls - 1), 2),
        max_tokens=max(min(own.max_tokens, _tokens_left(parent)), 1),
        deadline_seconds=max(min(own.deadline_seconds, left), 0.001),
        max_cost=_cost_left(own.max_cost, parent),
    )


def _tokens_left(parent: Budget) -> int:
    """What the parent can give: what is left of it, less what its calls in flight and its closing answer hold."""
    return parent.limits.max_tokens - parent.usage.total_tokens - parent.reserved_tokens - parent.closing_tokens


def _cost_left(own: float | None, parent: Budget) -> float | None:
    if parent.limits.max_cost is None:
        return own
    left = max(parent.limits.max_cost - parent.cost_usd - parent.reserved_cost, 1e-9)
    return left if own is None else min(own, left)


async def run_subteam(ctx: RunContext, team: SubTeam, handoff: Handoff) -> tuple[SpecialistResult, RunResult]:
    """Run `handoff` through `team` as a sub-run of `ctx`; the result as a specialist's, and the sub-run's record."""
    from mcp_team.handoffs.orchestration import orchestrate  # the sub-run is a run: the same orchestration

    settings = team.settings.model_copy(update={"budgets": carve(ctx, team.settings.budgets)})
    child = RunContext(
        RunConfig(
            request=handoff_message(handoff.task, handoff.context, handoff.expected_output),
            run_id=f"{ctx.config.run_id}/{handoff.id}",
            team={m.name: m for m in team.members},
            models=ctx.config.models,
            settings=settings,
            on_event=_forward(ctx, team.name, handoff.id),
            runtime=ctx.config.runtime,  # its branches' keys start with its own run id (`execution.branch_key`)
            approve=ctx.config.approve,
            trace_id=ctx.config.trace_id,  # one trace: its spans sit under the parent's handoff span
        )
    )
    child.use_budget(TreeBudget(settings.budgets, parent=ctx.budget))
    with spans.agent_span(team.name, description=team.description, agent_id=child.config.run_id):
        await orchestrate(child)
    child.ended_at = now()
    record = child.result()
    usage = record.usage.total
    if child.status == "failed":
        # A budget that ran out is the tree's: retrying the team cannot fix it.
        kind = "budget_exhausted" if ctx.budget.exhausted or child.budget.exhausted else "subteam_failed"
        result = SpecialistResult(
            specialist=team.name, status="failed", output=child.answer, error=child.answer, error_type=kind,
            usage=usage,
        )  # fmt: skip
    else:
        result = SpecialistResult(specialist=team.name, status="completed", output=child.answer, usage=usage)
    return result, record


def _forward(ctx: RunContext, name: str, handoff_id: str) -> EventSink:
    """The sub-run's events as the parent's, named by path; counts add to the parent's so progress only grows."""

    async def on_event(event: RunEvent) -> None:
        parent_sink = ctx.config.on_event
        if parent_sink is None:
            return
        record = event.record
        if record is not None:
            record = record.model_copy(update={"target": f"{name}/{record.target}", "id": f"{handoff_id}/{record.id}"})
        finished = sum(r.status != "running" for r in ctx.records)
        await parent_sink(
            RunEvent(
                event.kind,
                f"{name}/{event.message}",
                record,
                len(ctx.records) + event.started,
                finished + event.finished,
                ctx.snapshot,
                ctx.usage,
            )
        )

    return on_event
