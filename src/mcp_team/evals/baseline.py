"""The single-agent baseline (`mcp-team eval --baseline single-agent`): the same cases on one agent that has
every specialist's tools and one prompt, run through the specialist loop, so the team's cost and latency
can be weighed against what it buys.

It is built from the engine's own pieces: a `Specialist` with all the tools, on the supervisor's
model (the stronger one: "just ask the big model" is the alternative a team must beat), with the
run's token budget. Routing expectations do not apply to it; it is held to the answer's checks.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence

from mcp_team.evals.runner import CaseRun, EvalPlan, check, failure, recording_to, tallied
from mcp_team.evals.suite import Case
from mcp_team.handoffs.budget import Budget
from mcp_team.llm.call import SUPERVISOR
from mcp_team.llm.recording import Recorder
from mcp_team.specialists import Specialist, run_specialist
from mcp_team.specialists.tools import Tool

NAME = "single_agent"

# Its own prompt: what the job may take (each member's one-line description), never the members' prompts, whose
# output formats (a reviewer's `VERDICT: PASS`) are for the team's engine and would skew the comparison.
_PROMPT = """\
You are one assistant doing the whole job alone. Do every part the request needs yourself, in the order it
needs them, using your tools where they help (for arithmetic, use a tool rather than your head), and check
your own work before you answer.

The kinds of work a request may take:
{parts}

Answer with the complete result itself, written for the person who asked: no preamble, no notes about
how you worked. Use only facts you are sure of; say plainly what you cannot do or do not know."""


def single_agent(specialists: Sequence[Specialist], max_turns: int = 12) -> Specialist:
    """One agent with every specialist's tools and a prompt of its own that names what each does."""
    tools: dict[str, Tool] = {}
    for s in specialists:
        for tool in s.tools:
            tools.setdefault(tool.name, tool)
    parts = "\n".join(f"- {s.description}" for s in specialists if not s.returns_verdict)
    return Specialist(
        name=NAME,
        description="Does the whole job alone, with every specialist's tools.",
        system_prompt=_PROMPT.format(parts=parts),
        model_role=SUPERVISOR,
        tools=tuple(tools.values()),
        max_turns=max_turns,
    )


async def run_single_case(plan: EvalPlan, case: Case, attempt: int) -> CaseRun:
    """One run of `case` on the single agent."""
    agent = single_agent(plan.specialists)
    started = time.perf_counter()
    try:
        models, tally = tallied(plan.models_for(case, attempt))  # a missing recording fails this case alone
        with contextlib.ExitStack() as stack:
            if plan.record is not None:
                path = stack.enter_context(recording_to(plan.record(case, attempt)))
                about = {"request": case.request, "single_agent": True}
                models = stack.enter_context(Recorder(path, models, about)).models
            result = await run_specialist(
                agent,
                case.request,
                models,
                meter=Budget(plan.settings.budgets),
                call_timeout=plan.settings.call_timeout,
            )
    except Exception as exc:  # a diverged replay: this case fails, the others go on
        return CaseRun(case, attempt, "error", error=failure(exc), seconds=time.perf_counter() - started)
    seconds = time.perf_counter() - started
    status = "complete" if result.status == "completed" else "failed"
    answer = result.output if result.status == "completed" else (result.error or "")
    checks = check(case.expect, status=status, answer=answer, routed=None, handoffs=0, cost=tally.cost_usd)
    return CaseRun(case, attempt, status, [], 0, tally.calls, tally.tokens, tally.cost_usd, seconds, answer, checks)
