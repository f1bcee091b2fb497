"""The OpenAI-compatible backend: `ModelRequest` in, Chat Completions call out, `ModelResponse` back.

Chat Completions with tools is the API every compatible server speaks (OpenAI, Azure, OpenRouter,
Ollama, vLLM, llama.cpp's server, LM Studio), so this module owns the differences between them:
- the output limit is `max_completion_tokens` for OpenAI's own API and its reasoning models (o-series,
  gpt-5), `max_tokens` elsewhere; a server that rejects the one it got is asked again with the other;
- several tool calls per turn are asked for (`parallel_tool_calls`), and dropped for a server that
  rejects the parameter; a server that returns one call per turn simply takes more turns;
- a temperature a model does not take (OpenAI's reasoning models take only their default) is dropped,
  with a warning, once the server rejects it;
- tool-call arguments that are not a JSON object become a `ToolUseBlock` with `input_error`, for the
  engine to send back to the model to fix;
- a reply without `usage` counts zero tokens at an unknown cost (and says so once in the log);
- a server that answers only with streams (it sends server-sent events though none were asked for, or
  rejects `stream: false`) is asked again streaming, and the chunks are put together into one reply
  (llm/openai_stream.py);
- a model or server without tool support is a `bad_request` that says so and what to do.
Retrying 408/409/429/5xx with backoff (honouring `retry-after`) is left to the SDK.
The request and reply in Chat Completions' shapes (messages, tools, tool-call arguments, usage) are
llm/chat_completions.py's; what it shares with the Anthropic backend (its settings, its client's life, the
rest of turning the SDK's exceptions into `ModelError`s) is llm/sdk_model.py's.

`import openai` takes about half a second, so nothing outside this module (and llm/openai_stream.py, which only
it imports) imports it, and this module is itself imported only when an OpenAI-compatible model is configured.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Literal

import openai
from openai.types.chat import ChatCompletion

from mcp_team.llm.chat_completions import from_completion, to_messages, to_tool_params
from mcp_team.llm.listening import raise_if_not_listening
from mcp_team.llm.openai_stream import StreamedReply
from mcp_team.llm.sdk_errors import clip, quoted
from mcp_team.llm.sdk_model import SdkModel
from mcp_team.llm.types import (
    ErrorKind,
    ModelError,
    ModelRequest,
    ModelResponse,
)

log = logging.getLogger(__name__)

OPENAI_API_URL = "https://api.openai.com/v1"
NO_KEY = "no-key"  # sent to a local server when no key is configured: the SDK insists on some key

TokenLimitParam = Literal["max_tokens", "max_completion_tokens"]

# The OpenAI models that accept only `max_completion_tokens`: o1, o3, o4-mini, ... and the gpt-5 family,
# also behind a router prefix (`openai/gpt-5`).
_REASONING_MODEL = re.compile(r"(^|/)(o\d|gpt-5)", re.I)

# What servers say when the model (or the server's setup) cannot call tools: Ollama ("... does not
# support tools"), llama.cpp ("tools param requires --jinja flag", older "Unsupported param: tools"),
# vLLM ("auto" tool choice requires --enable-auto-tool-choice ...), OpenAI ("tools is not supported ..."),
# OpenRouter (a 404: "No endpoints found that support tool use"), a LiteLLM proxy ("... does not support
# parameters: ['tools']"), and the plain "tools not supported" of others.
_NO_TOOLS = re.compile(
    r"(does not|doesn't) support (tools|tool use|tool calling|function calling)|requires --jinja|"
    r"unsupported param(eter)?:? '?tools\b|does not support param(eter)?s?:? \[?['\"]tools\b|"
    r"enable-auto-tool-choice|\btools?['\"`]? (is |are )?not supported|(tool|function) calling is not "
    r"(supported|enabled)|support tool use",
    re.I,
)

# What servers say when they answer only streams: DashScope ("This model only support stream mode, please enable
# the stream parameter"), and others' "stream must be set to true", "streaming is required".
_STREAM_ONLY = re.compile(
    r"only supports? stream|supports only stream|stream(ing)? (must|has to) be (set to )?(true|enabled)|"
    r"stream(ing)? (mode )?is required",
    re.I,
)


def token_limit_param(model: str, base_url: str | None) -> TokenLimitParam:
    """Which output-limit parameter a model takes, before any server has said otherwise.

    OpenAI's reasoning models (o-series, gpt-5) accept only `max_completion_tokens`, wherever they are
    served; OpenAI's own API takes it for every model (`max_tokens` is deprecated there). Other
    compatible servers all read `max_tokens`, and not all of them `max_completion_tokens`.
    """
    if _REASONING_MODEL.search(model) or base_url is None or _is_openai_api(base_url):
        return "max_completion_tokens"
    return "max_tokens"


def _is_openai_api(base_url: str) -> bool:
    return base_url.rstrip("/").lower().startswith(("https://api.openai.com", "http://api.openai.com"))


class OpenAIModel(SdkModel[openai.AsyncOpenAI]):
    """A model behind an OpenAI-compatible Chat Completions endpoint. Safe to call concurrently.

    `base_url=None` is OpenAI's own API; `api_key=None` leaves the key to the SDK's own lookup
    (`OPENAI_API_KEY`), which this module does not read: the CLI and the server pass both, from
    `ModelSettings`. A local server (any `base_url` but OpenAI's) needs no key, and gets 600 s per attempt
    instead of 120 s.
    `key_setting` and `url_setting` name where the key and the base URL were set (a variable, a team file's
    entry), for the errors that say what to check. The SDK client is created on the first call.
    """

    provider = "openai"
    sdk = openai
    api_shape = "the server's OpenAI-compatible API, which usually ends in /v1"
    placeholder_key = NO_KEY

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 4,
        timeout: float | None = None,
        price_provider: str | None = None,
        key_setting: str = "OPENAI_API_KEY",
        url_setting: str = "OPENAI_BASE_URL",
    ) -> None:
        url = None if not base_url or _is_openai_api(base_url) else base_url.rstrip("/")
        super().__init__(
            model,
            api_key=api_key or None,
            base_url=url,
            max_retries=max_retries,
            # A model on a local machine may take minutes for a long answer.
            timeout=timeout if timeout is not None else 120.0 if url is None else 600.0,
            price_provider=price_provider,
            key_setting=key_setting,
            url_setting=url_setting,
        )
        self._token_param = token_limit_param(model, self.base_url)
        self._token_param_switched = False
        self._send_parallel = True  # cleared when the server rejects `parallel_tool_calls`
        self._send_temperature = True  # cleared when the server rejects the temperature asked for
        self._send_reply_schema = True  # cleared when the server rejects a `response_format` JSON schema
        self._stream = False  # set when the server answers only with streams
        self._send_stream_options = True  # cleared when a streaming server rejects `stream_options`
        self._warned_no_usage = False
        self._answered = False  # set by the first call that got a reply: a server on this machine is not asked again

    def __repr__(self) -> str:
        return f"OpenAIModel({self.name!r}, base_url={self.base_url!r})"

    @property
    def where(self) -> str:
        """The endpoint in words, for messages: `the OpenAI API` or `the server at <url>`."""
        return "the OpenAI API" if self.base_url is None else f"the server at {self.base_url}"

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The SDK client, created on first use."""
        if (client := self._client_of_this_loop()) is not None:
            return client
        options: dict[str, Any] = {
            "base_url": self.base_url or OPENAI_API_URL,
            "max_retries": self.max_retries,
            "timeout": self.timeout,
            "http_client": openai.DefaultAsyncHttpxClient(),  # see `_client_of_this_loop`
        }
        try:
            self._client = openai.AsyncOpenAI(api_key=self._api_key, **options)  # None: the SDK's lookup
        except openai.OpenAIError:  # no key anywhere
            if self.base_url is None:
                raise ModelError(
                    "auth",
                    "no OpenAI API key is configured: set OPENAI_API_KEY (a local server, set with "
                    "OPENAI_BASE_URL, needs none)",
                ) from None
            self._client = openai.AsyncOpenAI(api_key=NO_KEY, **options)
        return self._client

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Run one Chat Completions call (the SDK retries transient failures). Raises `ModelError`."""
        try:
            client = self.client
        except openai.OpenAIError as err:
            raise self._model_error(err) from None
        if not self._answered and self.base_url is not None:
            await raise_if_not_listening(self.base_url, self.url_setting)
        messages = to_messages(request)
        tools = to_tool_params(request.tools)
        # At most six re-asks: one per request detail a server may reject (output limit, parallel calls,
        # temperature, a reply schema, whole replies, the usage of a stream).
        for _ in range(7):
            options: dict[str, Any] = {self._token_param: request.max_tokens}
            if request.temperature is not None and self._send_temperature:
                options["temperature"] = request.temperature
            if request.reply_schema is not None and self._send_reply_schema:
                schema = {"name": "reply", "schema": request.reply_schema}
                options["response_format"] = {"type": "json_schema", "json_schema": schema}
            if tools:
                options["tools"] = tools
                if self._send_parallel:
                    options["parallel_tool_calls"] = True
            streaming = self._stream  # this call's: another may change it while this one is out
            if streaming and self._send_stream_options:
                options["stream_options"] = {"include_usage": True}  # else a stream reports no usage
            try:
                if streaming:
                    completion = await self._streamed(client, model=self.name, messages=messages, **options)
                else:
                    completion = await client.chat.completions.create(model=self.name, messages=messages, **options)
            except openai.BadRequestError as err:
                if self._adapt(err, options, streaming):
                    continue
                raise self._model_error(err) from None
            except openai.OpenAIError as err:
                raise self._model_error(err) from None
            except (json.JSONDecodeError, UnicodeDecodeError) as err:
                if self._streams_anyway(getattr(err, "doc", ""), streaming):
                    continue
                # The SDK decodes a JSON-labelled body without catching this: a 200 that is not JSON at all.
                raise self._unreadable(f"not JSON: {err}") from None
            if self._streams_anyway(completion, streaming):
                continue
            self._answered = True
            return self._response(completion)
        raise ModelError("bad_request", f"{self.where} kept rejecting the {self.name} request's parameters")

    async def list_models(self, timeout: float = 10.0) -> list[tuple[str, str]]:
        """The models the endpoint lists (`GET /models`), as `(id, owned_by)`, asked once (no retries) with a short
        `timeout`: for `mcp-team check`, not for runs. Raises `ModelError`."""
        try:
            client = self.client.with_options(timeout=timeout, max_retries=0)
            page = await client.models.list()
            return [(str(m.id), str(getattr(m, "owned_by", "") or "")) for m in page.data]
        except openai.OpenAIError as err:
            raise self._model_error(err) from None
        except (AttributeError, TypeError, ValueError) as err:  # a 200 that is no model listing
            raise self._unreadable(f"not a model listing: {err}") from None

    async def _streamed(self, client: openai.AsyncOpenAI, **request: Any) -> ChatCompletion:
        """One call made streaming, its chunks put together into the reply a whole one would have been."""
        reply = StreamedReply()
        try:
            async with await client.chat.completions.create(**request, stream=True) as stream:
                async for chunk in stream:
                    try:
                        reply.add(chunk)
                    except Exception as err:  # the SDK's merging asserts and raises what it finds, of many kinds
                        what = str(err) or type(err).__name__  # a bare assert says nothing
                        raise self._unreadable(f"a stream chunk that is not Chat Completions': {what}") from None
        except (AttributeError, TypeError, ValueError, IndexError, KeyError) as err:
            raise self._unreadable(f"a stream chunk that is not Chat Completions': {err}") from None
        if not reply.chunks:
            raise self._unreadable("an empty stream")
        return reply.completion()

    def _streams_anyway(self, reply: object, streaming: bool) -> bool:
        """Whether the reply to a call made without `streaming` is a stream (server-sent events) all the same: then
        the server streams every reply, and this call and every later one are made streaming."""
        if streaming or not isinstance(reply, str) or not reply.lstrip().startswith(("data:", "event:")):
            return False
        self._stream_from_now("answers it with a stream though none was asked for")
        return True

    def _stream_from_now(self, why: str) -> None:
        if not self._stream:
            self._stream = True
            log.info("%s %s for %s; streaming from now on", self.where, why, self.name)

    def _adapt(self, err: openai.BadRequestError, sent: dict[str, Any], streaming: bool) -> bool:
        """Change the request detail a server rejected as unsupported; False when there is nothing to change.

        Each detail changes at most once per model, so an error that is about something else (say, a
        `max_tokens` value that is too large) is reported, not retried back and forth. `sent` and `streaming`
        are the rejected call's: concurrent calls are rejected alike, and the first to hear it changes the
        detail for all; the others are asked again as it now is.
        """
        if "parallel_tool_calls" in sent and _rejects(err, "parallel_tool_calls"):
            self._send_parallel = False
            return True
        if "temperature" in sent and (_rejects(err, "temperature") or _rejects_value(err, "temperature")):
            if self._send_temperature:
                self._send_temperature = False
                log.warning(
                    "%s does not take temperature %g for %s (%s); the model's own applies",
                    self.where, sent["temperature"], self.name, clip(_api_message(err), 200),
                )  # fmt: skip
            return True
        if "response_format" in sent and "response_format" in _api_message(err).lower():
            # The schema only helps a model keep to a form the prompt asks for too: the call goes on without it.
            self._send_reply_schema = False
            log.info("%s rejects a response_format JSON schema for %s; asking without one", self.where, self.name)
            return True
        if not streaming and _STREAM_ONLY.search(_api_message(err)):
            self._stream_from_now("answers only streams")
            return True
        if "stream_options" in sent and _rejects(err, "stream_options"):
            self._send_stream_options = False
            return True
        param: TokenLimitParam = "max_tokens" if "max_tokens" in sent else "max_completion_tokens"
        if not _rejects(err, param):
            return False
        if param != self._token_param:
            return True  # another call has switched it already
        if self._token_param_switched:
            return False  # it was switched to this one: both are rejected, for some other reason
        other: TokenLimitParam = "max_tokens" if param == "max_completion_tokens" else "max_completion_tokens"
        log.info("%s rejects %s for %s; sending %s instead", self.where, param, self.name, other)
        self._token_param, self._token_param_switched = other, True
        return True

    def _response(self, completion: ChatCompletion) -> ModelResponse:
        """The reply as a `ModelResponse`, however incomplete a compatible server made it."""
        if not isinstance(completion, ChatCompletion):
            # The SDK hands back a body that is not JSON-labelled as text, and JSON that is no object as it is.
            what = quoted(completion, 200) if isinstance(completion, str) else clip(repr(completion), 200)
            raise self._unreadable(f"not a Chat Completions reply: {what}")
        try:
            response = from_completion(completion, self.name)
        except (AttributeError, TypeError, ValueError, IndexError, KeyError) as err:
            raise self._unreadable(f"not a Chat Completions reply: {err}") from None
        if response.usage.cost_usd is None and not self._warned_no_usage:  # no counts, or not both
            self._warned_no_usage = True
            log.warning(
                "%s reports no token usage for %s: token budgets cannot count its calls, and their cost is unknown",
                self.where,
                self.name,
            )
        return response

    # -- errors ------------------------------------------------------------------------------------

    def _describe(self, err: Exception) -> tuple[ErrorKind, int | None, str]:
        detail = hint = ""
        if isinstance(err, openai.APIStatusError):
            status, said = err.status_code, _api_message(err)
            detail = (f": {said}" if said else "") + (f" (request-id {err.request_id})" if err.request_id else "")
            if _NO_TOOLS.search(said):
                return (
                    "bad_request",
                    status,
                    f"{self.name} cannot call tools on {self.where} (HTTP {status}){detail}; mcp-team needs tool "
                    "calling: choose a model that supports it (e.g. qwen2.5 or llama3.1 on Ollama), or enable it "
                    "on the server (llama.cpp: --jinja; vLLM: --enable-auto-tool-choice --tool-call-parser ...)",
                )
            if status == 429 and err.code == "insufficient_quota":
                return (
                    "unavailable",
                    status,
                    f"{self.where} says the account has no quota left{detail}; check billing",
                )
            if status == 404:
                hint = (
                    f"; check the model name {self.name!r} (GET {self.base_url or OPENAI_API_URL}/models lists "
                    "them) and the base URL (it usually ends in /v1)"
                )
        return self._described(err, detail, hint)


def _api_message(err: openai.APIError) -> str:
    """The server's own words about an error, from OpenAI's shape or the plain ones compatible servers use."""
    body = err.body
    if isinstance(body, dict):
        message = body.get("message") or body.get("detail") or body.get("error")
        return message if isinstance(message, str) else json.dumps(body)[:500]
    if isinstance(body, str):
        return quoted(body)
    return ""


def _rejects_value(err: openai.BadRequestError, param: str) -> bool:
    """Whether a 400 says the value of the request parameter `param` is not one the model takes (OpenAI's
    reasoning models: "Unsupported value: 'temperature' does not support 0.2 with this model")."""
    if err.code == "unsupported_value" and err.param == param:
        return True
    return bool(re.search(rf"unsupported value:? ['\"`]?{param}\b", _api_message(err), re.I))


def _rejects(err: openai.BadRequestError, param: str) -> bool:
    """Whether a 400 says the request parameter `param` is not supported (OpenAI's words, and the usual others)."""
    if err.code == "unsupported_parameter" and err.param == param:
        return True
    said = _api_message(err).lower()
    return bool(
        re.search(rf"(unsupported|unrecognized|unknown) (parameter|param|field|argument)s?:? ['\"`]?{param}\b", said)
        or re.search(rf"['\"`]?{param}['\"`]? is not supported", said)
        or (param in said and re.search(r"extra (inputs|fields) (are|is) not permitted", said))
    )
