"""The Claude backend: `ModelRequest` in, Messages API call out, `ModelResponse` back.

This module owns everything specific to the Anthropic SDK: building the client, converting our
messages and tools to the wire shape (with prompt caching on the stable prefix: the system prompt
and the tool definitions), converting the API's reply back, and the errors only Anthropic's API has
(what it shares with the OpenAI backend, the rest of turning the SDK's exceptions into `ModelError`s
a person can act on among it, is llm/sdk_model.py's). Retrying is left to the SDK (exponential
backoff that honours `retry-after-ms`/`retry-after`, and retries 408/409/429/5xx including 529).

`import anthropic` is slow (~1-2 s), so nothing outside this module imports it, and this module is
itself imported only when the Anthropic backend is selected.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anthropic
from anthropic.types import (
    CacheControlEphemeralParam,
    ContentBlockParam,
    MessageParam,
    TextBlockParam,
    ToolParam,
)

from mcp_team.llm.sdk_errors import clip
from mcp_team.llm.sdk_model import SdkModel
from mcp_team.llm.types import (
    ContentBlock,
    ErrorKind,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    StopReason,
    TextBlock,
    ToolDefinition,
    ToolUseBlock,
    Usage,
)

_CACHE: CacheControlEphemeralParam = {"type": "ephemeral"}

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
    # The reply was cut short by the context window rather than by `max_tokens`: still a truncation.
    "model_context_window_exceeded": "max_tokens",
}


log = logging.getLogger(__name__)


class AnthropicModel(SdkModel[anthropic.AsyncAnthropic]):
    """A Claude model behind the Anthropic Messages API. Safe to call concurrently.

    The SDK client is created on the first call (and is then bound to that call's event loop).
    `api_key=None` and `base_url=None` leave them to the SDK's own lookup (`ANTHROPIC_API_KEY`, a profile,
    `ANTHROPIC_BASE_URL`), which this module does not read: the CLI and the server pass both, from
    `ModelSettings`; `base_url` names the endpoint in messages and for limits and prices.
    `key_setting` and `url_setting` name where the key and the base URL were set (a variable, a team file's
    entry), for the errors that say what to check.
    """

    provider = "anthropic"
    sdk = anthropic
    api_shape = "the server's Anthropic Messages API, without /v1 (the SDK adds /v1/messages)"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 4,
        timeout: float = 120.0,
        price_provider: str | None = None,
        key_setting: str = "ANTHROPIC_API_KEY",
        url_setting: str = "ANTHROPIC_BASE_URL",
    ) -> None:
        url = (base_url or "").rstrip("/")
        super().__init__(
            model,
            api_key=api_key,
            base_url=None if not url or url == "https://api.anthropic.com" else url,
            max_retries=max_retries,
            timeout=timeout,
            price_provider=price_provider,
            key_setting=key_setting,
            url_setting=url_setting,
        )
        self._base_url = base_url  # as given, for the SDK (None: its own lookup)
        self._said_temperature = False

    @property
    def client(self) -> anthropic.AsyncAnthropic:
        """The SDK client, created on first use."""
        if (client := self._client_of_this_loop()) is not None:
            return client
        self._client = anthropic.AsyncAnthropic(
            api_key=self._api_key,
            base_url=self._base_url,
            max_retries=self.max_retries,
            timeout=self.timeout,
            open_telemetry=False,  # the `chat` span is ours (see llm.call)
            http_client=anthropic.DefaultAsyncHttpxClient(),  # see `_client_of_this_loop`
        )
        return self._client

    @property
    def where(self) -> str:
        return "the Anthropic API" if self.base_url is None else f"the Anthropic API at {self.base_url}"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Run one Messages API call (the SDK retries transient failures). Raises `ModelError`."""
        try:
            client = self.client  # resolving credentials from a profile on disk can fail here
        except anthropic.AnthropicError as err:
            raise self._model_error(err) from None
        if client.api_key is None and client.auth_token is None and client.credentials is None:
            raise ModelError("auth", "no Anthropic API key is configured: set ANTHROPIC_API_KEY")
        # The API rejects empty text blocks and accepts no tools list at all, so both are left out.
        if request.temperature is not None and not self._said_temperature:
            # The Messages API as this SDK speaks it has no temperature: said once, not dropped in silence.
            self._said_temperature = True
            log.warning(
                "%s: temperature %g is not sent (the Anthropic Messages API of anthropic %s takes none); the model's "
                "own sampling applies", self.name, request.temperature, anthropic.__version__,
            )  # fmt: skip
        system: list[TextBlockParam] = (
            [{"type": "text", "text": request.system, "cache_control": _CACHE}] if request.system else []
        )
        tools = to_tool_params(request.tools)
        try:
            message = await client.messages.create(
                model=self.name,
                max_tokens=request.max_tokens,
                system=system or anthropic.omit,
                messages=[to_message_param(m) for m in request.messages],
                tools=tools or anthropic.omit,
            )
        except anthropic.AnthropicError as err:
            raise self._model_error(err) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            # The SDK decodes a JSON-labelled body without catching this: a 200 that is not JSON at all.
            raise self._unreadable(f"not JSON: {err}") from None
        if not isinstance(message, anthropic.types.Message):
            # The SDK hands back a body that is not JSON-labelled as text, and JSON that is no object as it is.
            raise self._unreadable(f"not a Messages API reply: {clip(repr(message), 200)}")
        try:
            return from_api_message(message)
        except (AttributeError, TypeError, ValueError, KeyError) as err:  # the SDK does not validate replies
            raise self._unreadable(f"not a Messages API reply: {err}") from None

    # -- errors ------------------------------------------------------------------------------------

    def _describe(self, err: Exception) -> tuple[ErrorKind, int | None, str]:
        if isinstance(err, anthropic.CredentialsError):
            return ("auth", None, f"the Anthropic credentials could not be loaded: {err}; check {self.key_setting}")
        detail = hint = ""
        if isinstance(err, anthropic.APIStatusError):
            detail = _api_detail(err)
            if err.status_code == 404:
                hint = f"; check that the model name {self.name!r} is right"
        return self._described(err, detail, hint)


