"""Human checkpoints over MCP: the engine's `Approver` (handoffs/checkpoints.py) filled with elicitation.

A checkpoint becomes an `elicitation/create` request in form mode: the message says what is to be
approved (the plan's tasks, or what the next member will get), and the form asks for a decision
(approve, revise, reject) and feedback for a revise. By protocol revision:
- 2025-11-25 with a back-channel (stdio, stateful HTTP): the request is sent during the call,
  related to it (`related_request_id`);
- 2026-07-28: the run is parked (see `sampling.RoundRunner`) and the request is an `input_required`
  round, batched with any sampling requests of the same moment.
A client that declares no elicitation cannot approve: `CannotAsk`, and the team's checkpoint
policy decides. Declining or cancelling the form is a reject.
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server.mcpserver import Context
from mcp.shared.message import ServerMessageMetadata

from mcp_team.handoffs.checkpoints import Approver, CannotAsk, Checkpoint, Decision
from mcp_team.server.client_features.sampling import CtxGetter, current_job

FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Decision",
            "enum": ["approve", "revise", "reject"],
            "description": "approve: go on; revise: change it as the feedback says, then ask again; reject: stop.",
        },
        "feedback": {"type": "string", "title": "Feedback", "description": "With revise: what to change."},
    },
    "required": ["decision"],
}


def can_elicit(ctx: Context[Any, Any]) -> bool:
    caps = ctx.client_capabilities
    return caps is not None and caps.elicitation is not None


def elicit_in_rounds(ctx: Context[Any, Any]) -> bool:
    """Whether this call's checkpoints need the run parked: elicitation, 2026-07-28, no back-channel."""
    return can_elicit(ctx) and not ctx.session.can_send_request and (ctx.protocol_version or "") >= "2026"


def request_for(checkpoint: Checkpoint, problem: str = "") -> types.ElicitRequest:
    where = "the plan" if checkpoint.name == "plan" else f"the next step ({checkpoint.name})"
    again = f" (round {checkpoint.round})" if checkpoint.round > 1 else ""
    redo = f"Your last answer could not be used: {problem}. Please answer again.\n\n" if problem else ""
    message = f"{redo}mcp-team asks you to approve {where}{again}:\n\n{checkpoint.summary}"
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=FORM))


ASKS = 3  # times a form that came back unusable is asked again before it counts as a reject


def decision_of(result: types.ElicitResult) -> Decision | str:
    """The person's answer (a declined or cancelled form is a reject), or what makes an accepted form unusable."""
    if result.action != "accept":
        return Decision(action="reject", feedback=f"the person chose to {result.action} the form")
    content = result.content or {}
    action = content.get("decision")
    feedback = content.get("feedback")
    feedback = feedback if isinstance(feedback, str) else ""
    if action not in ("approve", "revise", "reject"):
        return f"the decision must be approve, revise or reject, not {action!r}"
    if action == "revise" and not feedback.strip():
        return "with revise, say in the feedback what to change"
    return Decision(action=action, feedback=feedback)  # type: ignore[arg-type]


POLICY = 'set checkpoint_policy = "approve" in the team file\'s [supervisor] to go on without asking'
ELICIT_WAY_OUT = f"Answer from an MCP client that supports elicitation, or {POLICY}"
TOOL_WAY_OUT = (
    "To answer from this client, start the run with start_run, watch get_run until it shows `waiting`, and "
    f"answer it with answer_checkpoint; or {POLICY}"
)


def elicitation_approver(get_ctx: CtxGetter, *, by_tool: bool = False) -> Approver:
    """Ask the MCP client of the current call (see the module docstring). `by_tool`: the run is one that
    start_run could run too (durable, on the server's model), so a client that cannot be asked is told that way."""
    way_out = TOOL_WAY_OUT if by_tool else ELICIT_WAY_OUT

    async def approve(checkpoint: Checkpoint) -> Decision:
        problem = ""
        for _ in range(ASKS):
            try:
                asked = await ask(checkpoint, problem)
            except CannotAsk as exc:  # told what works on this server, not every way there is
                raise CannotAsk(str(exc), way_out) from None
            answer = decision_of(asked)
            if isinstance(answer, Decision):
                return answer
            problem = answer  # a slip in the form (no decision, a revise without feedback): asked again
        return Decision(action="reject", feedback=f"the form came back unusable {ASKS} times ({problem})")

    async def ask(checkpoint: Checkpoint, problem: str) -> types.ElicitResult:
        ctx = get_ctx()
        if not can_elicit(ctx):
            raise CannotAsk("the MCP client does not support elicitation, so it cannot approve")
        request = request_for(checkpoint, problem)
        job = current_job.get()
        if job is not None:
            # Until the checkpoint's timeout ends the wait (handoffs/checkpoints.ask), not a model call's round: a
            # person reading a plan may take longer than a client takes to come back for a model call.
            answer = await job.ask(request, within=math.inf)
            if answer is None:
                raise CannotAsk("the client stopped answering input_required rounds")
            return answer
        if not ctx.session.can_send_request:
            raise CannotAsk("this connection has no way to ask the client during a call")
        try:
            result = await ctx.session.send_request(
                request, types.ElicitResult, metadata=ServerMessageMetadata(related_request_id=ctx.request_id)
            )
        except MCPError as exc:
            raise CannotAsk(f"the client refused the elicitation request ({exc})") from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
            raise CannotAsk("the client went away before answering") from None
        return result

    return approve
