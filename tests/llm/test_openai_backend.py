"""The OpenAI-compatible backend through the real `openai` SDK, over a real socket, against a fake
Chat Completions API; and whole team runs on it, with the offline model as the server's brain."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from mcp_team.handoffs import RunResult, Team
from mcp_team.handoffs.schema import Mode
from mcp_team.llm import SPECIALIST, SUPERVISOR, ModelSet
from mcp_team.llm.anthropic import AnthropicModel
from mcp_team.llm.building import build_models
from mcp_team.llm.chat_completions import parse_arguments, to_messages, to_tool_params
from mcp_team.llm.listening import local_address
from mcp_team.llm.openai import OpenAIModel, token_limit_param
from mcp_team.llm.settings import ModelSettings
from mcp_team.llm.types import (
    Message,
    Model,
    ModelError,
    ModelRequest,
    ModelResponse,
    StopReason,
    TextBlock,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from mcp_team.telemetry.attributes import OP_CHAT, PROVIDER_NAME, REQUEST_MODEL, RESPONSE_MODEL
from support import HANG_GUARD
from support.fake_api import Reply, offline_brain
from support.fake_messages_api import FakeMessagesAPI
from support.fake_openai_api import (
    FakeOpenAIAPI,
    StreamOnly,
    ToolsError,
    completion,
    error_body,
    request_from_json,
    response_to_json,
    stream,
    tool_call,
)
from support.spans import Spans

pytestmark = pytest.mark.anyio

KEY = "sk-proj-test-SECRET-0123456789"
MODEL = "gpt-4o-mini"
REQUEST = "Research the history of the transistor, compute 12*(3+4)/2, write a short report, then review it."

TOOLS = [
    ToolDefinition(
        name="search",
        description="Search the notes.",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
    ),
    ToolDefinition(
        name="read",
        description="Read one note.",
        input_schema={"type": "object", "properties": {"id": {"type": "string"}}},
    ),
]


@pytest.fixture(autouse=True)
def no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's own OpenAI settings never leak into these tests."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def api() -> Iterator[FakeOpenAIAPI]:
    with FakeOpenAIAPI() as server:
        yield server


def model_for(
    api: FakeOpenAIAPI, name: str = MODEL, *, max_retries: int = 2, timeout: float = 5.0, key: str | None = KEY
) -> OpenAIModel:
    return OpenAIModel(name, api_key=key, base_url=api.base_url, max_retries=max_retries, timeout=timeout)


def ask(text: str = "Find the launch notes.", tools: list[ToolDefinition] = TOOLS) -> ModelRequest:
    return ModelRequest(
        system="You are the researcher.", messages=[Message(role="user", content=text)], tools=tools, max_tokens=1234
    )


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- the model interface and the wire --------------------------------------------------------------


async def test_is_a_model() -> None:
    model = OpenAIModel(MODEL, api_key=KEY)
    assert isinstance(model, Model)
    assert (model.name, model.provider, model.base_url) == (MODEL, "openai", None)
    assert KEY not in repr(model)


async def test_several_tool_calls_in_one_turn_round_trip(api: FakeOpenAIAPI) -> None:
    api.reply(
        200,
        completion(
            "Let me look.",
            [tool_call("call_1", "search", {"q": "launch"}), tool_call("call_2", "read", {"id": "n7"})],
            "tool_calls",
            model="gpt-4o-mini-2024-07-18",
            id="chatcmpl-1",
        ),
    )
    api.reply(200, completion("The launch is on Monday."))
    model = model_for(api)

    first = await model.complete(ask())
    assert first.stop_reason == "tool_use"
    assert (first.id, first.model, first.text) == ("chatcmpl-1", "gpt-4o-mini-2024-07-18", "Let me look.")
    assert first.tool_uses == [
        ToolUseBlock(id="call_1", name="search", input={"q": "launch"}),
        ToolUseBlock(id="call_2", name="read", input={"id": "n7"}),
    ]

    follow_up = ModelRequest(
        system="You are the researcher.",
        tools=TOOLS,
        messages=[
            Message(role="user", content="Find the launch notes."),
            Message(role="assistant", content=list(first.content)),
            Message(
                role="user",
                content=[
                    ToolResultBlock(tool_use_id="call_1", content="launch: Monday"),
                    ToolResultBlock(tool_use_id="call_2", content="no such note", is_error=True),
                    TextBlock(text="Be brief."),
                ],
            ),
        ],
    )
    second = await model.complete(follow_up)
    assert (second.text, second.stop_reason) == ("The launch is on Monday.", "end_turn")

    assert api.requests[1]["messages"] == [
        {"role": "system", "content": "You are the researcher."},
        {"role": "user", "content": "Find the launch notes."},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q": "launch"}'}},
                {"id": "call_2", "type": "function", "function": {"name": "read", "arguments": '{"id": "n7"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "launch: Monday"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: no such note"},
        {"role": "user", "content": "Be brief."},
    ]
    await model.aclose()


async def test_wire_shape(api: FakeOpenAIAPI) -> None:
    api.reply(200, completion("ok"))
    await model_for(api).complete(ask())
    body, headers = api.requests[0], api.request_headers[0]
    assert body["model"] == MODEL
    assert body["max_tokens"] == 1234 and "max_completion_tokens" not in body  # a compatible server
    assert body["parallel_tool_calls"] is True
    assert body["tools"] == [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}
        for t in TOOLS
    ]
    assert body["messages"][0] == {"role": "system", "content": "You are the researcher."}
    assert headers["authorization"] == f"Bearer {KEY}"


async def test_no_system_and_no_tools_are_left_out(api: FakeOpenAIAPI) -> None:
    api.reply(200, completion("ok"))
    await model_for(api).complete(ModelRequest(system="", messages=[Message(role="user", content="hi")]))
    body = api.requests[0]
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert "tools" not in body and "parallel_tool_calls" not in body


@pytest.mark.parametrize(
    ("model", "base_url", "param"),
    [
        ("gpt-4o-mini", None, "max_completion_tokens"),  # OpenAI's own API: the current parameter
        ("gpt-4o-mini", "https://api.openai.com/v1/", "max_completion_tokens"),
        ("gpt-4o-mini", "http://127.0.0.1:11434/v1", "max_tokens"),  # compatible servers read max_tokens
        ("qwen2.5:7b", "http://127.0.0.1:11434/v1", "max_tokens"),
        ("o3-mini", "https://example.openai.azure.com/openai/v1", "max_completion_tokens"),  # reasoning models
        ("o1", "http://127.0.0.1:8000/v1", "max_completion_tokens"),
        ("gpt-5-mini", "http://127.0.0.1:8000/v1", "max_completion_tokens"),
        ("openai/gpt-5", "https://openrouter.ai/api/v1", "max_completion_tokens"),
        ("gpt-4.1", "https://openrouter.ai/api/v1", "max_tokens"),
        ("olmo-2", "http://127.0.0.1:8000/v1", "max_tokens"),  # not an o-series name
    ],
)
def test_token_limit_param(model: str, base_url: str | None, param: str) -> None:
    assert token_limit_param(model, OpenAIModel(model, api_key=KEY, base_url=base_url).base_url) == param


async def test_reasoning_model_gets_max_completion_tokens(api: FakeOpenAIAPI) -> None:
    api.reply(200, completion("ok"))
    await model_for(api, "gpt-5-mini").complete(ask())
    assert api.requests[0]["max_completion_tokens"] == 1234 and "max_tokens" not in api.requests[0]


async def test_usage_with_cached_tokens(api: FakeOpenAIAPI) -> None:
    api.reply(
        200,
        completion(
            "ok", usage={"prompt_tokens": 100, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 60}}
        ),
    )
    response = await model_for(api).complete(ask())
    assert response.usage == Usage(input_tokens=100, output_tokens=7, cache_read_input_tokens=60)


async def test_missing_usage_counts_zero_at_an_unknown_cost_and_says_so_once(
    api: FakeOpenAIAPI, caplog: pytest.LogCaptureFixture
) -> None:
    api.reply(200, completion("one", usage={}))
    api.reply(200, completion("two", usage={"prompt_tokens": None, "completion_tokens": None}))
    api.reply(200, completion("three", usage={"prompt_tokens": 12}))
    model = model_for(api)
    with caplog.at_level(logging.WARNING, logger="mcp_team.llm.openai"):
        responses = [await model.complete(ask()) for _ in range(3)]
    unknown = Usage(cost_usd=None)
    assert [r.usage for r in responses] == [unknown, unknown, Usage(input_tokens=12, cost_usd=None)]
    warnings = [r.getMessage() for r in caplog.records if "reports no token usage" in r.getMessage()]
    assert len(warnings) == 1 and api.base_url in warnings[0] and MODEL in warnings[0]


@pytest.mark.parametrize(
    ("finish_reason", "calls", "stop_reason"),
    [
        ("stop", False, "end_turn"),
        ("length", False, "max_tokens"),
        ("tool_calls", True, "tool_use"),
        ("stop", True, "tool_use"),  # some servers say "stop" after tool calls
        (None, True, "tool_use"),
        (None, False, "end_turn"),
        ("content_filter", False, "refusal"),
        ("something_new", False, "end_turn"),
    ],
)
async def test_stop_reasons(api: FakeOpenAIAPI, finish_reason: str | None, calls: bool, stop_reason: str) -> None:
    api.reply(200, completion("x", [tool_call("c", "search", {})] if calls else None, finish_reason))
    assert (await model_for(api).complete(ask())).stop_reason == stop_reason


async def test_refusal_is_text_with_stop_reason_refusal(api: FakeOpenAIAPI) -> None:
    body = completion(None)
    body["choices"][0]["message"]["refusal"] = "I can't help with that."
    api.reply(200, body)
    response = await model_for(api).complete(ask())
    assert (response.text, response.stop_reason) == ("I can't help with that.", "refusal")


async def test_missing_ids_types_and_model_are_filled_in(api: FakeOpenAIAPI) -> None:
    calls = [tool_call("", "search", {"q": "a"}), tool_call("", "read", {})]
    del calls[0]["type"]
    calls[1]["function"]["arguments"] = {"id": "n1"}  # an object, not JSON text
    body = completion(None, calls, "tool_calls")
    del body["model"], body["id"]
    api.reply(200, body)
    response = await model_for(api).complete(ask())
    assert [(u.id, u.name, u.input) for u in response.tool_uses] == [
        ("call_0", "search", {"q": "a"}),
        ("call_1", "read", {"id": "n1"}),
    ]
    assert (response.model, response.id) == (MODEL, None)


@pytest.mark.parametrize(
    ("content", "finish_reason", "text", "stop_reason"),
    [
        ("<think>\nThey want the notes.\n</think>\n\nThe notes say X.", "stop", "The notes say X.", "end_turn"),
        ("  <think>a</think>The notes say X.", "stop", "The notes say X.", "end_turn"),
        # The chat template opened the tag in the prompt: only its end is in the reply.
        ("They want the notes.\n</think>\n\nThe notes say X.", "stop", "The notes say X.", "end_turn"),
        ("They want the notes.\n </think> \nThe notes say X.", "stop", "The notes say X.", "end_turn"),
        ("<think>\nThey want the notes, so I", "length", "", "max_tokens"),  # cut off while thinking
        ("Write <think> and </think> around it.", "stop", "Write <think> and </think> around it.", "end_turn"),
        # A closing tag in prose, not on a line of its own, is part of the answer.
        ("Split on </think> and keep what follows.", "stop", "Split on </think> and keep what follows.", "end_turn"),
        ("Split on\n</think> tags.", "stop", "Split on\n</think> tags.", "end_turn"),
        ("The notes say X.", "stop", "The notes say X.", "end_turn"),
    ],
)
async def test_thinking_written_into_the_content_is_not_the_answer(
    api: FakeOpenAIAPI, content: str, finish_reason: str, text: str, stop_reason: str
) -> None:
    api.reply(200, completion(content, finish_reason=finish_reason))
    response = await model_for(api).complete(ask())
    assert (response.text, response.stop_reason) == (text, stop_reason)


async def test_a_full_run_on_a_reasoning_model_that_thinks_in_its_content_answers_without_its_thinking() -> None:
    with FakeOpenAIAPI(brain=offline_brain, reasoning_in_content=True) as api:
        result, bodies = await run_team(api)
    assert result.status == "complete", result.failures
    assert "12*(3+4)/2 = 42" in result.answer
    assert "<think>" not in result.answer and "Let me work out" not in result.answer
    assert not [h.target for h in result.handoffs if "<think>" in h.output]
    assert not [m for b in bodies for m in b["messages"] if "<think>" in str(m.get("content"))]  # nor sent back


async def test_content_as_parts_is_text(api: FakeOpenAIAPI) -> None:
    api.reply(200, completion([{"type": "text", "text": "two "}, {"type": "text", "text": "parts"}]))
    assert (await model_for(api).complete(ask())).text == "two parts"


def test_a_local_server_gets_more_time_per_attempt() -> None:
    assert OpenAIModel(MODEL, api_key=KEY).timeout == 120
    assert OpenAIModel("qwen2.5:7b", base_url="http://127.0.0.1:11434/v1").timeout == 600
    assert OpenAIModel("qwen2.5:7b", base_url="http://127.0.0.1:11434/v1", timeout=30).timeout == 30


async def test_a_reply_without_choices_is_a_server_error(api: FakeOpenAIAPI) -> None:
    body = completion("x")
    body["choices"] = []
    api.reply(200, body)
    with pytest.raises(ModelError) as caught:
        await model_for(api).complete(ask())
    assert caught.value.kind == "server_error" and "no choices" in caught.value.message


@pytest.mark.parametrize(
    ("body", "headers", "said"),
    [
        (b"{not json at all", {}, "not JSON: Expecting property name"),  # labelled JSON, but is not
        (b"<html><body>It works!</body></html>", {"content-type": "text/html"}, "It works!"),  # a web page
        (b'"just a string"', {}, "just a string"),
        (b'{"object": "list", "data": []}', {}, "not a Chat Completions reply: the reply has no choices"),
    ],
)
async def test_a_reply_that_is_not_the_apis_is_a_server_error_that_names_the_base_url(
    api: FakeOpenAIAPI, body: bytes, headers: dict[str, str], said: str
) -> None:
    api.reply(200, body, headers)
    with pytest.raises(ModelError) as caught:
        await model_for(api, max_retries=0).complete(ask())
    err = caught.value
    assert err.kind == "server_error" and said in err.message
    assert f"the server at {api.base_url} returned a reply to the {MODEL} call that could not be read" in err.message
    assert "check the base URL (OPENAI_BASE_URL)" in err.message


# -- tool-call arguments ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "parsed", "error"),
    [
        ('{"q": "bees"}', {"q": "bees"}, None),
        ("", {}, None),
        ("  ", {}, None),
        (None, {}, None),
        ('"{\\"q\\": \\"bees\\"}"', {"q": "bees"}, None),  # encoded twice
        ('{"q": "bees"', {}, "not valid JSON"),
        ("{'q': 'bees'}", {}, "not valid JSON"),
        ("[1, 2]", {}, "must be a JSON object, got list"),
        ("42", {}, "must be a JSON object, got int"),
        ({"q": "bees"}, {"q": "bees"}, None),  # an object instead of JSON text, as some servers send
        ([1], {}, "must be a JSON object, got list"),
    ],
)
def test_parse_arguments(raw: object, parsed: dict[str, object], error: str | None) -> None:
    value, problem = parse_arguments(raw)
    assert value == parsed
    assert (problem is None) if error is None else (problem is not None and error in problem)


async def test_invalid_arguments_become_an_input_error_and_go_back_as_empty(api: FakeOpenAIAPI) -> None:
    api.reply(200, completion(None, [tool_call("c1", "search", '{"q": "launch'), tool_call("c2", "read", {"id": "a"})]))
    api.reply(200, completion("done"))
    model = model_for(api)
    first = await model.complete(ask())
    broken, fine = first.tool_uses
    assert (broken.input, fine.input, fine.input_error) == ({}, {"id": "a"}, None)
    assert broken.input_error is not None
    assert "not valid JSON" in broken.input_error and '{"q": "launch' in broken.input_error

    history = [
        Message(role="user", content="Find it."),
        Message(role="assistant", content=list(first.content)),
        Message(
            role="user",
            content=[
                ToolResultBlock(tool_use_id="c1", content=broken.input_error, is_error=True),
                ToolResultBlock(tool_use_id="c2", content="a: ok"),
            ],
        ),
    ]
    await model.complete(ModelRequest(system="s", messages=history, tools=TOOLS))
    sent_calls = api.requests[1]["messages"][2]["tool_calls"]
    assert [c["function"]["arguments"] for c in sent_calls] == ["{}", '{"id": "a"}']


# -- retries and errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("retry_header", [{"retry-after-ms": "10"}, {"retry-after": "0"}])
async def test_rate_limit_then_success(api: FakeOpenAIAPI, retry_header: dict[str, str]) -> None:
    api.fail(
        429, "Rate limit reached for gpt-4o-mini", type="requests", code="rate_limit_exceeded", headers=retry_header
    )
    api.reply(200, completion("finally"))
    response = await model_for(api).complete(ask())
    assert response.text == "finally"
    assert [h["x-stainless-retry-count"] for h in api.request_headers] == ["0", "1"]


async def test_rate_limit_every_time(api: FakeOpenAIAPI) -> None:
    api.fail(429, "Rate limit reached", times=3, headers={"retry-after-ms": "10"})
    with pytest.raises(ModelError) as caught:
        await model_for(api, max_retries=2).complete(ask())
    err = caught.value
    assert (err.kind, err.status) == ("rate_limited", 429)
    assert "3 attempts" in err.message and "Rate limit reached" in err.message
    assert len(api.requests) == 3


async def test_server_error_until_retries_run_out(api: FakeOpenAIAPI) -> None:
    api.fail(500, "The server had an error while processing your request.", times=2, headers={"retry-after-ms": "10"})
    with pytest.raises(ModelError) as caught:
        await model_for(api, max_retries=1).complete(ask())
    err = caught.value
    assert (err.kind, err.status) == ("server_error", 500)
    assert "2 attempts" in err.message and "had an error" in err.message and api.base_url in err.message
    assert len(api.requests) == 2


async def test_overloaded(api: FakeOpenAIAPI) -> None:
    api.fail(503, "The engine is currently overloaded", times=2, headers={"retry-after-ms": "10"})
    with pytest.raises(ModelError) as caught:
        await model_for(api, max_retries=1).complete(ask())
    assert (caught.value.kind, caught.value.status) == ("overloaded", 503)


async def test_no_quota_is_not_a_rate_limit(api: FakeOpenAIAPI) -> None:
    api.fail(429, "You exceeded your current quota.", code="insufficient_quota", times=1, type="insufficient_quota")
    with pytest.raises(ModelError) as caught:
        await model_for(api, max_retries=0).complete(ask())
    assert caught.value.kind == "unavailable" and "no quota left" in caught.value.message


async def test_auth_error(api: FakeOpenAIAPI) -> None:
    api.fail(401, "Incorrect API key provided: sk-proj-****6789.", type="invalid_request_error", code="invalid_api_key")
    with pytest.raises(ModelError) as caught:
        await model_for(api).complete(ask())
    err = caught.value
    assert (err.kind, err.status) == ("auth", 401)
    assert "OPENAI_API_KEY" in err.message and KEY not in err.message and KEY not in str(err)
    assert len(api.requests) == 1  # not retried


async def test_echoed_key_is_redacted(api: FakeOpenAIAPI) -> None:
    api.fail(403, f"key {KEY} may not use this model", type="invalid_request_error")
    with pytest.raises(ModelError) as caught:
        await model_for(api).complete(ask())
    assert caught.value.kind == "auth"
    assert KEY not in caught.value.message and "[redacted]" in caught.value.message


async def test_unknown_model_names_the_model_and_the_models_route(api: FakeOpenAIAPI) -> None:
    api.reply(404, {"error": {"message": 'model "qwen9" not found, try pulling it first', "type": "api_error"}})
    with pytest.raises(ModelError) as caught:
        await model_for(api, "qwen9").complete(ask())
    err = caught.value
    assert (err.kind, err.status) == ("bad_request", 404)
    assert 'model "qwen9" not found' in err.message and f"{api.base_url}/models" in err.message
    assert len(api.requests) == 1


async def test_a_value_error_about_max_tokens_is_reported_not_retried(api: FakeOpenAIAPI) -> None:
    api.reply(400, error_body("max_tokens is too large: 99999. This model supports at most 16384.", param="max_tokens"))
    with pytest.raises(ModelError) as caught:
        await model_for(api).complete(ask())
    assert caught.value.kind == "bad_request" and "too large" in caught.value.message
    assert len(api.requests) == 1


@pytest.mark.parametrize(
    ("style", "said"),
    [
        ("ollama", "does not support tools"),
        ("llama.cpp", "tools param requires --jinja flag"),
        ("vllm", "--enable-auto-tool-choice"),
        ("openrouter", "No endpoints found that support tool use"),
        ("litellm", "does not support parameters: ['tools']"),
        ("plain", "tools not supported"),
    ],
)
async def test_a_model_without_tool_support_gets_a_specific_error(style: ToolsError, said: str) -> None:
    with FakeOpenAIAPI(brain=offline_brain, tools_error=style) as api:
        with pytest.raises(ModelError) as caught:
            await model_for(api, "gemma:2b", max_retries=1).complete(ask())
        plain = await model_for(api, "gemma:2b").complete(ask(tools=[]))  # the model itself works
    err = caught.value
    assert err.kind == "bad_request"
    assert "gemma:2b cannot call tools" in err.message and said in err.message
    assert "choose a model that supports it" in err.message and "--jinja" in err.message
    assert "offline" in plain.text


async def test_server_that_rejects_max_tokens_is_asked_with_max_completion_tokens() -> None:
    with FakeOpenAIAPI(brain=offline_brain, reject_params=("max_tokens",)) as api:
        model = model_for(api)
        await model.complete(ask())
        await model.complete(ask())
    assert ["max_tokens" in b for b in api.requests] == [True, False, False]  # remembered after the first
    assert all(b.get("max_completion_tokens") == 1234 for b in api.requests[1:])


async def test_server_that_rejects_parallel_tool_calls_is_asked_without() -> None:
    with FakeOpenAIAPI(brain=offline_brain, reject_params=("parallel_tool_calls",)) as api:
        model = model_for(api)
        await model.complete(ask())
        await model.complete(ask())
    assert ["parallel_tool_calls" in b for b in api.requests] == [True, False, False]


async def test_a_temperature_a_reasoning_model_does_not_take_is_dropped_saying_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """specialist_sampling = { temperature = 0.2 } with o4-mini: OpenAI takes only its default temperature."""
    said = (
        "Unsupported value: 'temperature' does not support 0.2 with this model. "
        "Only the default (1) value is supported."
    )
    with FakeOpenAIAPI(brain=offline_brain) as api:
        api.reply(400, error_body(said, code="unsupported_value", param="temperature"))
        model = model_for(api, "o4-mini")
        with caplog.at_level(logging.WARNING, logger="mcp_team.llm.openai"):
            answers = [await model.complete(ask().model_copy(update={"temperature": 0.2})) for _ in range(2)]
    assert all(a.text for a in answers)
    assert [b.get("temperature") for b in api.requests] == [0.2, None, None]
    (warning,) = [r.getMessage() for r in caplog.records if "temperature" in r.getMessage()]
    assert "o4-mini" in warning and "0.2" in warning and "own applies" in warning


class Together(FakeOpenAIAPI):
    """Holds each of the first `n` requests until all `n` have come: calls that were all sent before any was
    answered, as a model's first calls from parallel branches or concurrent runs are."""

    def __init__(self, n: int, **switches: Any) -> None:
        super().__init__(brain=offline_brain, **switches)
        self.arrived = threading.Barrier(n, timeout=HANG_GUARD)

    def answer(self, body: dict[str, Any]) -> Reply:
        if len(self.requests) <= self.arrived.parties:
            self.arrived.wait()
        return super().answer(body)


