"""A fake Anthropic Messages API (`POST /v1/messages`) on 127.0.0.1, for tests through the real SDK.

    with FakeMessagesAPI() as api:
        api.reply(429, error_body("rate_limit_error", "slow down"), {"retry-after-ms": "10"})
        api.reply(200, message([text_block("hi")]))
        model = AnthropicModel("claude-test", api_key="k", base_url=api.base_url)
        ...
        assert len(api.requests) == 2

Scripted replies are served first, in order. When none are left, a `brain` (if given) answers:
the request body is converted to our `ModelRequest`, the brain returns a `ModelResponse` (or raises
`ModelError`, which becomes the matching HTTP error), and that is converted back to the wire.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any

from mcp_team.llm.types import (
    ContentBlock,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
)
from support.fake_api import FakeJSONAPI, Reply

Brain = Callable[[ModelRequest], ModelResponse]

# An Anthropic API key for runs against the fake API: what a run shows must never include it.
SECRET = "sk-ant-test-SECRET-0123456789"

_ids = itertools.count(1)

# The HTTP status and API error type the real API uses for each `ModelError` kind.
_ERROR_STATUS: dict[str, tuple[int, str]] = {
    "rate_limited": (429, "rate_limit_error"),
    "overloaded": (529, "overloaded_error"),
    "server_error": (500, "api_error"),
    "timeout": (504, "timeout_error"),
    "auth": (401, "authentication_error"),
    "bad_request": (400, "invalid_request_error"),
}


# -- wire-shape builders ---------------------------------------------------------------------------


def text_block(text: str) -> dict[str, Any]:
    """A `text` content block."""
    return {"type": "text", "text": text}


def tool_use_block(id: str, name: str, input: dict[str, Any] | None = None) -> dict[str, Any]:
    """A `tool_use` content block."""
    return {"type": "tool_use", "id": id, "name": name, "input": dict(input or {})}


def message(
    content_blocks: list[dict[str, Any]],
    stop_reason: str = "end_turn",
    usage: dict[str, int] | None = None,
    *,
    model: str = "claude-fake",
    id: str | None = None,
) -> dict[str, Any]:
    """A valid Messages API response body. `usage` keys are the API's (input excludes cached input)."""
    return {
        "id": id or f"msg_fake_{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(content_blocks),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5, **(usage or {})},
    }


def error_body(type: str, message: str) -> dict[str, Any]:
    """The API's error body, e.g. `error_body("rate_limit_error", "...")`."""
    return {"type": "error", "error": {"type": type, "message": message}}


# -- conversion between the wire and our types -----------------------------------------------------


def _text_of(content: Any) -> str:
    """A `system` or `tool_result` content (a string or a list of text blocks) as one string."""
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if b.get("type") == "text")


def _block_from_json(block: dict[str, Any]) -> ContentBlock:
    kind = block.get("type")
    if kind == "text":
        return TextBlock(text=block["text"])
    if kind == "tool_use":
        return ToolUseBlock(id=block["id"], name=block["name"], input=block.get("input") or {})
    if kind == "tool_result":
        return ToolResultBlock(
            tool_use_id=block["tool_use_id"],
            content=_text_of(block.get("content", "")),
            is_error=bool(block.get("is_error", False)),
        )
    raise ValueError(f"content block type {kind!r} is not supported by the fake API")


def member_from_prompt(system: str) -> str:
    """Who sent a request that crossed a wire: a specialist's name, or "" (the supervisor).

    The Messages API and MCP sampling have no field for it, so a brain behind them reads it where
    the engine writes it, in the first line of a specialist's system prompt (`Specialist.instructions`);
    the supervisor's requests are told apart by their tools.
    """
    match = _SPECIALIST.match(system)
    return match.group(1) if match else ""


_SPECIALIST = re.compile(r"You are the ([A-Za-z0-9_-]+) specialist")


def request_from_json(body: dict[str, Any]) -> ModelRequest:
    """A Messages API request body as our `ModelRequest` (cache_control markers are dropped)."""
    messages = []
    for m in body["messages"]:
        content = m["content"]
        blocks: str | list[ContentBlock] = (
            content if isinstance(content, str) else [_block_from_json(b) for b in content]
        )
        messages.append(Message(role=m["role"], content=blocks))
    tools = [
        ToolDefinition(name=t["name"], description=t.get("description", ""), input_schema=t["input_schema"])
        for t in body.get("tools", [])
    ]
    system = _text_of(body.get("system", ""))
    return ModelRequest(
        system=system, messages=messages, tools=tools, max_tokens=body["max_tokens"], member=member_from_prompt(system)
    )


def response_to_json(resp: ModelResponse) -> dict[str, Any]:
    """Our `ModelResponse` as a Messages API response body.

    Our `input_tokens` includes cached input and the API's does not, so the cached counts are
    subtracted back out: converting the body again gives the same `Usage`.
    """
    u = resp.usage
    blocks = [
        text_block(b.text) if isinstance(b, TextBlock) else tool_use_block(b.id, b.name, b.input) for b in resp.content
    ]
    usage = {
        "input_tokens": max(0, u.input_tokens - u.cache_read_input_tokens - u.cache_creation_input_tokens),
        "output_tokens": u.output_tokens,
        "cache_read_input_tokens": u.cache_read_input_tokens,
        "cache_creation_input_tokens": u.cache_creation_input_tokens,
    }
    return message(blocks, resp.stop_reason, usage, model=resp.model, id=resp.id)


# -- the server ------------------------------------------------------------------------------------


class FakeMessagesAPI(FakeJSONAPI):
    """A Messages API server on an ephemeral port of 127.0.0.1, run in a daemon thread.

    Records every request body (`requests`) and its headers (`request_headers`, lower-cased
    names) and answers with the scripted replies, then with `brain`, else with a 500.
    """

    route = "/v1/messages"
    name = "fake-messages-api"

    def __init__(self, brain: Brain | None = None) -> None:
        super().__init__()
        self.brain = brain

    @property
    def base_url(self) -> str:
        return self.url

    def error_reply(self, status: int, message: str) -> Reply:
        kind = {404: "not_found_error", 400: "invalid_request_error"}.get(status, "api_error")
        return Reply(status, error_body(kind, message))

    def answer(self, body: dict[str, Any]) -> Reply:
        if self.brain is None:
            # `x-should-retry: false` stops the SDK retrying this test bug.
            return Reply(
                500,
                error_body("api_error", "FakeMessagesAPI: no scripted reply left and no brain"),
                {"x-should-retry": "false"},
            )
        try:
            request = request_from_json(body)
        except (KeyError, TypeError, ValueError) as err:
            return Reply(400, error_body("invalid_request_error", f"FakeMessagesAPI: bad request: {err}"))
        try:
            return Reply(200, response_to_json(self.brain(request)))
        except ModelError as err:
            status, kind = _ERROR_STATUS.get(err.kind, (500, "api_error"))
            return Reply(status, error_body(kind, err.message))
