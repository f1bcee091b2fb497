"""Run state: what one run is started with (`RunConfig`: request, team, models, settings, runtime, sinks;
frozen) and what it has done so far (`RunContext`: budget, records, failures, status, answer, plan...).

`RunContext` is written as work happens, never only at the end, so a deadline or a cancellation
still leaves an accurate record of what finished. `RunEvent`s tell a progress display about it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

import anyio

from mcp_team.handoffs.budget import Breakers, Budget, FinalCall
from mcp_team.handoffs.checkpoints import Approver, CheckpointRecord, Stop
from mcp_team.handoffs.conflicts import Conflict, Ruling
from mcp_team.handoffs.runtime import EPHEMERAL, Runtime
from mcp_team.handoffs.schema import (
    Failure,
    HandoffRecord,
    Plan,
    RunResult,
    RunSettings,
    RunStatus,
    UsageReport,
)
from mcp_team.llm import SUPERVISOR, ModelError, ModelRequest, ModelResponse, ModelSet, Usage, chat
from mcp_team.llm.call import TRANSIENT, Meter, MeterWrapper
from mcp_team.llm.types import NO_USAGE, no_usage
from mcp_team.specialists import Specialist

log = logging.getLogger("mcp_team.handoffs")

SUPERVISOR_RETRIES = 2  # on top of the SDK's own retries, which an outage or a stuck call outlasts
RETRY_BACKOFF = 0.5  # seconds before the first retry, doubled for each next one

EventKind = Literal[
    "run_started", "plan_ready", "handoff_started", "handoff_finished", "synthesizing", "checkpoint", "waiting"
]


@dataclass(frozen=True)
class RunEvent:
    """A step of a run, for progress displays. `record` is set for handoff events; `snapshot` builds the
    run's record as it stands at this step (for live views; built only when called); `usage` what the run has
    spent so far (read when called: a record written later shows the spend at that moment)."""

    kind: EventKind
    message: str
    record: HandoffRecord | None = None
    started: int = 0
    finished: int = 0
    snapshot: Callable[[], RunResult] | None = None
    usage: Callable[[], UsageReport] | None = None


EventSink = Callable[[RunEvent], Awaitable[None]]


def now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """What one run is started with, fixed for its whole life: the request and its identity, the team, its
    models and settings, what executes it, and where it reports (progress, a person at checkpoints)."""

    request: str
    run_id: str
    team: Mapping[str, Specialist]
    models: ModelSet
    settings: RunSettings
    on_event: EventSink | None = None
    runtime: Runtime = EPHEMERAL
    approve: Approver | None = None  # asks a person at checkpoints (handoffs/checkpoints.py)
    started_at: datetime = field(default_factory=now)
    resumed_at: datetime | None = None  # a run resumed after a stop: its deadline counts from then
    trace_id: str | None = None

    @property
    def workers(self) -> list[Specialist]:
        """The members the supervisor hands work to: all but the judge, which only rules on conflicts."""
        return [s for s in self.team.values() if s.name != self.settings.judge]

    @property
    def deadline_at(self) -> datetime:
        """When the run's wall-clock budget ends: `deadline_seconds` after it started, or after it resumed (a
        deadline counted from the first start would end a run resumed late before it replayed its finished work)."""
        return (self.resumed_at or self.started_at) + timedelta(seconds=self.settings.budgets.deadline_seconds)


@dataclass
class RunContext:
    """One run as it goes: what it was started with (`config`, frozen) and what it has done so far (the rest,
    written as work happens)."""

    config: RunConfig
    budget: Budget = field(init=False)
    breakers: Breakers = field(init=False)
    records: list[HandoffRecord] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    supervisor_usage: Usage = field(default_factory=no_usage)
    plan: Plan | None = None
    stopped_by: str | None = None
    status: RunStatus = "running"
    answer: str = ""
    ended_at: datetime | None = None
    revisions: int = 0  # granted: see handoffs.review
    revision_cap_hit: bool = False  # a reviewer asked for a revision past the cap
    repeats: int = 0
    fingerprints: dict[tuple[str, str, str], HandoffRecord] = field(default_factory=dict)
    last_seq: int = 0  # the number of the run's latest handoff
    notes: dict[str, str] = field(default_factory=dict)  # by topic: the first one of each is kept
    checkpoints: list[CheckpointRecord] = field(default_factory=list)
    checkpoint_stop: Stop | None = None  # set when a checkpoint ended the run
    pending_conflicts: list[Conflict] = field(default_factory=list)  # reported by finalize, not judged yet
    rulings: list[Ruling] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.use_budget(Budget(self.config.settings.budgets))
        self.breakers = Breakers(self.config.settings.breaker_threshold)

    def use_budget(self, budget: Budget) -> None:
        """Charge the run's calls to `budget`; its calls' waits for a rate limit are told as progress."""
        self.budget = budget
        budget.on_wait = functools.partial(self.emit, "waiting")

    async def emit(self, kind: EventKind, message: str, record: HandoffRecord | None = None) -> None:
        """Tell the progress sink; a sink that fails (e.g. a client gone away) never stops the run."""
        if (on_event := self.config.on_event) is not None:
            finished = sum(r.status != "running" for r in self.records)
            try:
                await on_event(RunEvent(kind, message, record, len(self.records), finished, self.snapshot, self.usage))
            except Exception:
                log.warning("progress report failed; the run goes on", exc_info=True)

    async def supervisor_call(self, request: ModelRequest, *, final: bool = False) -> ModelResponse:
        """A supervisor (or planner) model call, charged to the run budget (the closing one may use the
        reserve). A transient failure (429, 5xx, 529, timeout, connection) is retried with backoff, as a
        specialist's failed handoff is: one such error of the model that steers the run must not end it.
        Raises the last `ModelError` when the retries run out, or `BudgetExhausted`."""
        meter = _SupervisorMeter(FinalCall(self.budget) if final else self.budget, self)
        models, timeout = self.config.models, self.config.settings.call_timeout
        for attempt in range(SUPERVISOR_RETRIES + 1):
            try:
                response = await chat(models, SUPERVISOR, request, timeout=timeout, meter=meter)
            except ModelError as exc:
                if exc.kind not in TRANSIENT or attempt == SUPERVISOR_RETRIES:
                    raise
                log.warning("the %s's model call failed (%s); retrying: %s", request.member, exc.kind, exc.message)
                await anyio.sleep(RETRY_BACKOFF * 2**attempt)
                continue
            return response
        raise AssertionError("unreachable: the last attempt returns or raises")

    def fail(
        self,
        kind: str,
        specialist: str,
        reason: str,
        task: str = "",
        handoff_id: str | None = None,
        recovered: bool = False,
    ) -> Failure:
        """Record a failure; returned, for a caller that marks it recovered once later work recovers it."""
        failure = Failure(
            kind=kind, specialist=specialist, task=task, reason=reason, handoff_id=handoff_id, recovered=recovered
        )
        self.failures.append(failure)
        return failure

    def note(self, topic: str, text: str) -> None:
        """Tell the caller something that is not a failure (see `RunResult.notes`), once per topic."""
        self.notes.setdefault(topic, text)

    @property
    def stop_reason(self) -> str | None:
        """Why the run wound down early, if it did: a decision of the run, else a budget that ran out."""
        return self.stopped_by or self.budget.exhausted

    def completed(self) -> bool:
        """Whether any handoff finished its work."""
        return any(r.status == "completed" for r in self.records)

    def snapshot(self) -> RunResult:
        """The record as it stands now, copied: the live records keep changing after it is taken."""
        return self.result().model_copy(deep=True)

    def usage(self) -> UsageReport:
        """What the run has spent so far: every finished model call, the supervisor's and each member's."""
        by_specialist: dict[str, Usage] = {"supervisor": self.supervisor_usage}
        for r in self.records:
            by_specialist[r.target] = by_specialist.get(r.target, NO_USAGE) + r.usage
        for ruling in self.rulings:
            by_specialist[ruling.judge] = by_specialist.get(ruling.judge, NO_USAGE) + ruling.usage
        total = sum(by_specialist.values(), NO_USAGE)
        return UsageReport(total=total, by_specialist=by_specialist, model_calls=self.budget.model_calls)

    def result(self) -> RunResult:
        return RunResult(
            answer=self.answer,
            status=self.status,
            handoffs=list(self.records),
            failures=list(self.failures),
            usage=self.usage(),
            run_id=self.config.run_id,
            trace_id=self.config.trace_id,
            request=self.config.request,
            mode=self.config.settings.mode,
            plan=self.plan,
            stopped_by=self.stop_reason,
            notes=[
                *self.notes.values(),
                *(f"A fallback model answered the supervisor: {n}." for n in dict.fromkeys(self.budget.fallbacks)),
                *self.budget.call_notes(),
            ],
            started_at=self.config.started_at,
            ended_at=self.ended_at,
            checkpoints=list(self.checkpoints),
            conflicts=list(self.rulings),
        )


class _SupervisorMeter(MeterWrapper):
    """Charges `meter` (the run budget) and keeps the supervisor's usage current, call by call: a call cut off
    once sent counts too (its spend unknown, `llm.call.UNKNOWN_SPEND`)."""

    def __init__(self, meter: Meter, ctx: RunContext) -> None:
        super().__init__(meter)
        self.ctx = ctx

    def after_call(self, usage: Usage) -> None:
        self.meter.after_call(usage)
        self.ctx.supervisor_usage = self.ctx.supervisor_usage + usage