@pytest.mark.parametrize("rejected", ["max_tokens", "parallel_tool_calls"])
async def test_concurrent_first_calls_rejected_alike_are_all_asked_again(rejected: str) -> None:
    with Together(4, reject_params=(rejected,)) as api:
        model = model_for(api, "qwen2.5:7b")
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(model.complete, ask())
    assert [rejected in b for b in api.requests] == [True] * 4 + [False] * 4  # not one call failed


async def test_connection_refused() -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(ModelError) as caught:
        await OpenAIModel(MODEL, api_key=KEY, base_url=base_url, max_retries=1).complete(ask())
    err = caught.value
    assert err.kind == "connection"  # transient: a fallback model may answer instead
    # Said at once, without the SDK's retries (a server that hangs up gets them: tests/cli/test_check_servers.py).
    assert f"nothing is listening at {base_url} (connection refused)" in err.message, err.message
    assert "OPENAI_BASE_URL" in err.message and "attempts" not in err.message
    assert KEY not in err.message


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("http://localhost:11434/v1", ("localhost", 11434)),
        ("http://127.0.0.1/v1", ("127.0.0.1", 80)),
        ("https://[::1]:8443/v1", ("::1", 8443)),
        ("http://192.168.1.5:8000/v1", None),  # another machine: the call finds out
        ("https://gateway.example.com/v1", None),
    ],
)
def test_only_a_server_on_this_machine_is_asked_first(url: str, address: tuple[str, int] | None) -> None:
    assert local_address(url) == address


