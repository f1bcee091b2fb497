"""Per-endpoint limits: calls in flight, requests and tokens per minute, each endpoint on its own."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import anyio
import pytest
from anyio.abc import TaskGroup
from pydantic import ValidationError

from mcp_team.llm.limits import (
    DEFAULT_URL,
    EndpointLimiter,
    EndpointLimits,
    Limiters,
    endpoint_of,
    estimate_tokens,
)
from mcp_team.llm.offline import OfflineModel
from mcp_team.llm.types import Message, ModelRequest, ToolDefinition, ToolResultBlock, ToolUseBlock

pytestmark = pytest.mark.anyio


@dataclass
class Endpoint:
    """A model as far as the limiters care: a provider and a base URL."""

    provider: str
    base_url: str | None = None
    name: str = "m"

    async def complete(self, request: ModelRequest) -> None:  # pragma: no cover - never called
        raise AssertionError


async def entered(tg: TaskGroup, limiter: EndpointLimiter, tokens: int = 0) -> Callable[[], bool]:
    """Start taking a slot in `tg`; once every task is blocked, the returned check says whether it got in."""
    got_in = anyio.Event()

    async def take() -> None:
        async with limiter.slot(tokens):
            got_in.set()
            await anyio.sleep_forever()

    tg.start_soon(take)
    await anyio.wait_all_tasks_blocked()
    return got_in.is_set


@pytest.fixture
async def tasks() -> AsyncIterator[TaskGroup]:
    """A task group for the slot holders, cancelled when the test ends."""
    async with anyio.create_task_group() as tg:
        yield tg
        tg.cancel_scope.cancel()


async def test_concurrency_is_per_endpoint(tasks: TaskGroup) -> None:
    limiters = Limiters(EndpointLimits(max_concurrency=1))
    openai = limiters.for_model(Endpoint("openai"))
    anthropic = limiters.for_model(Endpoint("anthropic"))

    assert (await entered(tasks, openai))()
    second_openai = await entered(tasks, openai)
    assert not second_openai()  # the one slot is taken
    assert (await entered(tasks, anthropic))()  # another provider does not wait for it
    assert (
        await entered(tasks, limiters.for_model(Endpoint("openai", "http://127.0.0.1:11434/v1")))
    )()  # nor another URL


async def test_a_freed_slot_goes_to_the_next_caller() -> None:
    limiter = EndpointLimiter(EndpointLimits(max_concurrency=1))
    release, order = anyio.Event(), []

    async def first() -> None:
        async with limiter.slot():
            order.append("first")
            await release.wait()

    async def second() -> None:
        async with limiter.slot():
            order.append("second")

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(second)
        await anyio.wait_all_tasks_blocked()
        assert order == ["first"]
        release.set()
    assert order == ["first", "second"]


async def test_a_cancelled_waiter_takes_nothing() -> None:
    limiter = EndpointLimiter(EndpointLimits(max_concurrency=1, requests_per_minute=2))
    async with anyio.create_task_group() as tg:
        holder = anyio.CancelScope()

        async def hold() -> None:
            with holder:
                async with limiter.slot():
                    await anyio.sleep_forever()

        tg.start_soon(hold)
        await anyio.wait_all_tasks_blocked()
        with anyio.CancelScope() as waiting:
            tg.start_soon(lambda: _cancel_soon(waiting))
            async with limiter.slot():
                raise AssertionError("got a slot that was taken")
        holder.cancel()
    async with limiter.slot():  # the second request of the minute is still there
        assert limiter.calls.borrowed_tokens == 1


async def _cancel_soon(scope: anyio.CancelScope) -> None:
    await anyio.wait_all_tasks_blocked()
    scope.cancel()


async def test_requests_per_minute(tasks: TaskGroup) -> None:
    limiters = Limiters(EndpointLimits(max_concurrency=10, requests_per_minute=2))
    openai = limiters.for_model(Endpoint("openai"))
    assert (await entered(tasks, openai))() and (await entered(tasks, openai))()  # a burst of the minute's allowance
    assert not (await entered(tasks, openai))()  # the third waits for the bucket to drip (30 s)
    assert (await entered(tasks, limiters.for_model(Endpoint("anthropic"))))()


async def test_tokens_per_minute(tasks: TaskGroup) -> None:
    limiters = Limiters(EndpointLimits(tokens_per_minute=1000))
    openai = limiters.for_model(Endpoint("openai"))
    assert (await entered(tasks, openai, 600))()
    assert not (await entered(tasks, openai, 600))()  # 1200 > 1000 in the minute
    assert (await entered(tasks, limiters.for_model(Endpoint("anthropic")), 600))()


async def test_a_call_larger_than_the_minute_allowance_waits_for_an_empty_bucket(tasks: TaskGroup) -> None:
    limiter = EndpointLimiter(EndpointLimits(tokens_per_minute=1000))
    assert (await entered(tasks, limiter, 50_000))()  # empty bucket: it goes (the provider decides if it fits)
    assert not (await entered(tasks, limiter, 500))()  # the bucket is full: 30 s until 500 more


def test_overrides_by_url_then_provider_then_default() -> None:
    limiters = Limiters(
        EndpointLimits(max_concurrency=8),
        {
            "openai": EndpointLimits(max_concurrency=4, requests_per_minute=500),
            "http://127.0.0.1:11434/v1/": EndpointLimits(max_concurrency=1),
        },
    )
    ollama = limiters.for_model(Endpoint("openai", "http://127.0.0.1:11434/v1"))
    openai = limiters.for_model(Endpoint("openai"))
    anthropic = limiters.for_model(Endpoint("anthropic", "https://gateway.example/anthropic"))
    assert ollama.limits == EndpointLimits(max_concurrency=1)
    assert openai.limits == EndpointLimits(max_concurrency=4, requests_per_minute=500)
    assert anthropic.limits == EndpointLimits(max_concurrency=8)
    assert limiters.for_model(Endpoint("openai", name="other-model")) is openai  # one limiter per endpoint
    assert limiters.for_model(Endpoint("openai", "http://127.0.0.1:11434/v1/")) is ollama


def test_endpoint_of() -> None:
    assert endpoint_of(OfflineModel()) == ("offline", DEFAULT_URL)
    assert endpoint_of(Endpoint("openai")) == ("openai", DEFAULT_URL)
    assert endpoint_of(Endpoint("openai", "http://h:1/v1/")) == ("openai", "http://h:1/v1")


def test_limits_are_validated() -> None:
    for bad in ({"max_concurrency": 0}, {"requests_per_minute": 0}, {"tokens_per_minute": -5}, {"rpm": 3}):
        with pytest.raises(ValidationError):
            EndpointLimits.model_validate(bad)


def test_estimate_tokens_counts_the_prompt_and_the_output_limit() -> None:
    tool = ToolDefinition(name="t", description="d" * 40, input_schema={})
    request = ModelRequest(
        system="s" * 400,
        tools=[tool],
        max_tokens=1000,
        messages=[
            Message(role="user", content="u" * 400),
            Message(role="assistant", content=[ToolUseBlock(id="1", name="t", input={})]),
            Message(role="user", content=[ToolResultBlock(tool_use_id="1", content="r" * 398)]),
        ],
    )
    # 400 + 40 + 2 ("{}") + 400 + 2 + 398 characters = 1242 -> 310 tokens, plus the 1000 it may write
    assert estimate_tokens(request) == 1310
