"""Running an eval suite: every case (and every repeat) through the team, concurrently within the model
concurrency limit, each run checked against its case's expectations.

Each run's model calls, tokens and cost are counted by a wrapper around its models (`Tally`), so the
numbers are the run's own even while other cases share the same models, and a single agent (see
`evals.baseline`) is counted the same way.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from mcp_team.errors import ConfigError, McpTeamError
from mcp_team.evals.recordings import record_run, run_replayed
from mcp_team.evals.suite import Case, Expect, Suite
from mcp_team.handoffs import RunResult, RunSettings, Team
from mcp_team.handoffs.schema import Mode
from mcp_team.llm import Model, ModelRequest, ModelResponse, ModelSet
from mcp_team.llm.cost import call_cost
from mcp_team.llm.wrappers import WrapperModel, map_models
from mcp_team.specialists import Specialist


@dataclass
class Tally:
    """What one run's model calls added up to."""

    calls: int = 0
    tokens: int = 0
    cost_usd: float | None = None  # None: no call was priced (offline, a local server)


class TallyModel(WrapperModel):
    def __init__(self, wrapped: Model, tally: Tally) -> None:
        super().__init__(wrapped)
        self.tally = tally

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.tally.calls += 1
        response = await self.wrapped.complete(request)
        self.tally.tokens += response.usage.total_tokens
        if (cost := call_cost(self, response)) is not None:
            self.tally.cost_usd = (self.tally.cost_usd or 0.0) + cost
        return response


def tallied(models: ModelSet) -> tuple[ModelSet, Tally]:
    tally = Tally()
    return map_models(models, lambda model: TallyModel(model, tally)), tally


@dataclass(frozen=True)
class Check:
    what: str
    passed: bool
    detail: str = ""


@dataclass
class CaseRun:
    """One run of one case, and how it measured up."""

    case: Case
    attempt: int
    status: str  # the run's status, or `error` when it could not run (e.g. a replay diverged)
    routed: list[str] = field(default_factory=list)  # specialists that ran, by their first call
    handoffs: int = 0
    model_calls: int = 0
    tokens: int = 0
    cost_usd: float | None = None
    seconds: float = 0.0
    answer: str = ""
    checks: list[Check] = field(default_factory=list)
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and all(c.passed for c in self.checks)

    @property
    def answer_passed(self) -> bool:
        """Whether the checks of the answer (status, text, cost) passed: what a single agent is held to."""
        return self.error is None and all(c.passed for c in self.checks if c.what in ANSWER_CHECKS)

    @property
    def routed_right(self) -> bool | None:
        """Whether the routing checks passed; None when the case has none (or the run is a single agent's)."""
        routing = [c for c in self.checks if c.what not in ANSWER_CHECKS]
        if self.error is not None:
            return False if self.case.expect.routing() else None
        return all(c.passed for c in routing) if routing else None

    def failures(self) -> list[str]:
        if self.error is not None:
            return [self.error]
        return [f"{c.what}: {c.detail}" for c in self.checks if not c.passed]

    def report(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "passed": self.passed,
            "status": self.status,
            "routed": self.routed,
            "handoffs": self.handoffs,
            "model_calls": self.model_calls,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "seconds": round(self.seconds, 3),
            "checks": [{"check": c.what, "passed": c.passed, "detail": c.detail} for c in self.checks],
            "error": self.error,
            "answer": self.answer,
        }


ANSWER_CHECKS = ("status", "contains", "matches", "max_cost_usd")


def check(
    expect: Expect, *, status: str, answer: str, routed: Sequence[str] | None, handoffs: int, cost: float | None
) -> list[Check]:
    """Each expectation, checked. `routed` None: a single agent, to which routing does not apply."""
    checks: list[Check] = []

    def add(what: str, passed: bool, detail: str) -> None:
        checks.append(Check(what, passed, detail))

    if expect.status != "any":
        add("status", status == expect.status, f"{status} (expected {expect.status})")
    for text in expect.contains:
        has = text.lower() in answer.lower()
        add("contains", has, f"the answer {'has' if has else 'lacks'} {text!r}")
    for pattern in expect.matches:
        found = re.search(pattern, answer) is not None
        add("matches", found, f"the answer {'matches' if found else 'does not match'} {pattern!r}")
    if expect.max_cost_usd is not None:
        limit = expect.max_cost_usd
        if cost is None:
            add("max_cost_usd", True, "not checked: no call of this backend has a price")
        else:
            add("max_cost_usd", cost <= limit, f"${cost:.4f} (at most ${limit:g})")
    if routed is None:
        return checks
    for name in expect.called:
        add("called", name in routed, f"{name} was {'called' if name in routed else 'not called'}")
    for name in expect.not_called:
        add("not_called", name not in routed, f"{name} was {'called' if name in routed else 'not called'}")
    if expect.only:
        extra = [name for name in routed if name not in expect.called]
        add("only", not extra, f"also called: {', '.join(extra)}" if extra else "no one else was called")
    if expect.order:
        firsts = [name for name in routed if name in expect.order]
        seen, wanted = " → ".join(firsts) or "none", " → ".join(expect.order)
        add("order", firsts == list(expect.order), f"first calls in the order {seen} (expected {wanted})")
    if expect.max_handoffs is not None:
        add("max_handoffs", handoffs <= expect.max_handoffs, f"{handoffs} (at most {expect.max_handoffs})")
    return checks