def test_a_server_reached_through_a_proxy_is_not_asked_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("http_proxy", "http://proxy.example.com:3128")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    assert local_address("http://127.0.0.1:8080/v1") is None  # the SDK connects to the proxy, not to the port
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    assert local_address("http://127.0.0.1:8080/v1") == ("127.0.0.1", 8080)


async def test_timeout(api: FakeOpenAIAPI) -> None:
    api.reply(200, completion("too late"), delay=1.0)
    with pytest.raises(ModelError) as caught:
        await model_for(api, max_retries=0, timeout=0.2).complete(ask())
    assert caught.value.kind == "timeout" and "1 attempt" in caught.value.message


# -- keys and endpoints ----------------------------------------------------------------------------


NGINX_502 = (
    b"<!DOCTYPE html>\n<html>\n<head><title>502 Bad Gateway</title></head>\n<body>\n<center><h1>502 Bad Gateway</h1>"
    b"</center>\n<hr><center>nginx/1.25.3</center>\n</body>\n</html>\n" + b"<!-- padding -->\n" * 40
)


@pytest.mark.parametrize(("status", "kind"), [(502, "server_error"), (401, "auth"), (200, "server_error")])
async def test_a_proxys_html_page_is_named_by_its_title_not_quoted(api: FakeOpenAIAPI, status: int, kind: str) -> None:
    """A reverse proxy in front of the server answers with its own error page: one line says so."""
    api.reply(status, NGINX_502, {"content-type": "text/html"})
    with pytest.raises(ModelError) as caught:
        await model_for(api, max_retries=0).complete(ask())
    message = caught.value.message
    assert caught.value.kind == kind
    assert "an HTML page titled '502 Bad Gateway' (a proxy or web server answered, not the API)" in message
    assert "<" not in message and "nginx" not in message and len(message) < 400, message


