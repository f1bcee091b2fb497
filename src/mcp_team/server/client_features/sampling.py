"""The sampling backend: the team runs on the MCP client's own model.

Two ways, by protocol revision:
- 2025-11-25 with a back-channel (stdio, stateful HTTP): each model call is a
  `sampling/createMessage` request sent mid-call with `related_request_id`.
- 2026-07-28 (no back-channel): the run is parked in the server's task group and its model calls
  become `input_required` rounds. Requests that parallel branches make at about the same time are
  batched into one round, so a whole run fits the client's round limit.
"""

from __future__ import annotations

import itertools
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from mcp import MCPError
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.validation import validate_tool_use_result_messages
from mcp.shared.message import ServerMessageMetadata

from mcp_team.llm import ModelSet
from mcp_team.llm.types import (
    ContentBlock,
    ModelError,
    ModelRequest,
    ModelResponse,
    StopReason,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)

T = TypeVar("T")
CtxGetter = Callable[[], Context[Any, Any]]

SETTLE_SECONDS = 0.03  # quiet time before a round is sent, so parallel branches share it
JOB_TTL_SECONDS = 600.0  # a parked run the client stopped answering is cancelled after this

_STOP: dict[str, StopReason] = {
    "endTurn": "end_turn",
    "toolUse": "tool_use",
    "maxTokens": "max_tokens",
    "stopSequence": "stop_sequence",
}


def _has_sampling_tools(ctx: Context[Any, Any]) -> bool:
    caps = ctx.client_capabilities
    return caps is not None and caps.sampling is not None and caps.sampling.tools is not None


def can_sample_now(ctx: Context[Any, Any]) -> bool:
    """Sampling with tools over a back-channel (2025-11-25 stdio or stateful HTTP)."""
    return _has_sampling_tools(ctx) and ctx.session.can_send_request


def can_sample_in_rounds(ctx: Context[Any, Any]) -> bool:
    """Sampling with tools through input_required rounds (2026-07-28)."""
    return _has_sampling_tools(ctx) and not ctx.session.can_send_request and (ctx.protocol_version or "") >= "2026"


def sampling_params(request: ModelRequest) -> types.CreateMessageRequestParams:
    return types.CreateMessageRequestParams(
        messages=[
            types.SamplingMessage(role=m.role, content=[_to_wire(b) for b in m.blocks]) for m in request.messages
        ],
        system_prompt=request.system,
        max_tokens=request.max_tokens,
        temperature=request.temperature,
        tools=[types.Tool(name=t.name, description=t.description, input_schema=t.input_schema) for t in request.tools]
        or None,
        tool_choice=types.ToolChoice(mode="auto") if request.tools else None,
    )


def from_sampling_result(result: types.CreateMessageResult | types.CreateMessageResultWithTools) -> ModelResponse:
    blocks = result.content_as_list if isinstance(result, types.CreateMessageResultWithTools) else [result.content]
    content: list[TextBlock | ToolUseBlock] = []
    for block in blocks:
        if isinstance(block, types.TextContent):
            content.append(TextBlock(text=block.text))
        elif isinstance(block, types.ToolUseContent):
            content.append(ToolUseBlock(id=block.id, name=block.name, input=dict(block.input)))
    default: StopReason = "tool_use" if any(isinstance(b, ToolUseBlock) for b in content) else "end_turn"
    return ModelResponse(
        content=content,
        stop_reason=_STOP.get(result.stop_reason or "", default),
        model=result.model or "client-model",
        usage=Usage(),
    )


def _to_wire(block: ContentBlock) -> types.SamplingMessageContentBlock:
    if isinstance(block, TextBlock):
        return types.TextContent(type="text", text=block.text)
    if isinstance(block, ToolUseBlock):
        return types.ToolUseContent(type="tool_use", id=block.id, name=block.name, input=block.input)
    assert isinstance(block, ToolResultBlock)
    return types.ToolResultContent(
        type="tool_result",
        tool_use_id=block.tool_use_id,
        is_error=block.is_error,
        content=[types.TextContent(type="text", text=block.content)],
    )


class SamplingModel:
    """A `Model` that sends every call to the client of one request, over the back-channel."""

    provider = "mcp_sampling"
    name = "client-model"

    def __init__(self, ctx: Context[Any, Any]) -> None:
        self._ctx = ctx

    async def complete(self, request: ModelRequest) -> ModelResponse:
        p = sampling_params(request)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # sampling is deprecated on 2026-07-28; this is the 2025 path
                # Not session.create_message: without tools it sends no toolChoice (right: a specialist with
                # no tools has nothing to choose) but then reads the reply as the single-block
                # CreateMessageResult, refusing the array content clients may send. The request it would
                # send, read as the result type both shapes fit.
                validate_tool_use_result_messages(p.messages)
                result = await self._ctx.session.send_request(
                    types.CreateMessageRequest(params=p),
                    types.CreateMessageResultWithTools,
                    metadata=ServerMessageMetadata(related_request_id=self._ctx.request_id),
                )
        except MCPError as exc:
            raise ModelError("unavailable", f"the client's model refused the sampling request: {exc}") from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
            raise ModelError("connection", "the client went away before answering the sampling request") from None
        except Exception as exc:  # the SDK also raises ValueError and NoBackChannelError
            raise ModelError("unavailable", f"cannot sample from the client: {type(exc).__name__}: {exc}") from None
        return from_sampling_result(result)


@dataclass
class _Slot:
    request: types.CreateMessageRequest | types.ElicitRequest
    answered: anyio.Event = field(default_factory=anyio.Event)
    response: types.CreateMessageResultWithTools | types.ElicitResult | None = None
    sent: bool = False


