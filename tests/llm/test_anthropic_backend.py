"""The Claude backend through the real Anthropic SDK, over a real socket, against a fake Messages API."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_team.handoffs import Team
from mcp_team.llm import ModelSet
from mcp_team.llm.anthropic import AnthropicModel, to_message_param, to_tool_params, tool_input
from mcp_team.llm.types import (
    Message,
    Model,
    ModelError,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from support.fake_messages_api import (
    FakeMessagesAPI,
    error_body,
    message,
    request_from_json,
    response_to_json,
    text_block,
    tool_use_block,
)

pytestmark = pytest.mark.anyio

KEY = "sk-ant-test-SECRET-0123456789"
MODEL = "claude-test-model"

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


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def api() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as server:
        yield server


def model_for(api: FakeMessagesAPI, *, max_retries: int = 2, timeout: float = 5.0) -> AnthropicModel:
    return AnthropicModel(MODEL, api_key=KEY, base_url=api.base_url, max_retries=max_retries, timeout=timeout)


def ask(text: str = "Find the launch notes.") -> ModelRequest:
    return ModelRequest(
        system="You are the researcher.", messages=[Message(role="user", content=text)], tools=TOOLS, max_tokens=1234
    )


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_is_a_model() -> None:
    model = AnthropicModel(MODEL, api_key=KEY)
    assert isinstance(model, Model)
    assert (model.name, model.provider) == (MODEL, "anthropic")


async def test_tool_use_round_trip(api: FakeMessagesAPI) -> None:
    api.reply(
        200,
        message(
            [text_block("Let me look."), tool_use_block("toolu_1", "search", {"q": "launch"})],
            stop_reason="tool_use",
            model="claude-test-model-20250101",
            id="msg_1",
        ),
    )
    api.reply(200, message([text_block("The launch is on Monday.")]))
    model = model_for(api)

    first = await model.complete(ask())
    assert first.stop_reason == "tool_use"
    assert first.id == "msg_1"
    assert first.model == "claude-test-model-20250101"
    assert first.text == "Let me look."
    assert first.tool_uses == [ToolUseBlock(id="toolu_1", name="search", input={"q": "launch"})]

    follow_up = ModelRequest(
        system="You are the researcher.",
        tools=TOOLS,
        messages=[
            Message(role="user", content="Find the launch notes."),
            Message(role="assistant", content=list(first.content)),
            Message(
                role="user",
                content=[
                    ToolResultBlock(tool_use_id="toolu_1", content="launch: Monday"),
                    ToolResultBlock(tool_use_id="toolu_2", content="no such note", is_error=True),
                ],
            ),
        ],
    )
    second = await model.complete(follow_up)
    assert second.text == "The launch is on Monday."
    assert second.stop_reason == "end_turn"

    assert len(api.requests) == 2
    assert api.requests[1]["messages"] == [
        {"role": "user", "content": "Find the launch notes."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "launch"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "launch: Monday"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no such note", "is_error": True},
            ],
        },
    ]
    await model.aclose()


async def test_wire_shape_caching_and_usage(api: FakeMessagesAPI) -> None:
    api.reply(
        200,
        message(
            [{"type": "thinking", "thinking": "hmm", "signature": "sig"}, text_block("done")],
            stop_reason="model_context_window_exceeded",
            usage={
                "input_tokens": 7,
                "output_tokens": 11,
                "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 20,
            },
        ),
    )
    response = await model_for(api).complete(ask())

    assert response.content == [TextBlock(text="done")]  # the thinking block is skipped
    assert response.stop_reason == "max_tokens"
    assert response.usage == Usage(
        input_tokens=127, output_tokens=11, cache_read_input_tokens=100, cache_creation_input_tokens=20
    )

    body, headers = api.requests[0], api.request_headers[0]
    assert body["model"] == MODEL
    assert body["max_tokens"] == 1234
    assert body["system"] == [
        {"type": "text", "text": "You are the researcher.", "cache_control": {"type": "ephemeral"}}
    ]
    assert [t["name"] for t in body["tools"]] == ["search", "read"]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][-1]["input_schema"] == TOOLS[-1].input_schema
    # SDK 2.x sends the API key as a bearer token (1.x sent `x-api-key`).
    assert headers["authorization"] == f"Bearer {KEY}"
    assert "anthropic-version" in headers


async def test_no_system_and_no_tools_are_left_out(api: FakeMessagesAPI) -> None:
    api.reply(200, message([text_block("ok")]))
    await model_for(api).complete(ModelRequest(system="", messages=[Message(role="user", content="hi")]))
    assert "system" not in api.requests[0]
    assert "tools" not in api.requests[0]


async def test_a_temperature_it_cannot_send_is_said_once(
    api: FakeMessagesAPI, caplog: pytest.LogCaptureFixture
) -> None:
    api.reply(200, message([text_block("ok")]))
    api.reply(200, message([text_block("ok")]))
    model = model_for(api)
    for _ in range(2):
        await model.complete(ask().model_copy(update={"temperature": 0.2}))
    assert all("temperature" not in r for r in api.requests)
    said = [r.getMessage() for r in caplog.records if "temperature" in r.getMessage()]
    assert len(said) == 1 and "0.2 is not sent" in said[0] and MODEL in said[0]


async def test_unknown_stop_reason_is_end_turn(api: FakeMessagesAPI) -> None:
    api.reply(200, message([text_block("ok")], stop_reason="something_new"))
    assert (await model_for(api).complete(ask())).stop_reason == "end_turn"


@pytest.mark.parametrize(
    ("body", "headers", "said"),
    [
        (b"{not json at all", {}, "not JSON: Expecting property name"),  # labelled JSON, but is not
        (b"<html><body>It works!</body></html>", {"content-type": "text/html"}, "It works!"),  # a web page
        (b"[1, 2]", {}, "[1, 2]"),
        (b'{"type": "message"}', {}, "not a Messages API reply"),  # no content, no usage
    ],
)
async def test_a_reply_that_is_not_the_apis_is_a_server_error_that_names_the_base_url(
    api: FakeMessagesAPI, body: bytes, headers: dict[str, str], said: str
) -> None:
    api.reply(200, body, headers)
    with pytest.raises(ModelError) as caught:
        await model_for(api, max_retries=0).complete(ask())
    err = caught.value
    assert err.kind == "server_error" and said in err.message
    assert f"the Anthropic API at {api.base_url} returned a reply to the {MODEL} call that could not be read" in (
        err.message
    )
    assert "check the base URL (ANTHROPIC_BASE_URL)" in err.message


async def test_a_tool_use_whose_input_is_not_an_object_gets_an_input_error(api: FakeMessagesAPI) -> None:
    """The API always sends an object; a proxy or gateway may not."""
    blocks = [
        {"type": "tool_use", "id": "t1", "name": "search", "input": "{bad"},
        {"type": "tool_use", "id": "t2", "name": "read", "input": '{"id": "n7"}'},  # JSON text of an object
        {"type": "tool_use", "id": "t3", "name": "read", "input": [1]},
    ]
    api.reply(200, message(blocks, stop_reason="tool_use"))
    broken, text, listed = (await model_for(api).complete(ask())).tool_uses
    assert (broken.input, text.input, text.input_error, listed.input) == ({}, {"id": "n7"}, None, {})
    assert broken.input_error is not None and "not valid JSON" in broken.input_error and "{bad" in broken.input_error
    assert listed.input_error is not None and "must be a JSON object, got list" in listed.input_error


@pytest.mark.parametrize(
    ("raw", "parsed", "error"),
    [
        ({"q": "bees"}, {"q": "bees"}, None),
        (None, {}, None),
        ("", {}, None),
        ('{"q": "bees"}', {"q": "bees"}, None),
        ("{bad", {}, "not valid JSON"),
        ("[1]", {}, "must be a JSON object, got str"),
        (42, {}, "must be a JSON object, got int"),
    ],
)
def test_tool_input(raw: object, parsed: dict[str, object], error: str | None) -> None:
    value, problem = tool_input(raw)
    assert value == parsed
    assert (problem is None) if error is None else (problem is not None and error in problem)


async def test_a_supervisor_that_keeps_sending_unreadable_handoffs_is_stopped(api: FakeMessagesAPI) -> None:
    """Run end to end: each unreadable handoff goes back as `malformed_handoff`; the third in a row stops the run."""
    for _ in range(3):
        bad = {"type": "tool_use", "id": "t1", "name": "handoff_to_researcher", "input": "{bad"}
        api.reply(200, message([bad], stop_reason="tool_use"))
    model = model_for(api)
    result = await Team(ModelSet.single(model)).run("Research bees")
    await model.aclose()
    assert (result.status, len(api.requests), result.handoffs) == ("failed", 3, [])
    assert [f.kind for f in result.failures] == ["malformed_handoff"] * 3
    assert result.stopped_by is not None
    assert result.stopped_by.startswith(
        "the supervisor called handoff_to_researcher with arguments that could not be read 3 times in a row"
    )
    assert "not valid JSON" in result.stopped_by and result.stopped_by in result.answer
    first_feedback = api.requests[1]["messages"][-1]["content"][0]
    assert first_feedback["type"] == "tool_result" and first_feedback["is_error"] is True
    assert "malformed handoff to researcher" in first_feedback["content"]


@pytest.mark.parametrize("retry_header", [{"retry-after-ms": "10"}, {"retry-after": "0"}])
async def test_rate_limit_then_success(api: FakeMessagesAPI, retry_header: dict[str, str]) -> None:
    api.reply(429, error_body("rate_limit_error", "Number of requests has exceeded your rate limit"), retry_header)
    api.reply(200, message([text_block("finally")]))
    response = await model_for(api).complete(ask())
    assert response.text == "finally"
    assert len(api.requests) == 2
    assert [h["x-stainless-retry-count"] for h in api.request_headers] == ["0", "1"]


async def test_overloaded_every_time(api: FakeMessagesAPI) -> None:
    for _ in range(3):
        api.reply(529, error_body("overloaded_error", "Overloaded"), {"retry-after-ms": "10"})
    with pytest.raises(ModelError) as caught:
        await model_for(api, max_retries=2).complete(ask())
    err = caught.value
    assert (err.kind, err.status) == ("overloaded", 529)
    assert len(api.requests) == 3
    assert "3 attempts" in err.message
    assert KEY not in err.message and KEY not in str(err)


async def test_server_error_after_retries(api: FakeMessagesAPI) -> None:
    for _ in range(2):
        api.reply(500, error_body("api_error", "Internal server error"), {"retry-after-ms": "10"})
    with pytest.raises(ModelError) as caught:
        await model_for(api, max_retries=1).complete(ask())
    assert (caught.value.kind, caught.value.status) == ("server_error", 500)
    assert "2 attempts" in caught.value.message
    assert "Internal server error" in caught.value.message


async def test_auth_error(api: FakeMessagesAPI) -> None:
    api.reply(401, error_body("authentication_error", "invalid x-api-key"))
    with pytest.raises(ModelError) as caught:
        await model_for(api).complete(ask())
    err = caught.value
    assert (err.kind, err.status) == ("auth", 401)
    assert "ANTHROPIC_API_KEY" in err.message
    assert KEY not in err.message
    assert len(api.requests) == 1  # not retried


async def test_echoed_key_is_redacted(api: FakeMessagesAPI) -> None:
    api.reply(403, error_body("permission_error", f"key {KEY} may not use this model"))
    with pytest.raises(ModelError) as caught:
        await model_for(api).complete(ask())
    assert caught.value.kind == "auth"
    assert KEY not in caught.value.message
    assert "[redacted]" in caught.value.message


async def test_unknown_model_is_bad_request(api: FakeMessagesAPI) -> None:
    api.reply(400, error_body("invalid_request_error", f"model: {MODEL} is not a known model"))
    with pytest.raises(ModelError) as caught:
        await model_for(api).complete(ask())
    err = caught.value
    assert (err.kind, err.status) == ("bad_request", 400)
    assert f"model: {MODEL} is not a known model" in err.message
    assert len(api.requests) == 1


async def test_connection_refused() -> None:
    base_url = f"http://127.0.0.1:{closed_port()}"
    model = AnthropicModel(MODEL, api_key=KEY, base_url=base_url, max_retries=1)
    with pytest.raises(ModelError) as caught:
        await model.complete(ask())
    err = caught.value
    assert err.kind == "connection"
    assert base_url in err.message
    assert "2 attempts" in err.message
    assert KEY not in err.message


async def test_timeout(api: FakeMessagesAPI) -> None:
    api.reply(200, message([text_block("too late")]), delay=1.0)
    with pytest.raises(ModelError) as caught:
        await model_for(api, max_retries=0, timeout=0.2).complete(ask())
    assert caught.value.kind == "timeout"
    assert "1 attempt" in caught.value.message


@pytest.mark.parametrize("config_dir", [None, "missing"])
async def test_no_credentials_is_auth(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, api: FakeMessagesAPI, config_dir: str | None
) -> None:
    for var in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CONFIG_DIR",
        "ANTHROPIC_IDENTITY_TOKEN",
        "ANTHROPIC_IDENTITY_TOKEN_FILE",
        "ANTHROPIC_FEDERATION_RULE_ID",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no profile on disk
    if config_dir is not None:  # a config dir that names no usable profile: the SDK raises CredentialsError
        monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / config_dir))
    with pytest.raises(ModelError) as caught:
        await AnthropicModel(MODEL, base_url=api.base_url).complete(ask())
    assert caught.value.kind == "auth"
    assert "ANTHROPIC_API_KEY" in caught.value.message
    assert api.requests == []


async def test_brain_answers_when_the_script_is_empty() -> None:
    seen: list[ModelRequest] = []

    def brain(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return ModelResponse(
            content=[TextBlock(text=f"{len(request.tools)} tools")],
            model="brain",
            usage=Usage(input_tokens=50, output_tokens=3, cache_read_input_tokens=40),
        )

    with FakeMessagesAPI(brain=brain) as api:
        response = await model_for(api).complete(ask())
    assert response.text == "2 tools"
    assert response.usage == Usage(input_tokens=50, output_tokens=3, cache_read_input_tokens=40)
    assert seen[0].system == "You are the researcher."
    assert seen[0].tools == TOOLS
    assert seen[0].max_tokens == 1234


async def test_brain_errors_become_http_errors() -> None:
    def brain(request: ModelRequest) -> ModelResponse:
        raise ModelError("bad_request", "prompt is too long")

    with FakeMessagesAPI(brain=brain) as api, pytest.raises(ModelError) as caught:
        await model_for(api).complete(ask())
    assert caught.value.kind == "bad_request"
    assert "prompt is too long" in caught.value.message


async def test_empty_script_without_brain_fails_clearly(api: FakeMessagesAPI) -> None:
    with pytest.raises(ModelError) as caught:
        await model_for(api).complete(ask())
    assert caught.value.kind == "server_error"
    assert "no scripted reply" in caught.value.message
    assert len(api.requests) == 1


def test_json_conversion_round_trips() -> None:
    request = ModelRequest(
        system="sys",
        tools=TOOLS,
        max_tokens=99,
        messages=[
            Message(role="user", content="q"),
            Message(role="assistant", content=[TextBlock(text="t"), ToolUseBlock(id="a", name="read")]),
            Message(role="user", content=[ToolResultBlock(tool_use_id="a", content="r", is_error=True)]),
        ],
    )
    wire = {
        "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
        "messages": [to_message_param(m) for m in request.messages],
        "tools": to_tool_params(request.tools),
        "max_tokens": 99,
    }
    assert request_from_json(wire) == request

    blocks: list[TextBlock | ToolUseBlock] = [TextBlock(text="x"), ToolUseBlock(id="b", name="s")]
    response = ModelResponse(
        content=blocks,
        stop_reason="tool_use",
        model="m",
        id="msg_x",
        usage=Usage(input_tokens=9, output_tokens=2, cache_creation_input_tokens=4),
    )
    body = response_to_json(response)
    assert body["usage"]["input_tokens"] == 5
    assert body["id"] == "msg_x" and body["stop_reason"] == "tool_use"
    assert body["content"] == [text_block("x"), tool_use_block("b", "s", {})]