async def test_openai_api_without_a_key_is_an_auth_error() -> None:
    with pytest.raises(ModelError) as caught:
        await OpenAIModel(MODEL).complete(ask())
    assert caught.value.kind == "auth" and "OPENAI_API_KEY" in caught.value.message


async def test_a_local_server_needs_no_key(api: FakeOpenAIAPI) -> None:
    api.reply(200, completion("hi"))
    response = await model_for(api, "qwen2.5:7b", key=None).complete(ask())
    assert response.text == "hi"
    assert api.request_headers[0]["authorization"] == "Bearer no-key"


async def test_key_and_base_url_come_from_the_sdk_variables_through_the_settings(
    api: FakeOpenAIAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The variables are read at the edge (`ModelSettings`, as the CLI and the server build it), not by the model."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", api.base_url + "/")
    api.reply(200, completion("hi"))
    model = build_models(ModelSettings(model=f"openai:{MODEL}")).for_role("supervisor")
    assert isinstance(model, OpenAIModel) and model.base_url == api.base_url
    await model.complete(ask())
    assert api.request_headers[0]["authorization"] == f"Bearer {KEY}"


async def test_a_model_reads_no_base_url_variable_but_the_sdk_finds_its_key(
    api: FakeOpenAIAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library caller's model goes where it says (None: OpenAI's API); a key it leaves out is the SDK's to find
    (OPENAI_API_KEY), on a server of its own too."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert OpenAIModel(MODEL).base_url is None
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    api.reply(200, completion("hi"))
    await OpenAIModel(MODEL, base_url=api.base_url).complete(ask())
    assert api.request_headers[0]["authorization"] == f"Bearer {KEY}"


