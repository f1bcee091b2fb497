"""The public engine API: a `Team` runs requests (adaptive or planned), plans, and single handoffs."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import anyio

from mcp_team.errors import ConfigError, McpTeamError
from mcp_team.handoffs.checkpoints import Approver, checkpoint_problems
from mcp_team.handoffs.context import EventSink, RunConfig, RunContext, RunEvent, now
from mcp_team.handoffs.direct import ask
from mcp_team.handoffs.orchestration import orchestrate
from mcp_team.handoffs.planner import make_plan
from mcp_team.handoffs.runtime import EPHEMERAL, Runtime
from mcp_team.handoffs.schema import Budgets, Mode, Plan, RunResult, RunSettings
from mcp_team.handoffs.synthesis import fallback_answer
from mcp_team.llm import ModelSet
from mcp_team.llm.call import MEMBER_NAMES
from mcp_team.specialists import DEFAULT_TEAM, Specialist, SpecialistResult
from mcp_team.telemetry import spans
from mcp_team.telemetry.attributes import INPUT_MESSAGES, OUTPUT_MESSAGES, RUN_MODE, RUN_STATUS


class UnknownSpecialist(McpTeamError, LookupError):
    def __init__(self, name: str, team: Sequence[str]) -> None:
        super().__init__(f"there is no specialist '{name}'; the team is: {', '.join(team)}")


@dataclass
class Team:
    """A supervisor and its specialists on one set of models.

    - `models`: the models by role and by member (`ModelSet.single(model)` for one model everywhere).
    - `specialists`: the members the supervisor hands work to (default: `DEFAULT_TEAM`, the researcher,
      analyst, writer, coder and reviewer); names unique, and neither `supervisor` nor `planner`.
    - `settings`: mode, budgets, retries, gates, checkpoints and the judge (`RunSettings`).
    - `runtime` executes its runs (see `handoffs.runtime`): in memory by default; a durable one
      records them so they survive a restart.

    Raises `TypeError` for an argument of the wrong kind and `ConfigError` for a team that cannot run
    (a name used twice, a fallback or judge that names nobody). One `Team` may run many requests at once.
    """

    models: ModelSet
    specialists: Sequence[Specialist] = DEFAULT_TEAM
    settings: RunSettings = field(default_factory=RunSettings)
    runtime: Runtime = EPHEMERAL

    def __post_init__(self) -> None:
        _expect("models", self.models, ModelSet, "ModelSet.single(model)")
        if isinstance(self.specialists, (str, Specialist)) or not isinstance(self.specialists, Iterable):
            wrong = type(self.specialists).__name__
            raise TypeError(f"specialists must be a list of Specialist, not {wrong}: Team(models, [Specialist(...)])")
        if not isinstance(self.specialists, Sequence):  # a generator or set: read once, here, not consumed by a check
            self.specialists = tuple(self.specialists)
        if (odd := next((s for s in self.specialists if not isinstance(s, Specialist)), None)) is not None:
            raise TypeError(f"specialists must be Specialist objects, not {type(odd).__name__}: Specialist(name=...)")
        _expect("settings", self.settings, RunSettings, "RunSettings(mode='planned')")
        self.by_name = {s.name: s for s in self.specialists}
        if problems := team_problems(self.specialists, self.settings):
            raise ConfigError("this team cannot run: " + "; ".join(problems))

    async def run(
        self,
        request: str,
        *,
        mode: Mode | None = None,
        budgets: Budgets | None = None,
        on_event: Callable[[RunEvent], Awaitable[None] | None] | None = None,
        on_finish: Callable[[RunResult], None] | None = None,
        run_id: str | None = None,
        runtime: Runtime | None = None,
        started_at: datetime | None = None,
        resumed_at: datetime | None = None,
        checkpoints: Sequence[str] = (),
        approve: Approver | None = None,
    ) -> RunResult:
        """Run a request through the supervisor. Never raises for failed work: see `status`/`failures`.
        An exception that is not failed work (a model of one's own that raises something other than
        `ModelError`) propagates, after `on_finish` got the run's record, marked failed.

        `on_event` gets each step's `RunEvent` (progress), a plain function or an async one.

        On cancellation the run is recorded as cancelled (`on_finish` still gets it) and the
        cancellation propagates; every branch has stopped by the time it does. `runtime` replaces
        the team's for this run; `started_at` (default: now) is when the run began; `resumed_at`, when
        a stopped run came back: its deadline counts from then (the time it was stopped does not count, and the
        steps it replays take none). `checkpoints` add to the team's (see `handoffs.checkpoints`);
        `approve` asks a person at each. Raises `ValueError` for a checkpoint that names no member or a
        blank request, `TypeError` for an argument of the wrong kind.
        """
        _request_problem("request", request, "what the team should do")
        for what, when in (("started_at", started_at), ("resumed_at", resumed_at)):
            if when is not None and (not isinstance(when, datetime) or when.utcoffset() is None):
                # Compared with the aware now() for the deadline: a naive one failed there, part-way in.
                raise TypeError(f"{what} must be a timezone-aware datetime, e.g. datetime.now(timezone.utc)")
        if isinstance(checkpoints, str):  # one name, not its letters
            raise TypeError(f"checkpoints must be a list of names, not a str: checkpoints=[{checkpoints!r}]")
        if mode not in (None, "adaptive", "planned"):
            raise ValueError(f"mode must be 'adaptive' or 'planned', not {mode!r}")
        if budgets is not None:
            _expect("budgets", budgets, Budgets, "Budgets(max_handoffs=40)")
        update: dict[str, object] = {}
        if checkpoints:
            if problems := checkpoint_problems(checkpoints, list(self.by_name)):
                raise ValueError("; ".join(problems))
            update["checkpoints"] = list(dict.fromkeys([*self.settings.checkpoints, *checkpoints]))
        if mode is not None:
            update["mode"] = mode
        if budgets is not None:
            update["budgets"] = budgets
        run_id = run_id or uuid.uuid4().hex
        with (
            spans.conversation(run_id),
            spans.agent_span("supervisor", agent_id=run_id, provider=self.models.provider) as span,
        ):
            config = RunConfig(
                request=request,
                run_id=run_id,
                team=self.by_name,
                models=self.models,
                settings=self.settings.model_copy(update=update),
                on_event=_async_sink(on_event) if on_event is not None else None,
                runtime=runtime or self.runtime,
                approve=approve,
                started_at=started_at or now(),
                resumed_at=resumed_at,
                trace_id=spans.current_trace_id(),
            )
            ctx = RunContext(config)
            try:
                await ctx.emit("run_started", f"run {run_id}")
                await orchestrate(ctx)
            except anyio.get_cancelled_exc_class():
                ctx.status, ctx.ended_at = "cancelled", now()
                ctx.answer = ctx.answer or "The run was cancelled. " + fallback_answer(ctx.records)
                if on_finish is not None:
                    on_finish(ctx.result())
                raise
            except Exception as exc:  # a bug (in a model or tool of the caller's, or ours): the record is kept
                what = f"an unexpected {type(exc).__name__}: {str(exc)[:200]}"
                ctx.status, ctx.ended_at, ctx.stopped_by = "failed", now(), ctx.stopped_by or what
                for record in ctx.records:
                    if record.status == "running":
                        record.status, record.ended_at, record.error = "failed", ctx.ended_at, what
                ctx.answer = ctx.answer or f"The run stopped on {what}. " + fallback_answer(ctx.records)
                if on_finish is not None:
                    on_finish(ctx.result())
                raise
            ctx.ended_at = now()
            result = ctx.result()
            u = result.usage.total  # the whole run's tokens, specialists included, on the run's root span
            spans.record_usage(
                span, u.input_tokens, u.output_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens
            )
            spans.record_content(
                span, INPUT_MESSAGES, lambda: [{"role": "user", "parts": [{"type": "text", "content": request}]}]
            )
            spans.record_content(
                span,
                OUTPUT_MESSAGES,
                lambda: [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": result.answer}],
                        "finish_reason": result.status,
                    }
                ],
            )
            if span.is_recording():
                span.set_attribute(RUN_MODE, config.settings.mode)
                span.set_attribute(RUN_STATUS, ctx.status)
            if ctx.status in ("failed", "partial"):
                spans.mark_error(span, f"run_{ctx.status}", message=ctx.stopped_by or ctx.status)
        if on_finish is not None:
            on_finish(result)
        return result

    async def plan(self, request: str) -> Plan:
        """The validated plan planned mode would run, without running it. Raises `PlanError`."""
        _request_problem("request", request, "what the team should do")
        config = RunConfig(
            request=request, run_id=uuid.uuid4().hex, team=self.by_name, models=self.models, settings=self.settings
        )
        with (
            spans.conversation(config.run_id),
            spans.agent_span("supervisor", agent_id=config.run_id, provider=self.models.provider),
        ):
            return await make_plan(RunContext(config))

    async def ask(
        self, name: str, task: str, context: str = "", *, on_finish: Callable[[RunResult], None] | None = None
    ) -> SpecialistResult:
        """Hand one task straight to one specialist, as a one-handoff run whose record goes to `on_finish`
        (see `handoffs.direct`). Raises `UnknownSpecialist`."""
        if name not in self.by_name:
            raise UnknownSpecialist(name, list(self.by_name))
        _request_problem("task", task, "what the specialist should do, self-contained")
        if not isinstance(context, str):
            raise TypeError(f"context must be a str, not {type(context).__name__}")
        return await ask(self.by_name, self.models, self.settings, name, task, context, on_finish=on_finish)


def team_problems(specialists: Sequence[Specialist], settings: RunSettings) -> list[str]:
    """What keeps these specialists and settings from being a team: names taken twice or by the team's own
    members, fallbacks and a judge that name nobody. Empty when they can run."""
    names = [s.name for s in specialists]
    if not names:
        return ["it needs at least one specialist"]
    problems = [
        f"'{n}' names two specialists; names must be unique" for n in sorted({n for n in names if names.count(n) > 1})
    ]
    problems += [
        f"'{n}' is the name of the team's own {n}; give the specialist another" for n in names if n in MEMBER_NAMES
    ]
    for s in specialists:
        if s.fallback is not None and (s.fallback == s.name or s.fallback not in names):
            problems.append(
                f"{s.name}'s fallback '{s.fallback}' must be another specialist of the team ({', '.join(names)})"
            )
    if settings.judge is not None and settings.judge not in names:
        problems.append(f"the judge '{settings.judge}' is not a specialist of the team ({', '.join(names)})")
    # A checkpoint or gate that names nobody would never apply: a typo that silently drops a safeguard.
    problems += [f"settings.{p}" for p in checkpoint_problems(settings.checkpoints, names)]
    problems += [
        f"settings.gates: '{n}' is not a specialist of the team ({', '.join(names)}); gates are keyed by member name"
        for n in settings.gates
        if n not in names
    ]
    return problems


def _async_sink(sink: Callable[[RunEvent], Awaitable[None] | None]) -> EventSink:
    """`sink` as the engine awaits it: a plain function (`on_event=print`) works as well as an async one."""

    async def on_event(event: RunEvent) -> None:
        if inspect.isawaitable(pending := sink(event)):
            await pending

    return on_event


def _request_problem(what: str, value: object, example: str) -> None:
    """Refuse a request or task that is not text, or is blank: a run of nothing would still spend model calls."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str ({example}), not {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{what} is blank: say {example}")


def _expect(what: str, value: object, kind: type, example: str) -> None:
    if not isinstance(value, kind):
        raise TypeError(f"{what} must be a {kind.__name__}, not {type(value).__name__}: e.g. {example}")
