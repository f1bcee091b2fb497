"""The typed records of a run: settings and budgets in; handoffs, failures, usage and the answer out."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcp_team.errors import message_of
from mcp_team.handoffs.checkpoints import CheckpointRecord
from mcp_team.handoffs.conflicts import Ruling
from mcp_team.handoffs.gates import Gates
from mcp_team.llm import Usage
from mcp_team.llm.types import assembled, no_usage
from mcp_team.specialists import Verdict

Mode = Literal["adaptive", "planned"]
RunStatus = Literal["running", "complete", "partial", "failed", "cancelled"]
HandoffStatus = Literal["running", "completed", "failed", "skipped", "refused", "cancelled"]

# The longest a run, or a wait for a person, may be given: beyond it a deadline is a mistake (1e12 s would not
# even fit in a date), so it is refused where it is set, not when the run starts.
LONGEST_WAIT = 365 * 86_400.0
LONGEST_CALL = 86_400.0  # one model call


class Budgets(BaseModel):
    """Limits shared by the whole run, parallel branches included."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    max_handoffs: int = Field(default=24, ge=1, description="Handoffs dispatched, retries included.")
    max_model_calls: int = Field(default=80, ge=2, description="Model calls by the supervisor and specialists.")
    max_tokens: int = Field(
        default=400_000,
        ge=1,
        description="Input plus output tokens over all calls, a cap: a call is made only if its prompt estimate "
        "plus its max_tokens fit what is left (counting calls in flight), its max_tokens lowered to fit if need "
        "be; only a prompt's error over its estimate may pass it.",
    )
    deadline_seconds: float = Field(
        default=600.0,
        gt=0,
        le=LONGEST_WAIT,
        allow_inf_nan=False,
        description="Wall-clock limit for the run, in seconds (at most a year).",
    )
    max_cost: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="US dollars over all calls whose price is known (see llm.cost), a cap like max_tokens (a call's "
        "price at its most must fit); a call of unknown cost is not counted, and the run's notes say how many "
        "were not. None: no limit.",
    )


class RunSettings(BaseModel):
    """How a run behaves. Defaults suit an interactive client; the team file can override them."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    mode: Mode = "adaptive"
    budgets: Budgets = Field(default_factory=Budgets)
    max_retries: int = Field(default=2, ge=0, le=10, description="Retries of a failed handoff, each refined.")
    breaker_threshold: int = Field(default=3, ge=1, description="Failures in a row that open a specialist's circuit.")
    max_revisions: int = Field(default=2, ge=0, description="REVISE verdicts honoured before review stops.")
    max_repeats: int = Field(default=2, ge=1, description="Identical handoffs refused before the run is stopped.")
    max_supervisor_turns: int = Field(default=12, ge=1)
    call_timeout: float = Field(
        default=180.0,
        gt=0,
        le=LONGEST_CALL,
        allow_inf_nan=False,
        description="Seconds one model call may take (at most a day).",
    )
    # Depth (issue 13): quality gates, human checkpoints, the judge. See handoffs/gates.py, checkpoints.py, judge.py.
    gates: dict[str, Gates] = Field(default_factory=dict, description="Quality gates by member name.")
    checkpoints: list[str] = Field(
        default_factory=list,
        description='Where a run stops for a person\'s approval: "plan" (planned mode, before any task runs) '
        'and "before:<member>" (before that member\'s first handoff).',
    )
    checkpoint_policy: Literal["approve", "fail"] = Field(
        default="fail",
        description="When nobody can be asked (a client without elicitation, a CLI without a terminal): "
        "fail the run saying so (default), or approve automatically.",
    )
    max_checkpoint_rounds: int = Field(default=2, ge=0, le=10, description="Revise rounds per checkpoint.")
    checkpoint_timeout: float = Field(
        default=600.0,
        gt=0,
        le=LONGEST_WAIT,
        allow_inf_nan=False,
        description="Seconds to wait for a person's answer (at most a year).",
    )
    judge: str | None = Field(default=None, description="The member that decides conflicts between results.")


class HandoffArgs(BaseModel):
    """The arguments of a `handoff_to_<specialist>` tool call, as the supervisor model writes them."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    task: str = Field(min_length=1, description="What the specialist must do, self-contained.")
    context: str = Field(default="", description="Only the earlier results this task needs.")
    expected_output: str = Field(default="", description="What a good answer looks like.")


class Handoff(HandoffArgs):
    """A handoff's full payload, as recorded in the run."""

    id: str = Field(description="`h<seq>` for a first attempt, `h<seq>.<attempt>` for a retry.")
    seq: int = Field(ge=1, description="The handoff's number in the run (its branch); a retry keeps it.")
    run_id: str
    source: str = "supervisor"
    target: str
    call_id: str = Field(description="The supervisor's tool-call id, or the plan task id.")
    attempt: int = 1
    retry_of: str | None = None
    fallback: str | None = Field(
        default=None, description="The fallback model or specialist that did (part of) the work, and why."
    )
    text_call: bool = Field(
        default=False,
        description="The supervisor's model wrote this handoff's call as text, not as a tool call; it was read "
        "from its reply and run (see tool_calls in the model settings). Left out when false.",
        exclude_if=lambda value: not value,  # records of runs made before it existed compare equal
    )