def routed_of(result: RunResult) -> tuple[list[str], int]:
    """The specialists that ran, by their first call, and how many handoffs ran (retries included)."""
    ran = [
        h for h in sorted(result.handoffs, key=lambda h: (h.seq, h.attempt)) if h.status not in ("refused", "skipped")
    ]
    return list(dict.fromkeys(h.target for h in ran)), len(ran)


ModelsFor = Callable[[Case, int], ModelSet]
"""The models a case's run uses (attempt from 1): the same set for every case, or a replay per case."""


RunTeam = Callable[[Team, str, Mode | None, Path | None], Awaitable[RunResult]]
"""Runs `request` through `team` (recorded to the path, when one is given) and returns its result: the eval command
goes through the run service (cli's eval); a plain call by default (`run_directly`)."""


async def run_directly(team: Team, request: str, mode: Mode | None, record: Path | None) -> RunResult:
    if record is not None:
        return await record_run(team, record, request, mode=mode)
    return await run_replayed(team, request, mode=mode)


@dataclass
class EvalPlan:
    suite: Suite
    specialists: Sequence[Specialist]
    settings: RunSettings
    models_for: ModelsFor
    repeat: int = 1
    concurrency: int = 8
    record: Callable[[Case, int], str] | None = None  # where to record a case's run, if anywhere
    run_team: RunTeam = run_directly


async def run_team_case(plan: EvalPlan, case: Case, attempt: int) -> CaseRun:
    """One run of `case` through the team."""
    mode = case.mode or plan.suite.mode
    started = time.perf_counter()
    try:
        # Inside the `try`: a case whose recording is missing or unreadable fails alone, the others go on.
        models, tally = tallied(plan.models_for(case, attempt))
        team = Team(models, plan.specialists, plan.settings)
        if plan.record is not None:
            with recording_to(plan.record(case, attempt)) as path:
                result = await plan.run_team(team, case.request, mode, path)
        else:
            result = await plan.run_team(team, case.request, mode, None)
    except Exception as exc:  # a diverged replay, an unexpected failure: this case fails, the others go on
        return CaseRun(case, attempt, "error", error=failure(exc), seconds=time.perf_counter() - started)
    seconds = time.perf_counter() - started
    routed, handoffs = routed_of(result)
    checks = check(
        case.expect, status=result.status, answer=result.answer, routed=routed, handoffs=handoffs, cost=tally.cost_usd
    )
    return CaseRun(
        case,
        attempt,
        result.status,
        routed,
        handoffs,
        tally.calls,
        tally.tokens,
        tally.cost_usd,
        seconds,
        result.answer,
        checks,
    )


@contextlib.contextmanager
def recording_to(path: str | Path) -> Iterator[Path]:
    """A temporary file beside `path` to record a case's run into, moved onto `path` once the run finished.

    Why: a case re-recorded over a good recording and then interrupted (Ctrl-C, a crash) or failing to run
    must not leave a half-written recording in its place, which the next replay would report as a
    divergence; and two evals recording into one directory must each leave whole files (the last wins)."""
    final = Path(path)
    partial = final.with_name(f".{final.name}.{os.getpid()}.partial")
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(final)
        partial.touch()
    except OSError as exc:  # named as the user gave it, not as the temporary file
        why = "a file, not a directory" if final.parent.is_file() else exc.strerror or str(exc)
        raise ConfigError(
            f"{final.parent}: cannot record there ({why}); give --record a directory it can write"
        ) from None
    try:
        yield partial
        partial.replace(final)
    finally:
        partial.unlink(missing_ok=True)


def _remove_stale(final: Path) -> None:
    """Remove what an eval killed while recording `final` (SIGTERM, SIGKILL: no `finally` ran) left beside it."""
    for stale in final.parent.glob(f".{glob.escape(final.name)}.*.partial"):
        pid = stale.name.removeprefix(f".{final.name}.").removesuffix(".partial")
        if pid.isdigit() and not _alive(int(pid)):
            stale.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, as another user's
        return True
    return True


# The hint a replay's error gives is for `mcp-team run`; a case's recording is made again by the eval itself.
_RUN_HINT = re.compile(r"mcp-team run --record \S+ \.\.\.")
EVAL_HINT = "mcp-team eval SUITE --record DIR, then replay with --model replay:DIR"


def failure(exc: Exception) -> str:
    """Why a case could not run, in words, with the eval's way to record a case again where the error
    gives `mcp-team run`'s."""
    message = _RUN_HINT.sub(EVAL_HINT, str(exc)) if isinstance(exc, McpTeamError) else str(exc)
    return f"{type(exc).__name__}: {message}"


async def run_all(
    plan: EvalPlan,
    run_one: Callable[[EvalPlan, Case, int], Awaitable[CaseRun]] = run_team_case,
    on_done: Callable[[CaseRun], None] | None = None,
) -> list[CaseRun]:
    """Every case `plan.repeat` times, at most `plan.concurrency` at once; the runs in suite order."""
    limit = anyio.CapacityLimiter(plan.concurrency)
    jobs = [(case, attempt) for case in plan.suite.cases for attempt in range(1, plan.repeat + 1)]
    runs: list[CaseRun | None] = [None] * len(jobs)

    async def one(i: int) -> None:
        async with limit:
            runs[i] = await run_one(plan, *jobs[i])
        if on_done is not None:
            on_done(runs[i])  # type: ignore[arg-type]

    async with anyio.create_task_group() as tg:
        for i in range(len(jobs)):
            tg.start_soon(one, i)
    return [r for r in runs if r is not None]