# -- the fake server itself ------------------------------------------------------------------------


def test_json_conversion_round_trips() -> None:
    request = ModelRequest(
        system="sys",
        tools=TOOLS,
        max_tokens=99,
        messages=[
            Message(role="user", content="q"),
            Message(
                role="assistant", content=[TextBlock(text="t"), ToolUseBlock(id="a", name="read", input={"id": 1})]
            ),
            Message(role="user", content=[ToolResultBlock(tool_use_id="a", content="r", is_error=True)]),
            Message(role="assistant", content="plain"),
        ],
    )
    wire = {"messages": to_messages(request), "tools": to_tool_params(request.tools), "max_tokens": 99}
    assert request_from_json(wire) == request

    response = ModelResponse(
        content=[TextBlock(text="x"), ToolUseBlock(id="b", name="s", input={"k": "v"})],
        stop_reason="tool_use",
        model="m",
        id="chatcmpl-x",
        usage=Usage(input_tokens=9, output_tokens=2, cache_read_input_tokens=4),
    )
    body = response_to_json(response, "gpt-x")
    assert body["model"] == "gpt-x" and body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["usage"] == {
        "prompt_tokens": 9,
        "completion_tokens": 2,
        "total_tokens": 11,
        "prompt_tokens_details": {"cached_tokens": 4},
    }


