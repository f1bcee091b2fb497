"""A judge for conflicting results: the synthesis names the conflicts, a `judge` member rules on each.

When the team has a judge (`RunSettings.judge`, a member's name), the closing answer's `finalize`
tool (the synthesis's, and the adaptive supervisor's) has a `conflicts` field: results that disagree
on a fact or a recommendation, each with the specialists' positions. Detecting them is the model's job.
The engine then hands each conflict to the judge (a normal member: its own prompt, model and turn and
token budgets, charged to the run), with the request, the positions and the full results, and asks the
synthesis again with the rulings, to follow them and say so. Each ruling is in the run's record
(`RunResult.conflicts`) and a `judge conflict-<n>` span. The judge is not offered to the supervisor
as a handoff: it only rules. A ruling's usage counts each of the judge's calls, one cut off once sent
too (its cost unknown), and a run cancelled while the judge rules keeps the ruling with what it spent.
"""

from __future__ import annotations

from typing import Any

import anyio
from pydantic import ValidationError

from mcp_team.handoffs.conflicts import Conflict, Ruling
from mcp_team.handoffs.context import RunContext
from mcp_team.llm import ModelResponse, ToolDefinition, Usage
from mcp_team.llm.call import Meter, MeterWrapper
from mcp_team.llm.text_blocks import json_objects
from mcp_team.llm.types import NO_USAGE
from mcp_team.specialists import run_specialist
from mcp_team.telemetry import spans

CONFLICTS_PROPERTY: dict[str, Any] = {
    "type": "array",
    "description": "Results that disagree on a fact or a recommendation; empty when none do. A judge rules on each "
    "before the answer is final.",
    "items": {
        "type": "object",
        "properties": {
            "about": {"type": "string", "description": "What they disagree on, in one line."},
            "positions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"specialist": {"type": "string"}, "claim": {"type": "string"}},
                    "required": ["specialist", "claim"],
                },
            },
        },
        "required": ["about", "positions"],
    },
}

RULINGS_HEADING = (
    "A judge ruled on the conflicts between these results. Follow each ruling, and say in the answer what the "
    "judge decided and why:"
)
CONFLICTS_INSTRUCTIONS = """
- If results disagree on a fact or a recommendation, list each disagreement in `conflicts` (what it is
  about, and each specialist's position) instead of picking a side: a judge rules on it first."""


def with_conflicts(tool: ToolDefinition) -> ToolDefinition:
    """`finalize` with the `conflicts` field, for a team that has a judge."""
    schema = dict(tool.input_schema)
    schema["properties"] = {**schema["properties"], "conflicts": CONFLICTS_PROPERTY}
    return tool.model_copy(update={"input_schema": schema})


def has_judge(ctx: RunContext) -> bool:
    judge = ctx.config.settings.judge
    return judge is not None and judge in ctx.config.team


def note_conflicts(ctx: RunContext, response: ModelResponse) -> None:
    """Keep the conflicts a `finalize` call reported, for `rule` (malformed entries are dropped)."""
    if not has_judge(ctx):
        return
    for use in response.tool_uses:
        if use.name != "finalize" or not isinstance(use.input.get("conflicts"), list):
            continue
        for item in use.input["conflicts"]:
            try:
                ctx.pending_conflicts.append(Conflict.model_validate(item))
            except ValidationError:
                continue


async def rule(ctx: RunContext) -> list[Ruling]:
    """The judge's ruling on each pending conflict, one handoff to the judge per conflict, each kept in
    `ctx.rulings` as it is made (a cancelled run keeps those, and the one it cut short)."""
    config = ctx.config
    assert config.settings.judge is not None
    judge = config.team[config.settings.judge]
    latest = {r.target: r for r in ctx.records if r.status == "completed"}
    rulings = []
    for n, conflict in enumerate(ctx.pending_conflicts, start=len(ctx.rulings) + 1):
        names = [p.specialist for p in conflict.positions]
        positions = "\n".join(f"- {p.specialist}: {p.claim}" for p in conflict.positions)
        task = (
            f"The team's results disagree about: {conflict.about}\n\nPositions:\n{positions}\n\n"
            f"The user's request was:\n{config.request}\n\nDecide which position holds (or neither), and why. "
            f"Start with `DECISION: <specialist name or neither>`, then your reasons."
        )
        context = "\n\n".join(f"Result of {name}:\n{latest[name].output}" for name in names if name in latest)
        attrs: dict[str, str | int] = {"mcp_team.judge.about": conflict.about[:200]}
        attrs["mcp_team.judge.specialists"] = ", ".join(names)
        meter = _JudgeMeter(ctx.budget)
        try:
            with spans.step_span("judge", f"conflict-{n}", attrs) as span:
                result = await run_specialist(
                    judge, task, config.models, context=context, meter=meter, call_timeout=config.settings.call_timeout,
                    agent_id=f"{config.run_id}/conflict-{n}",
                )  # fmt: skip
                if result.status == "failed":
                    spans.mark_error(span, result.error_type or "failed", message=result.error or "")
        except anyio.get_cancelled_exc_class():
            verdict = "the judge was cancelled before it ruled"
            ctx.rulings.append(Ruling(conflict=conflict, judge=judge.name, status="cancelled", verdict=verdict,
                                      usage=meter.usage))  # fmt: skip
            raise
        verdict = ruling_text(result.output) if result.status == "completed" else f"the judge failed: {result.error}"
        # The meter's usage, not the result's: the result sums only the calls that answered.
        ruling = Ruling(conflict=conflict, judge=judge.name, status=result.status, verdict=verdict, usage=meter.usage)
        rulings.append(ruling)
        ctx.rulings.append(ruling)
    ctx.pending_conflicts.clear()
    return rulings


class _JudgeMeter(MeterWrapper):
    """Charges `meter` (the run budget) and keeps the ruling's usage, call by call: a call cut off once sent
    counts too (its spend unknown, `llm.call.UNKNOWN_SPEND`), as a handoff's and the supervisor's do."""

    def __init__(self, meter: Meter) -> None:
        super().__init__(meter)
        self.usage = NO_USAGE

    def after_call(self, usage: Usage) -> None:
        self.meter.after_call(usage)
        self.usage = self.usage + usage


def ruling_text(output: str) -> str:
    """A judge's ruling as the synthesis reads it: `DECISION: <name>` then the reasons. A ruling written as JSON
    (`{"decision": ..., "reasons": ...}`, as a model that writes its steps as tool calls does) is read into that
    form; any other is kept as the judge wrote it."""
    for item in json_objects(output):
        decision = item.get("decision") or item.get("DECISION")
        if isinstance(decision, str) and decision.strip():
            why = item.get("reasons") or item.get("reason") or item.get("why") or ""
            reasons = "\n".join(f"- {r}" for r in why) if isinstance(why, list) else str(why)
            return f"DECISION: {decision.strip()}\n{reasons}".strip()
    return output


def rulings_text(rulings: list[Ruling]) -> str:
    lines = []
    for r in rulings:
        sides = " vs ".join(p.specialist for p in r.conflict.positions)
        lines.append(f"- {r.conflict.about} ({sides}): {r.verdict.strip()}")
    return "\n".join(lines)
