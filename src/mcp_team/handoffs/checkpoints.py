"""Human checkpoints: where a run stops for a person's approval, and the seam through which it asks.

A checkpoint is named `plan` (the plan, before any task runs; in adaptive mode the supervisor's first
handoffs) or `before:<member>` (before that member's first handoff of the run). The team file's
`[supervisor] checkpoints` and a call's own list (added to them, never removing any) say where.

The engine never asks anyone itself: it calls an `Approver`, `approve(checkpoint) -> Decision`, which
the MCP server fills with elicitation (server/client_features/elicitation.py) and the CLI with a terminal prompt. An
approver that cannot ask raises `CannotAsk`; the team's `checkpoint_policy` then decides: `fail` (the
default: the run fails saying nobody could approve) or `approve` (it goes on). A reject, or no answer
within `checkpoint_timeout`, ends the run `cancelled` with what had finished. A durable run's approver
records each answer and may wait across a restart (runs/approvals.py); it raises `NoAnswer` when the
timeout, counted from the first ask, has passed. Every checkpoint is a
`checkpoint {name}` span and a `CheckpointRecord` in the run's record.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Literal

import anyio
from pydantic import BaseModel, Field

from mcp_team.errors import McpTeamError
from mcp_team.telemetry import spans

Action = Literal["approve", "revise", "reject"]


class Checkpoint(BaseModel, frozen=True, defer_build=True):
    """What a person is asked to approve."""

    name: str = Field(description='"plan" or "before:<member>".')
    summary: str = Field(description="What will happen if they approve: the plan's tasks, or the next handoff.")
    round: int = Field(default=1, description="1, then one more for each revise.")
    run_id: str = ""
    timeout: float | None = Field(default=None, description="Seconds a person has to answer, from when first asked.")


class Decision(BaseModel, frozen=True, defer_build=True):
    action: Action
    feedback: str = Field(default="", description="With revise: what to change.")


class CheckpointRecord(BaseModel, defer_build=True):
    """One question at a checkpoint and its answer, as the run's record keeps it."""

    name: str
    round: int
    summary: str
    action: Action | Literal["failed", "timeout"]
    feedback: str = ""
    answered_by: Literal["person", "policy", "timeout"] = "person"
    waited_seconds: float = 0.0


class CannotAsk(McpTeamError):
    """The approver has nobody to ask (a client without elicitation, a CLI without a terminal); `how`, when the
    approver knows where it runs: what whoever runs it can do instead (else `ask` gives every way there is)."""

    def __init__(self, reason: str, how: str = "") -> None:
        super().__init__(reason)
        self.how = how


class NoAnswer(McpTeamError):
    """The approver's own deadline passed with no answer (a durable run counts from when it first asked)."""


Approver = Callable[[Checkpoint], Awaitable[Decision]]


def checkpoint_problems(names: Iterable[str], members: Collection[str]) -> list[str]:
    """What is wrong with a list of checkpoint names, each in words; empty when they are all valid."""
    problems = []
    for name in names:
        if name == "plan":
            continue
        member = name.removeprefix("before:")
        if not name.startswith("before:") or not member:
            problems.append(f'checkpoint \'{name}\': use "plan" or "before:<member>"')
        elif member not in members:
            problems.append(f"checkpoint '{name}': there is no member '{member}' (the team: {', '.join(members)})")
    return problems


NO_APPROVER = "nobody can be asked: the caller gave no way to approve"
ANY_WAY_OUT = (  # for an approver that does not say where it runs (`CannotAsk.how`)
    "Answer from a client that supports elicitation (or `mcp-team run` on a terminal), or set "
    'checkpoint_policy = "approve" in the team file\'s [supervisor] to go on without asking; '
    "in Python, pass approve= (an async Checkpoint -> Decision) to Team.run, or "
    'RunSettings(checkpoint_policy="approve")'
)