async def test_brain_errors_become_http_errors() -> None:
    def brain(request: ModelRequest) -> ModelResponse:
        raise ModelError("bad_request", "context length exceeded")

    with FakeOpenAIAPI(brain=brain) as api, pytest.raises(ModelError) as caught:
        await model_for(api).complete(ask())
    assert caught.value.kind == "bad_request" and "context length exceeded" in caught.value.message


async def test_empty_script_without_brain_fails_clearly(api: FakeOpenAIAPI) -> None:
    with pytest.raises(ModelError) as caught:
        await model_for(api).complete(ask())
    assert caught.value.kind == "server_error" and "no scripted reply" in caught.value.message
    assert len(api.requests) == 1


# -- whole runs on the backend ---------------------------------------------------------------------


async def run_team(api: FakeOpenAIAPI, mode: Mode = "adaptive") -> tuple[RunResult, list[dict[str, Any]]]:
    model = model_for(api)
    result = await Team(ModelSet.single(model)).run(REQUEST, mode=mode)
    await model.aclose()
    return result, list(api.requests)


def supervisor_requests(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The adaptive supervisor's turns: the requests offering `finalize` and handoffs."""
    return [b for b in bodies if len(b.get("tools", [])) > 1 and b["tools"][-1]["function"]["name"] == "finalize"]


@pytest.mark.parametrize("mode", ["adaptive", "planned"])
async def test_full_run(mode: Mode) -> None:
    with FakeOpenAIAPI(brain=offline_brain) as api:
        result, bodies = await run_team(api, mode)
    assert result.status == "complete", result.failures
    assert "12*(3+4)/2 = 42" in result.answer
    assert [h.target for h in result.handoffs] == ["researcher", "analyst", "writer", "reviewer"]
    assert result.usage.model_calls == len(bodies)
    assert result.usage.total.input_tokens > 0
    if mode == "adaptive":
        first = api.requests[0]
        assert first["parallel_tool_calls"] is True
        assert any(t["function"]["name"] == "handoff_to_researcher" for t in first["tools"])


async def test_full_run_on_a_server_without_parallel_tool_calls() -> None:
    with FakeOpenAIAPI(brain=offline_brain, parallel=False) as api:
        result, bodies = await run_team(api)
    assert result.status == "complete", result.failures
    assert [h.target for h in result.handoffs][:2] == ["researcher", "analyst"]
    # researcher and analyst came one turn apart instead of together
    assert len(supervisor_requests(bodies)) == 5


@pytest.mark.parametrize(("stream_only", "repeat_names"), [("always", False), ("rejects", False), ("always", True)])
async def test_full_run_on_a_server_that_answers_only_streams(stream_only: StreamOnly, repeat_names: bool) -> None:
    """A proxy that streams every reply, or a model that takes only streaming calls (DashScope's QwQ): the calls are
    made streaming from the first such reply on, their chunks (tool-call arguments in pieces) put back together; also
    where every chunk of a tool call repeats its id and name (Fireworks)."""
    with FakeOpenAIAPI(brain=offline_brain, stream_only=stream_only, repeat_names=repeat_names) as api:
        result, bodies = await run_team(api)
    assert result.status == "complete", result.failures
    assert "12*(3+4)/2 = 42" in result.answer  # the analyst's calculate call, its arguments streamed in two pieces
    assert [h.target for h in result.handoffs] == ["researcher", "analyst", "writer", "reviewer"]
    assert not bodies[0].get("stream") and all(b["stream"] for b in bodies[-5:])
    assert result.usage.total.input_tokens > 0 and result.usage.model_calls < len(bodies)  # from the last chunks


async def test_a_stream_cut_off_at_the_token_limit_is_a_truncated_reply(api: FakeOpenAIAPI) -> None:
    api.reply(400, error_body("stream must be set to true"))
    api.reply(200, stream(completion("The notes sa", finish_reason="length")), {"content-type": "text/event-stream"})
    response = await model_for(api).complete(ask())
    assert (response.text, response.stop_reason) == ("The notes sa", "max_tokens")
    assert response.usage == Usage(input_tokens=10, output_tokens=5)


def reply_streamed(api: FakeOpenAIAPI, *events: bytes) -> None:
    """Queue a 400 asking for streams, then a 200 answering with the server-sent `events`."""
    api.reply(400, error_body("stream must be set to true"))
    api.reply(200, b"".join(events), {"content-type": "text/event-stream"})


def event(**chunk: Any) -> bytes:
    """One stream chunk as a server-sent event."""
    head = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1_700_000_000, "model": MODEL}
    return f"data: {json.dumps({**head, **chunk})}\n\n".encode()