def _api_detail(err: anthropic.APIStatusError) -> str:
    """`: <the API's error message> (request-id ...)`, as far as the API gave them."""
    detail = f": {err.api_message}" if err.api_message else ""
    if err.request_id:
        detail += f" (request-id {err.request_id})"
    return detail


# -- conversion ------------------------------------------------------------------------------------


def to_block_param(block: ContentBlock) -> ContentBlockParam:
    """One of our content blocks (text, tool_use or tool_result) in the Messages API shape."""
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": dict(block.input)}
    if block.is_error:
        return {"type": "tool_result", "tool_use_id": block.tool_use_id, "content": block.content, "is_error": True}
    return {"type": "tool_result", "tool_use_id": block.tool_use_id, "content": block.content}


def to_message_param(message: Message) -> MessageParam:
    """One of our messages in the Messages API shape.

    Empty text blocks next to other blocks are dropped: the API rejects empty text blocks.
    """
    if isinstance(message.content, str):
        content: str | list[ContentBlockParam] = message.content
    else:
        blocks = list(message.content)
        if len(blocks) > 1:
            blocks = [b for b in blocks if not (isinstance(b, TextBlock) and not b.text)] or blocks[:1]
        content = [to_block_param(b) for b in blocks]
    if message.role == "user":
        return {"role": "user", "content": content}
    return {"role": "assistant", "content": content}


def to_tool_params(tools: list[ToolDefinition]) -> list[ToolParam]:
    """Our tool definitions in the Messages API shape; the last one carries the cache breakpoint."""
    params: list[ToolParam] = [
        {"name": t.name, "description": t.description, "input_schema": dict(t.input_schema)} for t in tools
    ]
    if params:
        params[-1]["cache_control"] = _CACHE
    return params


def from_api_message(message: anthropic.types.Message) -> ModelResponse:
    """The API's reply as our `ModelResponse`; block types we do not model (thinking, ...) are skipped.

    The SDK does not validate replies, so a gateway's odd one is read as far as it makes sense: a tool
    call whose input is no object gets an `input_error` (sent back to the model to fix, never run), a
    reply without usage counts zero tokens, at an unknown cost. Raises `AttributeError`/`TypeError` for one
    that is no reply.
    """
    content: list[TextBlock | ToolUseBlock] = []
    for block in message.content:
        if block.type == "text":
            content.append(TextBlock(text=block.text))
        elif block.type == "tool_use":
            arguments, error = tool_input(block.input)
            content.append(ToolUseBlock(id=block.id, name=block.name, input=arguments, input_error=error))
    usage = _usage(message.usage)
    stop_reason = _STOP_REASONS.get(message.stop_reason or "end_turn", "end_turn")
    return ModelResponse(content=content, stop_reason=stop_reason, usage=usage, model=message.model, id=message.id)


def _usage(u: object) -> Usage:
    """The reply's token counts (ours include cached input; the API's `input_tokens` does not).

    A gateway may leave counts out: what is missing counts zero, and without both input and output counts the
    cost is unknown (null), never priced from the zeros (which would call the call free).
    """
    counts = {
        name: getattr(u, name, None)
        for name in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    }
    cache_read, cache_creation = counts["cache_read_input_tokens"] or 0, counts["cache_creation_input_tokens"] or 0
    return Usage(
        input_tokens=(counts["input_tokens"] or 0) + cache_read + cache_creation,
        output_tokens=counts["output_tokens"] or 0,
        cache_read_input_tokens=cache_read,
        cache_creation_input_tokens=cache_creation,
        cost_usd=None if counts["input_tokens"] is None or counts["output_tokens"] is None else 0.0,
    )


def tool_input(raw: object) -> tuple[dict[str, Any], str | None]:
    """A `tool_use` block's input as `(input, None)`, or `({}, why it cannot be read)`.

    The API always sends an object. A proxy or gateway in between may not: JSON text holding an object
    is taken (as the OpenAI backend takes arguments); anything else is an error for the model to fix.
    """
    if isinstance(raw, dict):
        return dict(raw), None
    if raw is None:
        return {}, None
    if isinstance(raw, str):
        try:
            value = json.loads(raw) if raw.strip() else {}
        except ValueError as err:
            return {}, f"the input is not a JSON object but text that is not valid JSON ({err}): {clip(raw)}"
        if isinstance(value, dict):
            return value, None
    return {}, f"the input must be a JSON object, got {type(raw).__name__}: {clip(repr(raw))}"
