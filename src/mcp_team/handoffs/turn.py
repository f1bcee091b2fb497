"""One supervisor turn as data: its tool calls classified before any of them runs, and what the turn came to.

`classify` is a pure function (like openai-agents' `run_steps.py`): from a turn's tool calls and the
team it says which calls are handoffs to run (ids and branch numbers assigned in call order), which
are rejected and why, and whether the turn finalizes. The supervisor then runs that plan, so a
turn is one unit a durable run can record and replay.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from mcp_team.handoffs.schema import Handoff, HandoffArgs, validation_problems
from mcp_team.llm import Message, ToolUseBlock
from mcp_team.llm.text_calls import only_markers

HANDOFF_PREFIX = "handoff_to_"
FINALIZE = "finalize"


@dataclass(frozen=True, slots=True)
class Final:
    """The supervisor answered: the run's answer."""

    answer: str


@dataclass(frozen=True, slots=True)
class Continue:
    """The supervisor goes on: its turn and the tool results that answer it, the next turn's last two messages."""

    reply: Message
    results: Message
    # A JSON schema the next turn's reply must follow (`ModelRequest.reply_schema`), for that turn only.
    reply_schema: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Stop:
    """The supervisor stopped without an answer.

    `reason` says why the run winds down early (it becomes the run's `stopped_by`); None when the
    cause is already recorded as a failure (e.g. the supervisor's model call failed).
    """

    reason: str | None = None


TurnOutcome = Final | Continue | Stop

RejectionKind = Literal["unknown_specialist", "malformed_handoff", "finalize"]


@dataclass(frozen=True, slots=True)
class Rejected:
    """A tool call that will not run; `reason` goes back to the supervisor as an error result.

    Rejected handoffs are recorded as (recovered) failures; a rejected finalize is not a failure.
    """

    call_id: str
    kind: RejectionKind
    specialist: str
    reason: str
    task: str = ""


@dataclass(frozen=True, slots=True)
class TurnPlan:
    """What to do with one turn's tool calls."""

    call_ids: tuple[str, ...]  # every tool call, in order: the results go back in this order
    handoffs: tuple[Handoff, ...]
    rejected: tuple[Rejected, ...]
    answer: str | None = None  # set when the turn finalizes and asks for nothing else


def classify(uses: Sequence[ToolUseBlock], team: Collection[str], run_id: str, first_seq: int) -> TurnPlan:
    """Sort a turn's tool calls into handoffs (numbered from `first_seq`, in call order), rejections and finalize."""
    call_ids = tuple(u.id for u in uses)
    mixed = any(u.name != FINALIZE for u in uses)
    if not mixed:
        for use in uses:
            answer = use.input.get("answer")
            if isinstance(answer, str) and answer.strip():
                return TurnPlan(call_ids, (), (), answer)
    handoffs: list[Handoff] = []
    rejected: list[Rejected] = []
    for use in uses:
        if use.name == FINALIZE:
            reason = (
                "not finalized: handoffs in the same turn are still running; call finalize again once you have "
                "their results"
                if mixed
                else f"finalize could not be read: {use.input_error}. Call it again with a JSON object "
                '{"answer": "..."}'
                if use.input_error
                else "finalize needs a non-empty 'answer' string"
            )
            rejected.append(Rejected(use.id, "finalize", "supervisor", reason))
            continue
        target = use.name.removeprefix(HANDOFF_PREFIX)
        if not use.name.startswith(HANDOFF_PREFIX) or target not in team:
            reason = f"there is no specialist '{target}' (tool {use.name}). Available: {', '.join(team)}."
            rejected.append(Rejected(use.id, "unknown_specialist", target, reason, str(use.input.get("task", ""))))
            continue
        if use.input_error is not None:  # the model's arguments could not be read at all (e.g. not JSON)
            reason = (
                f"malformed handoff to {target}: {use.input_error}. "
                "Expected a JSON object {task, context?, expected_output?}."
            )
            rejected.append(Rejected(use.id, "malformed_handoff", target, reason))
            continue
        try:
            args = HandoffArgs.model_validate(without_markers(use.input))
        except ValidationError as exc:
            problems = "; ".join(validation_problems(exc))
            reason = f"malformed handoff to {target}: {problems}. Expected {{task, context?, expected_output?}}."
            rejected.append(Rejected(use.id, "malformed_handoff", target, reason))
            continue
        seq = first_seq + len(handoffs)
        # The validated fields as they are (`__dict__`: no extras, see HandoffArgs): cheaper than a dump.
        handoffs.append(
            Handoff(
                id=f"h{seq}",
                seq=seq,
                run_id=run_id,
                target=target,
                call_id=use.id,
                text_call=use.from_text,
                **args.__dict__,
            )
        )
    return TurnPlan(call_ids, tuple(handoffs), tuple(rejected))


def without_markers(arguments: dict[str, object]) -> dict[str, object]:
    """A handoff's arguments with every string that is only a chat template's marker (a small model's `context`
    of `<tool_response>`) made empty: no specialist should read one as its context (an empty task is refused)."""
    return {k: "" if isinstance(v, str) and only_markers(v) else v for k, v in arguments.items()}