class HandoffRecord(Handoff):
    """A handoff and what became of it."""

    status: HandoffStatus = "running"
    started_at: datetime | None = None
    ended_at: datetime | None = None
    output: str = ""
    error: str | None = None
    error_type: str | None = None
    turns: int = 0
    usage: Usage = Field(default_factory=no_usage)
    verdict: Verdict | None = None
    subrun: RunResult | None = Field(default=None, description="A member that is a team: its sub-run's record.")


class Failure(BaseModel, defer_build=True):
    kind: str = Field(description="e.g. rate_limited, max_turns, unknown_specialist, dependency_failed.")
    specialist: str
    task: str = ""
    reason: str
    handoff_id: str | None = None
    recovered: bool = Field(
        default=False,
        description="Nothing is missing from the answer because of it: a retry succeeded, or no work was lost "
        "(e.g. a handoff to an unknown specialist, a refused duplicate).",
    )


class UsageReport(BaseModel, defer_build=True):
    total: Usage = Field(default_factory=no_usage)
    by_specialist: dict[str, Usage] = Field(default_factory=dict)
    model_calls: int = 0


class PlanTask(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid")

    id: str = Field(min_length=1)
    specialist: str
    description: str
    depends_on: list[str] = Field(default_factory=list)


class Plan(BaseModel):
    """An inspectable plan: tasks with dependencies, and how to combine their results."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    tasks: list[PlanTask]
    combine: str = ""


class RunResult(BaseModel, defer_build=True):
    """What a run returns, to the library caller, the CLI (`--json`) and MCP clients."""

    answer: str = Field(description="The synthesized answer; when the run is partial it says what is missing.")
    status: RunStatus = Field(
        description="complete: every piece of work succeeded; partial: some failed and the answer says what is "
        "missing; failed: no answer could be made; cancelled: stopped by its caller."
    )
    handoffs: list[HandoffRecord] = Field(description="Every handoff to a specialist, retries included, in order.")
    failures: list[Failure] = Field(description="What went wrong, and whether a retry or fallback recovered it.")
    usage: UsageReport = Field(description="Model calls, tokens and cost, in total and by member.")
    run_id: str
    trace_id: str | None = Field(description="32 hex digits; open it in Jaeger. None when tracing is off.")
    request: str
    mode: Mode
    plan: Plan | None = Field(default=None, description="The plan a planned run followed; None when adaptive.")
    stopped_by: str | None = Field(default=None, description="Why the run wound down early, if it did.")
    notes: list[str] = Field(
        default_factory=list,
        description="What the caller should know that is not a failure, each with what to change: e.g. more "
        "handoffs asked for at once than the handoff budget (max_handoffs) allowed, or more ready at once than "
        "the model concurrency limit runs together, so they ran in waves.",
    )
    started_at: datetime
    ended_at: datetime | None = None
    checkpoints: list[CheckpointRecord] = Field(
        default_factory=list, description="Each question asked at a human checkpoint, its answer and the wait."
    )
    conflicts: list[Ruling] = Field(
        default_factory=list, description="Results that disagreed, and the judge's ruling on each."
    )


HandoffRecord.model_rebuild()  # `subrun` nests a RunResult, defined after it

# Every field of a record in field order: a Handoff's (filled by the handoff) and the record's defaults,
# all immutable (str, None, 0, the frozen NO_USAGE), so one dict can be copied for each record.
_RECORD_START = {
    name: None if field.is_required() else field.get_default(call_default_factory=True)
    for name, field in HandoffRecord.model_fields.items()
}


def started_record(handoff: Handoff, at: datetime) -> HandoffRecord:
    """The running record of `handoff`, started `at`: what `HandoffRecord.model_validate({**handoff.__dict__,
    "started_at": at})` gives (same fields, field order and `fields_set`), without validating again what the
    validated `handoff` holds. On every handoff: about half the cost."""
    values = dict(_RECORD_START)
    values.update(handoff.__dict__)  # keys keep their place: the field order of a validated record
    values["started_at"] = at
    fields_set = set(handoff.__dict__)  # model_validate's: every key it was given
    fields_set.add("started_at")
    return assembled(HandoffRecord, values, fields_set)


def finish_record(
    record: HandoffRecord,
    *,
    status: HandoffStatus,
    ended_at: datetime,
    output: str,
    error: str | None,
    error_type: str | None,
    turns: int,
    verdict: Verdict | None,
) -> None:
    """Write what became of a handoff on its `record`: what assigning each of these attributes does (a
    `HandoffRecord` validates no assignment, so `record.x = v` puts `v` in `__dict__` and `x` in the fields
    set), in one step instead of seven passes through pydantic's `__setattr__`. At the end of every handoff."""
    values = {
        "status": status,
        "ended_at": ended_at,
        "output": output,
        "error": error,
        "error_type": error_type,
        "turns": turns,
        "verdict": verdict,
    }
    record.__dict__.update(values)
    record.__pydantic_fields_set__.update(values)


def validation_problems(exc: ValidationError, prefix: str = "") -> list[str]:
    """Each error of `exc` as `key.path: what is wrong`, for messages a person can act on."""
    return [f"{prefix}{'.'.join(map(str, e['loc'])) or 'arguments'}: {message_of(e)}" for e in exc.errors()]
