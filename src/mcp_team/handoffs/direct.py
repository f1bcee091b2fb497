"""A task handed straight to one specialist (its own MCP tool, `Team.ask`), run as a one-handoff run.

It is a run like any other, so it leaves what a run leaves: a run id, a record with its one handoff
(usage and cost included) for `on_finish`, and a trace whose root is the supervisor's span, so a trace
file is written for it too. No supervisor model is called: the caller chose the specialist and the
task, so a failure is not retried with a rewritten task (`max_retries` 0).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import anyio

from mcp_team.handoffs.context import RunConfig, RunContext, now
from mcp_team.handoffs.execution import execute
from mcp_team.handoffs.runtime import EPHEMERAL
from mcp_team.handoffs.schema import Handoff, HandoffRecord, RunResult
from mcp_team.specialists import SpecialistResult
from mcp_team.telemetry import spans

if TYPE_CHECKING:
    from mcp_team.handoffs.schema import RunSettings
    from mcp_team.llm import ModelSet
    from mcp_team.specialists import Specialist


async def ask(
    by_name: Mapping[str, Specialist],
    models: ModelSet,
    settings: RunSettings,
    name: str,
    task: str,
    context: str = "",
    *,
    on_finish: Callable[[RunResult], None] | None = None,
    run_id: str | None = None,
) -> SpecialistResult:
    """Run `task` on the specialist `name` as a one-handoff run; its result, the run's record to `on_finish`."""
    run_id = run_id or uuid.uuid4().hex
    handoff = Handoff(
        id="h1", seq=1, run_id=run_id, source="client", target=name, call_id="ask", task=task, context=context
    )
    provider = models.for_member(name, by_name[name].model_role).provider
    with spans.conversation(run_id), spans.agent_span("supervisor", agent_id=run_id, provider=provider) as span:
        config = RunConfig(
            request=task,
            run_id=run_id,
            team=by_name,
            models=models,
            settings=settings.model_copy(update={"max_retries": 0}),
            runtime=EPHEMERAL,  # outside any durable workflow, as the tool call itself is
            trace_id=spans.current_trace_id(),
        )
        ctx = RunContext(config)
        ctx.last_seq = 1
        ctx.budget.charge_handoff()
        try:
            record = await execute(ctx, handoff)
        except anyio.get_cancelled_exc_class():
            ctx.status, ctx.ended_at, ctx.answer = "cancelled", now(), "The call was cancelled."
            if on_finish is not None:
                on_finish(ctx.result())
            raise
        ctx.ended_at = now()
        ctx.status = "complete" if record.status == "completed" else "failed"
        ctx.answer = record.output if record.status == "completed" else f"No answer: {record.error}"
        u = record.usage
        spans.record_usage(
            span, u.input_tokens, u.output_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens
        )
        if ctx.status == "failed":
            spans.mark_error(span, "run_failed", message=record.error or "failed")
        result = ctx.result()
    if on_finish is not None:
        on_finish(result)
    return _specialist_result(record)


def _specialist_result(record: HandoffRecord) -> SpecialistResult:
    return SpecialistResult(
        specialist=record.target,
        status="completed" if record.status == "completed" else "failed",
        output=record.output,
        error=record.error,
        error_type=record.error_type,
        turns=record.turns,
        usage=record.usage,
        verdict=record.verdict,
    )
