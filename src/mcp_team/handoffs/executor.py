"""Running handoffs: budgets, circuit breakers, duplicate detection, retries with a refined task.

`execute` runs one handoff to completion (retries included) and always returns a record;
`dispatch` runs several at once in a task group, so one failed branch never discards its
siblings' results. Both adaptive and planned runs go through here.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import anyio

from mcp_team.handoffs.budget import Breakers, Budget, FinalCall
from mcp_team.handoffs.prompts import FINALIZE_DESCRIPTION, REFINE_INSTRUCTIONS, SYNTHESIS_INSTRUCTIONS
from mcp_team.handoffs.schema import (
    Failure,
    Handoff,
    HandoffRecord,
    HandoffStatus,
    Plan,
    RunResult,
    RunSettings,
    RunStatus,
    UsageReport,
)
from mcp_team.llm import (
    SUPERVISOR,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    ModelSet,
    ToolDefinition,
    Usage,
    chat,
)
from mcp_team.specialists import Specialist, run_specialist
from mcp_team.telemetry import spans
from mcp_team.telemetry.attributes import HANDOFF_TASK, TOOL_CALL_ARGUMENTS, TOOL_CALL_RESULT

_PAYLOAD = {"task", "context", "expected_output"}

log = logging.getLogger("mcp_team.handoffs")

# Failures that a retry cannot fix.
_FINAL_ERRORS = {"budget_exhausted", "unavailable", "auth", "bad_request"}

FINALIZE_TOOL = ToolDefinition(
    name="finalize",
    description=FINALIZE_DESCRIPTION,
    input_schema={"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
)
_REFINE_TOOL = ToolDefinition(
    name="refine_task",
    description="Submit the rewritten task.",
    input_schema={"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]},
)


EventKind = Literal["plan_ready", "handoff_started", "handoff_finished", "synthesizing"]


@dataclass(frozen=True)
class RunEvent:
    """A step of a run, for progress displays. `record` is set for handoff events."""

    kind: EventKind
    message: str
    record: HandoffRecord | None = None
    started: int = 0
    finished: int = 0


EventSink = Callable[[RunEvent], Awaitable[None]]


def now() -> datetime:
    return datetime.now(UTC)


@dataclass
class RunContext:
    """Everything one run needs and everything it has done so far.

    State is written as work happens (never only at the end), so a deadline or a cancellation
    still leaves an accurate record of what finished.
    """

    request: str
    run_id: str
    team: Mapping[str, Specialist]
    models: ModelSet
    settings: RunSettings
    on_event: EventSink | None = None
    budget: Budget = field(init=False)
    breakers: Breakers = field(init=False)
    records: list[HandoffRecord] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    supervisor_usage: Usage = field(default_factory=Usage)
    plan: Plan | None = None
    stopped_by: str | None = None
    status: RunStatus = "running"
    answer: str = ""
    trace_id: str | None = None
    started_at: datetime = field(default_factory=now)
    ended_at: datetime | None = None
    revisions: int = 0
    repeats: int = 0
    _fingerprints: dict[tuple[str, str, str], HandoffRecord] = field(default_factory=dict)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        self.budget = Budget(self.settings.budgets)
        self.breakers = Breakers(self.settings.breaker_threshold)

    def next_id(self) -> str:
        return f"h{next(self._ids)}"

    async def emit(self, kind: EventKind, message: str, record: HandoffRecord | None = None) -> None:
        """Tell the progress sink; a sink that fails (e.g. a client gone away) never stops the run."""
        if self.on_event is not None:
            finished = sum(r.status != "running" for r in self.records)
            try:
                await self.on_event(RunEvent(kind, message, record, len(self.records), finished))
            except Exception:
                log.warning("progress report failed; the run goes on", exc_info=True)

    async def supervisor_call(self, request: ModelRequest, *, final: bool = False) -> ModelResponse:
        """A supervisor model call, charged to the run budget (the closing one may use the reserve)."""
        meter = FinalCall(self.budget) if final else self.budget
        response = await chat(self.models, SUPERVISOR, request, timeout=self.settings.call_timeout, meter=meter)
        self.supervisor_usage = self.supervisor_usage + response.usage
        return response

    def fail(
        self,
        kind: str,
        specialist: str,
        reason: str,
        task: str = "",
        handoff_id: str | None = None,
        recovered: bool = False,
    ) -> None:
        self.failures.append(
            Failure(
                kind=kind, specialist=specialist, task=task, reason=reason, handoff_id=handoff_id, recovered=recovered
            )
        )

    def result(self) -> RunResult:
        by_specialist: dict[str, Usage] = {"supervisor": self.supervisor_usage}
        for r in self.records:
            by_specialist[r.target] = by_specialist.get(r.target, Usage()) + r.usage
        total = sum(by_specialist.values(), Usage())
        return RunResult(
            answer=self.answer,
            status=self.status,
            handoffs=list(self.records),
            failures=list(self.failures),
            usage=UsageReport(total=total, by_specialist=by_specialist, model_calls=self.budget.model_calls),
            run_id=self.run_id,
            trace_id=self.trace_id,
            request=self.request,
            mode=self.settings.mode,
            plan=self.plan,
            stopped_by=self.stopped_by,
            started_at=self.started_at,
            ended_at=self.ended_at,
        )


async def dispatch(ctx: RunContext, handoffs: Sequence[Handoff]) -> list[HandoffRecord]:
    """Run handoffs concurrently; return their final records in the same order."""
    results: list[HandoffRecord | None] = [None] * len(handoffs)

    async def run(i: int, handoff: Handoff) -> None:
        results[i] = await execute(ctx, handoff)

    async with anyio.create_task_group() as tg:
        for i, handoff in enumerate(handoffs):
            tg.start_soon(run, i, handoff)
    return [r for r in results if r is not None]


async def execute(ctx: RunContext, handoff: Handoff, *, dedupe: bool = True) -> HandoffRecord:
    """Run one handoff, retrying a failure with a task the supervisor refines, up to the cap."""
    if dedupe and (earlier := _duplicate_of(ctx, handoff)) is not None:
        return _refuse_duplicate(ctx, handoff, earlier)
    if (refusal := _refusal(ctx, handoff)) is not None:
        return refusal
    original = handoff
    failed_ids: list[str] = []
    while True:
        record = await _attempt(ctx, handoff)
        if record.status != "failed":
            break
        failed_ids.append(record.id)
        retryable = record.error_type not in _FINAL_ERRORS and not ctx.breakers.is_open(handoff.target)
        if not retryable or handoff.attempt > ctx.settings.max_retries or not ctx.budget.take_handoff():
            break
        task = await _refine(ctx, handoff, record.error or "unknown error")
        handoff = handoff.model_copy(
            update={"id": ctx.next_id(), "task": task, "attempt": handoff.attempt + 1, "retry_of": record.id}
        )
    if record.status == "completed":
        for failure in ctx.failures:
            if failure.handoff_id in failed_ids:
                failure.recovered = True
        if dedupe:
            ctx._fingerprints[_fingerprint(original)] = record
    return record


def _fingerprint(handoff: Handoff) -> tuple[str, str, str]:
    return handoff.target, " ".join(handoff.task.lower().split()), " ".join(handoff.context.lower().split())


def _duplicate_of(ctx: RunContext, handoff: Handoff) -> HandoffRecord | None:
    return ctx._fingerprints.get(_fingerprint(handoff))


def _refuse_duplicate(ctx: RunContext, handoff: Handoff, earlier: HandoffRecord) -> HandoffRecord:
    ctx.repeats += 1
    reason = (
        f"identical to handoff {earlier.id}, which already completed; its result is repeated below. "
        f"Use it instead of handing the same task off again."
    )
    ctx.fail("duplicate_handoff", handoff.target, reason, handoff.task, handoff.id, recovered=True)
    if ctx.repeats >= ctx.settings.max_repeats:
        ctx.stopped_by = ctx.stopped_by or (
            f"the supervisor repeated the same handoff {ctx.repeats} times (loop detected)"
        )
    return not_run(ctx, handoff, "refused", "duplicate_handoff", reason, output=earlier.output)


def _refusal(ctx: RunContext, handoff: Handoff) -> HandoffRecord | None:
    """A record refusing the handoff before it starts, or None when it may run."""
    error_type = error = None
    if ctx.breakers.is_open(handoff.target):
        error_type = "circuit_open"
        error = (
            f"{handoff.target} failed {ctx.settings.breaker_threshold} times in a row; its circuit is open "
            f"for the rest of this run. Work around it or finalize without it."
        )
    elif ctx.team[handoff.target].returns_verdict and ctx.revisions > ctx.settings.max_revisions:
        # Each REVISE honoured is re-reviewed once; past the cap the latest draft stands.
        error_type = "revision_cap"
        error = (
            f"the revision cap ({ctx.settings.max_revisions}) is reached; finalize with the latest "
            f"draft and mention the open review points."
        )
    elif ctx.stopped_by is not None:
        error_type = "stopped"
        error = f"not started: the run is stopping ({ctx.stopped_by}). Finalize with what you have."
    elif not ctx.budget.take_handoff():
        error_type = "budget_exhausted"
        error = f"not started: {ctx.budget.exhausted}. Finalize with what you have."
        ctx.stopped_by = ctx.budget.exhausted
    if error_type is None or error is None:
        return None
    ctx.fail(error_type, handoff.target, error, handoff.task, handoff.id, recovered=error_type == "revision_cap")
    return not_run(ctx, handoff, "refused", error_type, error)


def not_run(
    ctx: RunContext, handoff: Handoff, status: HandoffStatus, error_type: str, error: str, output: str = ""
) -> HandoffRecord:
    """Record a handoff that was refused or skipped before it ran."""
    at = now()
    record = HandoffRecord(
        **handoff.model_dump(),
        status=status,
        started_at=at,
        ended_at=at,
        output=output,
        error=error,
        error_type=error_type,
    )
    ctx.records.append(record)
    return record


async def _attempt(ctx: RunContext, handoff: Handoff) -> HandoffRecord:
    specialist = ctx.team[handoff.target]
    record = HandoffRecord(**handoff.model_dump(), started_at=now())
    ctx.records.append(record)
    try:
        await ctx.emit("handoff_started", f"{handoff.target}: {handoff.task[:120]}", record)
        with spans.transfer_span(handoff.source, handoff.target, handoff.call_id, handoff.id, handoff.attempt) as span:
            spans.record_content(span, HANDOFF_TASK, lambda: handoff.task)
            spans.record_content(span, TOOL_CALL_ARGUMENTS, lambda: handoff.model_dump(include=_PAYLOAD))
            result = await run_specialist(
                specialist,
                handoff.task,
                ctx.models,
                context=handoff.context,
                expected_output=handoff.expected_output,
                meter=_HandoffMeter(ctx.budget, record),
                call_timeout=ctx.settings.call_timeout,
                agent_id=handoff.id,
            )
            spans.record_content(span, TOOL_CALL_RESULT, lambda: result.output if result.output else result.error)
            if result.status == "failed":
                spans.mark_error(span, result.error_type or "failed", message=result.error or "")
    except anyio.get_cancelled_exc_class():
        record.status, record.ended_at, record.error_type = "cancelled", now(), "cancelled"
        record.error = "cancelled before it finished"
        raise
    record.status = result.status
    record.ended_at = now()
    record.output, record.error, record.error_type = result.output, result.error, result.error_type
    record.turns, record.verdict = result.turns, result.verdict
    ctx.breakers.record(handoff.target, result.status == "completed")
    if result.status == "failed":
        ctx.fail(result.error_type or "failed", handoff.target, result.error or "", handoff.task, handoff.id)
    elif result.verdict is not None and result.verdict.verdict == "REVISE":
        ctx.revisions += 1
    status = "done" if result.status == "completed" else f"failed ({result.error_type})"
    await ctx.emit("handoff_finished", f"{handoff.target} {status}", record)
    return record


@dataclass
class _HandoffMeter:
    """Charges the run budget and keeps the handoff's own usage current, call by call, so a cancelled
    handoff still reports the tokens it spent."""

    budget: Budget
    record: HandoffRecord

    def before_call(self) -> None:
        self.budget.before_call()

    def after_call(self, usage: Usage) -> None:
        self.budget.after_call(usage)
        self.record.usage = self.record.usage + usage


async def _refine(ctx: RunContext, handoff: Handoff, error: str) -> str:
    """The supervisor rewrites a failed task using the error; the original task if it cannot."""
    message = (
        f"Specialist: {handoff.target}\n\nFailed task:\n{handoff.task}\n\nError:\n{error}\n\n"
        f"This will be attempt {handoff.attempt + 1} of {ctx.settings.max_retries + 1}."
    )
    request = ModelRequest(
        system=REFINE_INSTRUCTIONS,
        messages=[Message(role="user", content=message)],
        tools=[_REFINE_TOOL],
        max_tokens=1024,
        phase="refine",
    )
    try:
        response = await ctx.supervisor_call(request)
    except ModelError:
        return handoff.task
    for use in response.tool_uses:
        task = use.input.get("task")
        if use.name == "refine_task" and isinstance(task, str) and task.strip():
            return task
    return response.text.strip() or handoff.task


def _superseded(records: Sequence[HandoffRecord]) -> set[str]:
    """Ids of attempts that a retry replaced: only the last attempt of a task speaks for it."""
    return {r.retry_of for r in records if r.retry_of}


def describe_results(records: Sequence[HandoffRecord]) -> str:
    """The latest outcome per task, as the synthesizer reads it."""
    superseded = _superseded(records)
    parts = []
    for r in records:
        if r.status == "refused" or r.id in superseded:
            continue
        if r.status == "completed":
            parts.append(f"### {r.target} (completed): {r.task[:200]}\n{r.output}")
        else:
            parts.append(f"### {r.target} ({r.status}): {r.task[:200]}\n{r.error or ''}")
    return "\n\n".join(parts) or "(no results)"


async def synthesize(ctx: RunContext, how: str = "") -> str:
    """The closing answer from the results, with the synthesis prompt; a plain merge if no call is possible."""
    await ctx.emit("synthesizing", "synthesizing the answer")
    combine = f"How to combine the results:\n{how}\n\n" if how else ""
    message = f"Request:\n{ctx.request}\n\n{combine}Results:\n{describe_results(ctx.records)}"
    request = ModelRequest(
        system=SYNTHESIS_INSTRUCTIONS,
        messages=[Message(role="user", content=message)],
        tools=[FINALIZE_TOOL],
        phase="synthesize",
    )
    try:
        response = await ctx.supervisor_call(request, final=True)
    except ModelError as exc:
        ctx.fail(exc.kind, "supervisor", f"the closing synthesis failed: {exc.message}")
        return fallback_answer(ctx)
    for use in response.tool_uses:
        if use.name == "finalize" and isinstance(use.input.get("answer"), str):
            return str(use.input["answer"])
    return response.text or fallback_answer(ctx)


def fallback_answer(ctx: RunContext) -> str:
    """The best answer without a model: the completed results, as they are."""
    done = [r for r in ctx.records if r.status == "completed"]
    if not done:
        return "No specialist finished any work, so there is no answer."
    body = "\n\n".join(f"## {r.target}: {r.task[:120]}\n{r.output}" for r in done)
    return f"The supervisor could not write a closing synthesis; here are the finished results.\n\n{body}"


def missing_section(ctx: RunContext) -> str:
    """A plain list of what the answer lacks: every unrecovered failure and any early stop."""
    lines = []
    if ctx.stopped_by:
        lines.append(f"- The run stopped early: {ctx.stopped_by}.")
    superseded = _superseded(ctx.records)
    seen: set[object] = set()
    for f in ctx.failures:
        key = f.handoff_id or (f.specialist, f.kind, f.reason)
        if f.recovered or f.handoff_id in superseded or key in seen:
            continue
        seen.add(key)
        task = _short(f.task.split("\n", 1)[0]) if f.task else ""
        lines.append(f"- {f.specialist}" + (f' on "{task}"' if task else "") + f": {f.kind}: {f.reason}")
    return "Incomplete. This answer is missing:\n" + "\n".join(lines) if lines else ""


def _short(text: str, width: int = 160) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
