"""`answer_checkpoint`: answer a durable run that waits at a human checkpoint (issue 13).

A durable run that stops at a checkpoint shows it on its record (`waiting`: the checkpoint's name, what is
to be approved, the round) in get_run and team://runs/{run_id}. The session that started the run is asked
too (elicitation) while it is attached; this tool answers for anyone else, e.g. after the server restarted
and the run waits again (runs/approvals.py). The first answer wins and is recorded, so the run never asks
it again.

No `from __future__ import annotations` here: the SDK reads these signatures at runtime.
"""

from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from mcp_team.handoffs.checkpoints import Checkpoint, Decision
from mcp_team.server.state import ServerState
from mcp_team.server.surface.run_tools import RUN_ID, _own, _service
from mcp_team.server.surface.tools import described

MAX_FEEDBACK = 4000  # characters: a person's note, not a document


async def answer_checkpoint(
    run_id: Annotated[str, RUN_ID],
    decision: Annotated[
        Literal["approve", "revise", "reject"],
        Field(description="approve: go on; revise: change it as the feedback says, then ask again; reject: stop."),
    ],
    ctx: Context[Any, Any],
    feedback: Annotated[str, Field(max_length=MAX_FEEDBACK, description="With revise: what to change.")] = "",
    checkpoint: Annotated[
        str | None,
        Field(
            max_length=200,
            description='Answer only if the run waits at this checkpoint ("plan", "before:<member>").',
        ),
    ] = None,
    round: Annotated[
        int | None,
        Field(
            ge=1,
            description="Answer only if the checkpoint waits in this round (get_run's `waiting.round`): a retried "
            "answer then never answers the next round too.",
        ),
    ] = None,
) -> dict[str, Any]:
    """Answer the human checkpoint a durable run waits at (get_run shows it under `waiting`); returns the
    run's record. The run goes on (or stops, on reject) as if its own client had answered."""
    if decision == "revise" and not feedback.strip():
        raise ToolError("'feedback' is empty: with decision 'revise', say what to change")
    runs = await _service(ctx)
    await _own(runs, run_id)  # with auth on, only the principal who started the run may answer it
    record = await runs.get(run_id)
    assert record is not None  # it was there a moment ago: runs are never deleted
    try:
        answered = await runs.answer(run_id, Decision(action=decision, feedback=feedback), checkpoint, round)
    except LookupError as exc:  # runs.approvals.NotWaiting, not imported here: that would load DBOS at start-up
        raise ToolError(_not_waiting(await runs.get(run_id) or record, checkpoint, round, exc)) from None
    # The run takes the answer in its own task: the record returned is the first that shows it among the run's
    # checkpoints (or the run finished), which the run writes once the answer is recorded: a restart from then
    # on never asks this question again.
    latest = record
    with anyio.move_on_after(ANSWER_SHOWN_WITHIN):
        async for latest in runs.subscribe(run_id):
            if latest.finished or _shows(latest, answered):
                break
    return latest.view()


def _not_waiting(record: Any, checkpoint: str | None, round_: int | None, exc: LookupError) -> str:
    """Why the answer was refused, with where the run waits now (its record read after the refusal: a retried
    answer finds the run a round further on than when the call began)."""
    where = f"at checkpoint '{checkpoint}'" if checkpoint else "at a checkpoint"
    where += f" in round {round_}" if round_ is not None else ""
    waiting = record.waiting
    if waiting is not None:
        now = f"it waits at '{waiting.name}' in round {waiting.round}"
    elif record.finished:
        now = f"its status: {record.status}"
    else:  # e.g. re-planning after a revise: its next round shows in get_run once it waits there
        now = "it is running and waits at no checkpoint now"
    why = getattr(exc, "reason", None) or now
    return f"run '{record.run_id}' is not waiting {where} in this server ({why}); nothing was answered, see get_run"


def _shows(record: Any, answered: Checkpoint) -> bool:
    if answered.run_id != record.run_id:  # a sub-team's question: its answers are on its handoff's record
        return bool(record.waiting != answered)
    taken = record.result.checkpoints if record.result is not None else []
    return any((c.name, c.round) == (answered.name, answered.round) for c in taken)


ANSWER_SHOWN_WITHIN = 5.0  # seconds answer_checkpoint waits for the run's record to show its answer taken


def add_checkpoint_tools(server: MCPServer[ServerState]) -> None:
    """`answer_checkpoint` (with the run tools: it needs durable runs)."""
    server.add_tool(
        answer_checkpoint,
        name="answer_checkpoint",
        description=described(answer_checkpoint),
        title="Answer a run's checkpoint",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    )