def without_done(events: bytes) -> bytes:
    return events.removesuffix(b"data: [DONE]\n\n")


async def test_tool_calls_whose_id_and_name_come_in_every_chunk_are_called_by_them(api: FakeOpenAIAPI) -> None:
    """Fireworks and some proxies send a streamed tool call's id and name again with each piece of its arguments:
    they are the call's id and name, not joined into `call_1call_1` and `searchsearch` (a call to no tool)."""
    calls = [tool_call("call_1", "search", {"q": "launch notes"}), tool_call("call_2", "read", {"id": "n7"})]
    reply_streamed(api, stream(completion(None, calls, "tool_calls"), repeat_names=True))
    response = await model_for(api).complete(ask())
    assert [(b.id, b.name, b.input) for b in response.tool_uses] == [
        ("call_1", "search", {"q": "launch notes"}),
        ("call_2", "read", {"id": "n7"}),
    ]


async def test_a_stream_whose_usage_chunk_is_followed_by_one_without_keeps_the_usage(api: FakeOpenAIAPI) -> None:
    usage = completion("The notes say so.", usage={"prompt_tokens": 21, "completion_tokens": 8})
    reply_streamed(api, without_done(stream(usage)), event(choices=[], usage=None), b"data: [DONE]\n\n")
    response = await model_for(api).complete(ask())
    assert (response.text, response.usage) == ("The notes say so.", Usage(input_tokens=21, output_tokens=8))