@dataclass
class ParkedJob:
    """A run waiting between input_required rounds."""

    ctx: Context[Any, Any]
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    slots: dict[str, _Slot] = field(default_factory=dict)
    changed: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: bool = False
    outcome: Any = None
    error: BaseException | None = None
    touched: float = field(default_factory=time.monotonic)
    _keys: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def poke(self) -> None:
        self.changed.set()

    @property
    def asks_a_person(self) -> bool:
        """Whether a checkpoint's question (elicitation) waits for its answer: a person may take longer than a
        client takes to come back for a model call."""
        return any(isinstance(s.request, types.ElicitRequest) for s in self.slots.values())

    async def ask(self, request: types.CreateMessageRequest | types.ElicitRequest, within: float | None = None) -> Any:
        """Put `request` in the next round and wait for the client's answer (None after `within` seconds, by default
        `JOB_TTL_SECONDS`)."""
        key = f"{'llm' if isinstance(request, types.CreateMessageRequest) else 'elicit'}-{next(self._keys)}"
        slot = _Slot(request)
        self.slots[key] = slot
        self.poke()
        try:
            with anyio.move_on_after(JOB_TTL_SECONDS if within is None else within):
                await slot.answered.wait()
        finally:
            self.slots.pop(key, None)
        return slot.response


# The parked job a run's task belongs to, so what it asks of the client (elicitation) joins its rounds.
current_job: ContextVar[ParkedJob | None] = ContextVar("mcp_team_parked_job", default=None)


class RoundModel:
    """A `Model` whose calls wait for the client to answer them in the next input_required round."""

    provider = "mcp_sampling"
    name = "client-model"

    def __init__(self, job: ParkedJob) -> None:
        self._job = job

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response = await self._job.ask(types.CreateMessageRequest(params=sampling_params(request)))
        if response is None:
            raise ModelError("timeout", f"the client did not answer a sampling round within {JOB_TTL_SECONDS:g} s")
        return from_sampling_result(response)


@dataclass
class RoundRunner:
    """Owns parked runs: starts them in the server's task group and moves them round by round."""

    task_group: TaskGroup | None = None
    jobs: dict[str, ParkedJob] = field(default_factory=dict)

    async def run(
        self,
        ctx: Context[Any, Any],
        max_concurrency: int,
        work: Callable[[ModelSet, CtxGetter], Awaitable[T]],
        models: ModelSet | None = None,
    ) -> T | types.InputRequiredResult:
        """Start or resume a parked run. `models`: the server's own, when the run is parked only for what
        else it asks the client (elicitation); by default the client's model, in rounds."""
        self._expire()
        job = self._start(ctx, max_concurrency, work, models) if ctx.request_state is None else self._resume(ctx)
        try:
            await self._settle(job)
        except anyio.get_cancelled_exc_class():
            job.scope.cancel()  # the client gave up on this call: stop the run
            self.jobs.pop(job.id, None)
            raise
        if job.done:
            self.jobs.pop(job.id, None)
            if job.error is not None:
                raise job.error
            return job.outcome
        requests: dict[str, types.InputRequest] = {}
        for key, slot in job.slots.items():
            if not slot.sent:
                slot.sent = True
                requests[key] = slot.request
        return types.InputRequiredResult(input_requests=requests, request_state=job.id)

    def _start(
        self,
        ctx: Context[Any, Any],
        max_concurrency: int,
        work: Callable[[ModelSet, CtxGetter], Awaitable[T]],
        own: ModelSet | None = None,
    ) -> ParkedJob:
        if self.task_group is None:
            raise ToolError("the server is not running its background task group; this is a bug in mcp-team")
        job = ParkedJob(ctx)
        self.jobs[job.id] = job
        models = own or ModelSet.single(RoundModel(job), max_concurrency)

        async def runner() -> None:
            current_job.set(job)
            with job.scope:
                try:
                    job.outcome = await work(models, lambda: job.ctx)
                except Exception as exc:  # delivered to the client on its next round
                    job.error = exc
            job.done = True
            job.poke()

        self.task_group.start_soon(runner)
        return job

    def _resume(self, ctx: Context[Any, Any]) -> ParkedJob:
        job = self.jobs.get(ctx.request_state or "")
        if job is None:
            raise ToolError(
                "this run is no longer waiting for input (it finished, expired or was cancelled); "
                "call the tool again to start a new run"
            )
        job.ctx, job.touched = ctx, time.monotonic()
        for key, answer in (ctx.input_responses or {}).items():
            slot = job.slots.get(key)
            if slot is None:
                continue
            kind = types.ElicitResult if isinstance(slot.request, types.ElicitRequest) else None
            slot.response = (kind or types.CreateMessageResultWithTools).model_validate(
                answer.model_dump(by_alias=True, exclude_none=True)
            )
            slot.answered.set()
        return job

    @staticmethod
    async def _settle(job: ParkedJob) -> None:
        """Wait until the run finishes, or has unsent requests and has been quiet for a moment."""
        while True:
            job.changed = anyio.Event()
            if job.done:
                return
            if any(not s.sent for s in job.slots.values()):
                with anyio.move_on_after(SETTLE_SECONDS) as quiet:
                    await job.changed.wait()
                if quiet.cancelled_caught:
                    return
            else:
                await job.changed.wait()

    def cancel_all(self) -> None:
        """Stop every parked run (the server is shutting down)."""
        for job in self.jobs.values():
            job.scope.cancel()
        self.jobs.clear()

    def _expire(self) -> None:
        """Forget runs no client came back for (finished ones whose result nobody fetched, too)."""
        now = time.monotonic()
        for job in list(self.jobs.values()):
            if job.asks_a_person:  # its checkpoint's own timeout ends the wait
                continue
            if now - job.touched > 2 * JOB_TTL_SECONDS:
                job.scope.cancel()
                self.jobs.pop(job.id, None)