async def _answer(approve: Approver, checkpoint: Checkpoint) -> Decision:
    """`approve`'s decision; an approver of the caller's own that is not written as one is named, with how."""
    pending = approve(checkpoint)
    if not inspect.isawaitable(pending):
        raise TypeError(
            f"approve returned a {type(pending).__name__}, not an awaitable: write it "
            "`async def approve(checkpoint) -> Decision`"
        )
    decision = await pending
    if not isinstance(decision, Decision):
        raise TypeError(
            f"approve returned a {type(decision).__name__}, not a Decision: return e.g. "
            'Decision(action="approve") (from mcp_team.handoffs.checkpoints)'
        )
    return decision


class Stop(BaseModel, frozen=True, defer_build=True):
    """Why a checkpoint ended the run: `status` is what the run becomes."""

    status: Literal["cancelled", "failed"]
    reason: str


async def ask(
    approve: Approver | None,
    checkpoint: Checkpoint,
    *,
    policy: Literal["approve", "fail"],
    timeout: float,
    records: list[CheckpointRecord],
) -> Decision | Stop:
    """Ask at `checkpoint`, wait at most `timeout` seconds, record the answer; a `Stop` ends the run."""
    attrs: dict[str, str | int] = {"mcp_team.checkpoint.name": checkpoint.name, "mcp_team.checkpoint.round": 0}
    attrs["mcp_team.checkpoint.round"] = checkpoint.round
    with spans.step_span("checkpoint", checkpoint.name, attrs) as span:
        started = time.monotonic()
        decision: Decision | None = None
        answered_by: Literal["person", "policy", "timeout"] = "person"
        try:
            if approve is None:
                raise CannotAsk(NO_APPROVER)
            with anyio.move_on_after(timeout):
                with contextlib.suppress(NoAnswer):
                    decision = await _answer(approve, checkpoint)
            if decision is None:
                answered_by = "timeout"
        except CannotAsk as exc:
            answered_by = "policy"
            if policy == "approve":
                decision = Decision(action="approve", feedback=f"approved by the team's policy: {exc}")
            else:
                waited = round(time.monotonic() - started, 3)
                records.append(
                    CheckpointRecord(
                        name=checkpoint.name, round=checkpoint.round, summary=checkpoint.summary,
                        action="failed", feedback=str(exc), answered_by="policy", waited_seconds=waited,
                    )
                )  # fmt: skip
                # Whoever runs it (a client, the CLI, a Python caller without `approve`) learns their way out.
                how = exc.how or ANY_WAY_OUT
                reason = f"checkpoint '{checkpoint.name}' needs a person's approval, but {exc}. {how}"
                spans.mark_error(span, "checkpoint_unanswerable", message=reason)
                return Stop(status="failed", reason=reason)
        waited = round(time.monotonic() - started, 3)
        if span.is_recording():
            span.set_attribute("mcp_team.checkpoint.waited_seconds", waited)
            span.set_attribute("mcp_team.checkpoint.answered_by", answered_by)
        if decision is None:
            records.append(
                CheckpointRecord(
                    name=checkpoint.name, round=checkpoint.round, summary=checkpoint.summary, action="timeout",
                    answered_by="timeout", waited_seconds=waited,
                )
            )  # fmt: skip
            spans.mark_error(span, "checkpoint_timeout", message=f"no answer within {timeout:g} s")
            return Stop(
                status="cancelled", reason=f"nobody answered checkpoint '{checkpoint.name}' within {timeout:g} s"
            )
        if span.is_recording():
            span.set_attribute("mcp_team.checkpoint.action", decision.action)
        records.append(
            CheckpointRecord(
                name=checkpoint.name, round=checkpoint.round, summary=checkpoint.summary, action=decision.action,
                feedback=decision.feedback, answered_by=answered_by, waited_seconds=waited,
            )
        )  # fmt: skip
        if decision.action == "reject":
            why = f": {decision.feedback}" if decision.feedback else ""
            return Stop(status="cancelled", reason=f"the run was rejected at checkpoint '{checkpoint.name}'{why}")
        return decision