@pytest.mark.parametrize(
    "later",
    [
        {"function": {"arguments": '"bees"}'}},  # no index: the SDK raises RuntimeError
        {"index": 0, "type": "custom", "function": {"arguments": '"bees"}'}},  # another type: the SDK asserts
    ],
)
async def test_a_stream_chunk_the_sdk_cannot_merge_is_a_server_error(api: FakeOpenAIAPI, later: dict[str, Any]) -> None:
    first = {"index": 0, "id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": '}}
    reply_streamed(
        api,
        event(choices=[{"index": 0, "delta": {"role": "assistant", "tool_calls": [first]}, "finish_reason": None}]),
        event(choices=[{"index": 0, "delta": {"tool_calls": [later]}, "finish_reason": None}]),
        b"data: [DONE]\n\n",
    )
    with pytest.raises(ModelError) as caught:
        await model_for(api).complete(ask())
    assert caught.value.kind == "server_error"
    message = caught.value.message
    assert "a stream chunk that is not Chat Completions'" in message and api.base_url in message


async def test_a_streaming_server_that_rejects_stream_options_is_asked_without() -> None:
    with FakeOpenAIAPI(brain=offline_brain, stream_only="rejects", reject_params=("stream_options",)) as api:
        response = await model_for(api).complete(ask())
    assert response.text and [("stream_options" in b, b.get("stream")) for b in api.requests] == [
        (False, None),
        (True, True),
        (False, True),
    ]
    assert response.usage.cost_usd is None  # a stream without its usage chunk: the tokens are unknown


async def test_full_run_recovers_from_invalid_tool_call_json() -> None:
    with FakeOpenAIAPI(brain=offline_brain, invalid_arguments=1) as api:
        result, bodies = await run_team(api)
    assert result.status == "complete", result.failures
    assert "12*(3+4)/2 = 42" in result.answer
    # The broken call went back to the supervisor as an error to fix, as `{}` with an error result.
    second = supervisor_requests(bodies)[1]["messages"]
    broken = next(m for m in second if m.get("tool_calls"))
    assert broken["tool_calls"][0]["function"]["arguments"] == "{}"
    errors = [m["content"] for m in second if m["role"] == "tool" and m["content"].startswith("Error: ")]
    assert len(errors) == 1


async def test_full_run_without_usage_counts_zero_tokens() -> None:
    with FakeOpenAIAPI(brain=offline_brain, usage=False) as api:
        result, _ = await run_team(api)
    assert result.status == "complete"
    assert result.usage.total.total_tokens == 0


async def test_a_run_on_a_server_that_answers_no_json_fails_saying_so(
    api: FakeOpenAIAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mcp_team.handoffs.context.RETRY_BACKOFF", 0.0)  # the supervisor's retries: no waiting
    for _ in range(3):  # the supervisor's call and its two retries
        api.reply(200, b"{not json at all")
    result, bodies = await run_team(api)
    assert result.status == "failed" and len(bodies) == 3
    (failure,) = result.failures
    assert failure.kind == "server_error" and not failure.recovered
    assert f"{api.base_url} returned a reply" in failure.reason and "not JSON" in failure.reason
    assert "OPENAI_BASE_URL" in result.answer  # the answer's missing list says what to check


async def test_a_supervisor_answer_cut_off_at_the_token_limit_is_partial_not_complete(api: FakeOpenAIAPI) -> None:
    api.reply(200, completion(None, [tool_call("c1", "handoff_to_researcher", {"task": "Research bees"})]))
    api.reply(200, completion("Bees pollinate flowers."))  # the researcher
    api.reply(200, completion("The answer is trunc", finish_reason="length"))
    result, bodies = await run_team(api)
    assert len(bodies) == 3 and api.pending == 0
    assert result.status == "partial"
    assert result.answer.startswith("The answer is trunc")
    (failure,) = result.failures
    assert failure.kind == "truncated" and not failure.recovered
    assert "cut off at its output token limit" in result.answer and "MCP_TEAM_SUPERVISOR_SAMPLING" in result.answer


@pytest.mark.parametrize(
    ("text", "stop_reason", "kind", "said"),
    [
        ("Bees are", "max_tokens", "truncated", "sampling = { max_tokens = N } in researcher's entry of the team file"),
        ("", "refusal", "model_refused", "declined the task without saying why (a provider's content filter"),
    ],
)
async def test_a_specialist_answer_cut_off_or_filtered_says_what_to_change(
    monkeypatch: pytest.MonkeyPatch, text: str, stop_reason: StopReason, kind: str, said: str
) -> None:
    """The researcher's replies end with finish_reason "length", or "content_filter" and no text (Azure's filter)."""
    monkeypatch.setattr("mcp_team.handoffs.context.RETRY_BACKOFF", 0.0)

    def brain(request: ModelRequest) -> ModelResponse:
        if request.member != "researcher":
            return offline_brain(request)
        return ModelResponse(content=[TextBlock(text=text)] if text else [], stop_reason=stop_reason, model=MODEL)

    with FakeOpenAIAPI(brain=brain) as api:
        result, _ = await run_team(api)
    failures = [f for f in result.failures if f.specialist == "researcher"]
    assert failures and all(f.kind == kind and said in f.reason for f in failures), failures


async def test_a_supervisor_refusal_is_no_answer(api: FakeOpenAIAPI) -> None:
    body = completion(None)
    body["choices"][0]["message"]["refusal"] = "I can't help with that."
    api.reply(200, body)
    result, _ = await run_team(api)
    assert result.status == "failed"
    (failure,) = result.failures
    assert failure.kind == "model_refused" and "I can't help with that." in failure.reason
    assert not result.answer.startswith("I can't help with that.")


async def test_full_run_on_a_model_without_tools_fails_clearly() -> None:
    with FakeOpenAIAPI(brain=offline_brain, tools_error="ollama") as api:
        result, _ = await run_team(api)
    assert result.status == "failed"
    assert any("cannot call tools" in f.reason for f in result.failures)


async def test_supervisor_on_anthropic_and_specialists_on_openai_in_one_run(spans: Spans) -> None:
    with FakeMessagesAPI(brain=offline_brain) as claude, FakeOpenAIAPI(brain=offline_brain) as gpt:
        supervisor = AnthropicModel("claude-sonnet-5-5", api_key=KEY, base_url=claude.base_url)
        worker = model_for(gpt)
        result = await Team(ModelSet({SUPERVISOR: supervisor, SPECIALIST: worker})).run(REQUEST)
        calls = len(claude.requests) + len(gpt.requests)
    assert result.status == "complete", result.failures
    assert result.usage.model_calls == calls
    chats = [s for s in spans.all if s.name.startswith(f"{OP_CHAT} ")]
    seen = {(spans.attr(s, PROVIDER_NAME), spans.attr(s, REQUEST_MODEL), spans.attr(s, RESPONSE_MODEL)) for s in chats}
    assert seen == {("anthropic", "claude-sonnet-5-5", "offline"), ("openai", MODEL, MODEL)}
    assert len(chats) == calls


# The client of a loop that ended is dropped, its sockets closed by the garbage collector, which Python reports
# as a ResourceWarning (shown in development mode only): said here, not hidden everywhere.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_a_model_answers_in_one_event_loop_and_then_in_another(backend: str) -> None:
    """A script's two `asyncio.run` with one model, or `mcp-team run` after it asked the server which models it
    serves: the connection kept open from the first loop belonged to it, and the second loop's first call failed
    with "Event loop is closed" (the fake servers keep connections open, as real ones do)."""
    import asyncio
    import warnings

    server = FakeOpenAIAPI(brain=offline_brain) if backend == "openai" else FakeMessagesAPI(brain=offline_brain)
    with server, warnings.catch_warnings():
        warnings.simplefilter("error")  # nor "coroutine 'AsyncClient.aclose' was never awaited"
        model: OpenAIModel | AnthropicModel = (
            OpenAIModel(MODEL, api_key=KEY, base_url=server.base_url, max_retries=0)
            if backend == "openai"
            else AnthropicModel(MODEL, api_key=KEY, base_url=server.base_url, max_retries=0)
        )
        answers = [asyncio.run(model.complete(ask("hello"))) for _loop in range(3)]
        asyncio.run(model.aclose())
    assert all(a.text for a in answers) and len(server.requests) == 3
