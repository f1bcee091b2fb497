"""A fake OpenAI-compatible Chat Completions API (`POST /v1/chat/completions`) on 127.0.0.1, for tests
through the real `openai` SDK over a real socket.

    with FakeOpenAIAPI(brain=offline_brain) as api:
        api.fail(429, "slow down", times=1, headers={"retry-after-ms": "10"})
        model = OpenAIModel("gpt-4o-mini", api_key="k", base_url=api.base_url)
        ...

Scripted replies (`reply`, `fail`) are served first, in order (see `fake_api`). When none are
left, `brain` answers: the request body is converted to our `ModelRequest`, the brain returns a
`ModelResponse` (or raises `ModelError`, which becomes the matching HTTP error), and that is
converted back to the wire.

Switches make it behave like the compatible servers that differ from OpenAI's API (they apply to
the brain's answers):
- `tools_error`: the model cannot call tools; every request with tools gets the error that Ollama,
  llama.cpp's server, vLLM, OpenRouter (no provider of the model takes tools), a LiteLLM proxy or a plain
  server gives;
- `invalid_arguments`: that many of the next tool calls get arguments that are not valid JSON;
- `usage=False`: replies carry no `usage`;
- `parallel=False`: at most one tool call per reply;
- `reject_params`: request parameters answered with OpenAI's "Unsupported parameter" 400;
- `reasoning_in_content`: a reasoning model's thinking comes first in each reply's text, in `<think>` tags, as
  on vLLM without `--reasoning-parser`;
- `stream_only`: every reply is a stream of server-sent events; `"always"` sends one even when `stream` is not
  asked for (as a proxy that forces streaming), `"rejects"` answers such a request with DashScope's 400;
- `repeat_names`: a streamed tool call's id, type and name come again in every chunk of it, as Fireworks and some
  proxies send them;
- `text_calls`: the brain's tool calls are written as text in the reply instead (`TEXT_FORMATS`: fenced, bare,
  Qwen's and Hermes' tags, after prose, behind `<think>`, doubled braces, Llama 3.x's, Mistral's), as small local
  models on llama.cpp's server do;
- `models`: `GET /v1/models` lists these names (`any_name`: as llama.cpp's server, which answers any name).
A request with `stream: true` is answered with a stream (usage in a last chunk when `stream_options` asks).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any, Literal

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
from support.fake_messages_api import member_from_prompt

Brain = Callable[[ModelRequest], ModelResponse]
StreamOnly = Literal["always", "rejects"]
TextFormat = Literal[
    "fenced", "bare", "tagged", "prose", "think", "doubled", "llama", "llama_json", "mistral", "hermes"
]
TEXT_FORMATS: tuple[TextFormat, ...] = (
    "fenced", "bare", "tagged", "prose", "think", "doubled", "llama", "llama_json", "mistral", "hermes",
)  # fmt: skip
ToolsError = Literal["ollama", "llama.cpp", "vllm", "openrouter", "litellm", "plain"]

ERROR_PREFIX = "Error: "  # how the backend marks a failed tool result (see mcp_team.llm.chat_completions)

_ids = itertools.count(1)

THINKING = "<think>\nThe user asked for something. Let me work out which step comes first.\n</think>"

# The HTTP status and error type OpenAI uses for each `ModelError` kind.
_ERROR_STATUS: dict[str, tuple[int, str]] = {
    "rate_limited": (429, "rate_limit_exceeded"),
    "overloaded": (503, "server_error"),
    "server_error": (500, "server_error"),
    "timeout": (504, "server_error"),
    "auth": (401, "invalid_request_error"),
    "bad_request": (400, "invalid_request_error"),
}

_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length", "refusal": "content_filter"}


# -- wire-shape builders ---------------------------------------------------------------------------


def error_body(
    message: str, type: str = "invalid_request_error", *, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """OpenAI's error body."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def tool_call(id: str, name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    """One function tool call; `arguments` is sent as given when it is a string."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": id, "type": "function", "function": {"name": name, "arguments": args}}


def completion(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = "stop",
    usage: dict[str, Any] | None = None,
    *,
    model: str = "gpt-fake",
    id: str | None = None,
) -> dict[str, Any]:
    """A Chat Completions response body; `usage=None` gives a default one (pass `{}` for none at all)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body: dict[str, Any] = {
        "id": id or f"chatcmpl-fake-{next(_ids)}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if usage is None:
        usage = {"prompt_tokens": 10, "completion_tokens": 5}
    if usage:
        body["usage"] = {
            **usage,
            "total_tokens": (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0),
        }
    return body


def stream(body: dict[str, Any], *, usage: bool = True, repeat_names: bool = False) -> bytes:
    """A Chat Completions body as the server-sent events of the stream a server sends for it: the text, then each
    tool call with its arguments in two pieces, the finish reason, and the usage in a chunk of its own.
    `repeat_names`: each tool call's id, type and name come again with the second piece of its arguments."""
    choice, head = body["choices"][0], {k: body[k] for k in ("id", "created", "model")}
    message = choice["message"]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": message.get("content") or ""}]
    for i, call in enumerate(message.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        cut = len(arguments) // 2
        first = {**call, "function": {"name": call["function"]["name"], "arguments": arguments[:cut]}}
        second = {"function": {"arguments": arguments[cut:]}}
        if repeat_names:
            second = {**call, "function": {"name": call["function"]["name"], **second["function"]}}
        deltas += [{"tool_calls": [{"index": i, **first}]}, {"tool_calls": [{"index": i, **second}]}]
    chunks = [{**head, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]})
    if usage and body.get("usage"):
        chunks.append({**head, "choices": [], "usage": body["usage"]})
    events = [f"data: {json.dumps({**c, 'object': 'chat.completion.chunk'})}\n\n" for c in chunks]
    return "".join([*events, "data: [DONE]\n\n"]).encode()


# -- conversion between the wire and our types -----------------------------------------------------


def _text_of(content: Any) -> str:
    """A message content (a string or a list of text parts) as one string."""
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if p.get("type") == "text")


def request_from_json(body: dict[str, Any]) -> ModelRequest:
    """A Chat Completions request body as our `ModelRequest`.

    Consecutive `tool` messages and the user text after them become one user message, the way the
    engine sends them; a failed tool result comes back with `is_error`.
    """
    system: list[str] = []
    messages: list[Message] = []
    pending: list[ContentBlock] = []

    def flush() -> None:
        if pending:
            messages.append(Message(role="user", content=list(pending)))
            pending.clear()

    for m in body["messages"]:
        role = m["role"]
        if role in ("system", "developer"):
            system.append(_text_of(m["content"]))
        elif role == "tool":
            text = _text_of(m.get("content", ""))
            failed = text.startswith(ERROR_PREFIX)
            pending.append(
                ToolResultBlock(tool_use_id=m["tool_call_id"], content=text.removeprefix(ERROR_PREFIX), is_error=failed)
            )
        elif role == "user":
            if pending:
                if text := _text_of(m["content"]):
                    pending.append(TextBlock(text=text))
                flush()
            else:
                messages.append(Message(role="user", content=_text_of(m["content"])))
        elif role == "assistant":
            flush()
            blocks: list[ContentBlock] = []
            if text := _text_of(m.get("content") or ""):
                blocks.append(TextBlock(text=text))
            for call in m.get("tool_calls") or []:
                fn = call["function"]
                blocks.append(ToolUseBlock(id=call["id"], name=fn["name"], input=json.loads(fn["arguments"] or "{}")))
            plain = all(isinstance(b, TextBlock) for b in blocks)
            messages.append(Message(role="assistant", content=_text_of(m.get("content") or "") if plain else blocks))
        else:
            raise ValueError(f"message role {role!r} is not supported by the fake API")
    flush()
    tools = [
        ToolDefinition(
            name=t["function"]["name"],
            description=t["function"].get("description", ""),
            input_schema=t["function"].get("parameters") or {},
        )
        for t in body.get("tools", [])
    ]
    limit = body.get("max_completion_tokens") or body.get("max_tokens") or 4096
    prompt = "\n".join(system)
    return ModelRequest(
        system=prompt, messages=messages, tools=tools, max_tokens=limit, member=member_from_prompt(prompt)
    )


def response_to_json(resp: ModelResponse, model: str) -> dict[str, Any]:
    """Our `ModelResponse` as a Chat Completions body, named after the requested `model` as servers do."""
    u = resp.usage
    calls = [tool_call(b.id, b.name, b.input) for b in resp.tool_uses]
    usage = {
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cache_read_input_tokens},
    }
    return completion(
        resp.text or None, calls or None, _FINISH.get(resp.stop_reason, "stop"), usage, model=model, id=resp.id
    )


# -- the server ------------------------------------------------------------------------------------


class FakeOpenAIAPI(FakeJSONAPI):
    """A Chat Completions server on an ephemeral port of 127.0.0.1, run in a daemon thread.

    Records every request body (`requests`) and its headers (`request_headers`, lower-cased names).
    `base_url` ends in `/v1`, as the SDK and every compatible server expect.
    """

    route = "/v1/chat/completions"
    name = "fake-openai-api"
    request_id_header = "x-request-id"

    def __init__(
        self,
        brain: Brain | None = None,
        *,
        tools_error: ToolsError | None = None,
        invalid_arguments: int = 0,
        usage: bool = True,
        parallel: bool = True,
        reject_params: tuple[str, ...] = (),
        reasoning_in_content: bool = False,
        stream_only: StreamOnly | None = None,
        repeat_names: bool = False,
        text_calls: TextFormat | None = None,
        models: list[str] | None = None,
        any_name: bool = False,
    ) -> None:
        super().__init__()
        self.text_calls = text_calls
        self.models = models
        self.any_name = any_name
        self.brain = brain
        self.tools_error = tools_error
        self.invalid_arguments = invalid_arguments
        self.usage = usage
        self.parallel = parallel
        self.reject_params = reject_params
        self.reasoning_in_content = reasoning_in_content
        self.stream_only = stream_only
        self.repeat_names = repeat_names

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def fail(
        self, status: int, message: str, *, times: int = 1, type: str = "server_error", code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        """Queue `times` error replies."""
        for _ in range(times):
            self.reply(status, error_body(message, type, code=code), headers)

    def error_reply(self, status: int, message: str) -> Reply:
        return Reply(status, error_body(message, code="not_found" if status == 404 else None))

    def get(self, path: str) -> Reply:
        if self.models is None or path.split("?")[0].rstrip("/") != "/v1/models":
            return super().get(path)
        owner = "llamacpp" if self.any_name else "organization-owner"
        listed = [{"id": m, "object": "model", "created": 1_700_000_000, "owned_by": owner} for m in self.models]
        return Reply(200, {"object": "list", "data": listed})

    def answer(self, body: dict[str, Any]) -> Reply:
        model = str(body.get("model", ""))
        if body.get("tools") and self.tools_error is not None:
            return _no_tools_reply(self.tools_error, model)
        for param in self.reject_params:
            if param in body:
                return Reply(
                    400,
                    error_body(
                        f"Unsupported parameter: '{param}' is not supported with this model.",
                        code="unsupported_parameter",
                        param=param,
                    ),
                )
        if self.stream_only == "rejects" and not body.get("stream"):
            return Reply(
                400,
                error_body(
                    "This model only support stream mode, please enable the stream parameter to access the model."
                ),
            )
        if self.brain is None:
            # `x-should-retry: false` stops the SDK retrying this test bug.
            return Reply(
                500, error_body("FakeOpenAIAPI: no scripted reply left and no brain"), {"x-should-retry": "false"}
            )
        try:
            request = request_from_json(body)
        except (KeyError, TypeError, ValueError) as err:
            return Reply(400, error_body(f"FakeOpenAIAPI: bad request: {err}"))
        try:
            answer = response_to_json(self.brain(request), model)
        except ModelError as err:
            status, kind = _ERROR_STATUS.get(err.kind, (500, "server_error"))
            return Reply(status, error_body(err.message, kind))
        answer = self._quirks(answer)
        if body.get("stream") or self.stream_only == "always":
            usage = (body.get("stream_options") or {}).get("include_usage")
            events = stream(answer, usage=bool(usage), repeat_names=self.repeat_names)
            return Reply(200, events, {"content-type": "text/event-stream"})
        return Reply(200, answer)

    def _quirks(self, body: dict[str, Any]) -> dict[str, Any]:
        """The brain's answer, changed the way the switches say."""
        message = body["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        if calls and not self.parallel:
            message["tool_calls"] = calls = calls[:1]
        with self._lock:
            for call in calls:
                if self.invalid_arguments > 0:
                    self.invalid_arguments -= 1
                    call["function"]["arguments"] = call["function"]["arguments"][:-1]  # cut off: not JSON
        if not self.usage:
            body.pop("usage", None)
        if self.reasoning_in_content:
            message["content"] = f"{THINKING}\n\n{message['content'] or ''}"
        if self.text_calls is not None and calls:
            message["content"] = calls_as_text(calls, self.text_calls)
            message.pop("tool_calls")
            body["choices"][0]["finish_reason"] = "stop"
        return body


def calls_as_text(calls: list[dict[str, Any]], style: TextFormat) -> str:
    """Tool calls (the wire's) written as text, as a model whose calls the server does not parse writes them."""
    objects = [{"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])} for c in calls]
    each = [json.dumps(o) for o in objects]
    if style == "fenced":
        return "\n".join(f"```json\n{o}\n```" for o in each)
    if style == "bare":
        return each[0] if len(each) == 1 else json.dumps(objects)
    if style == "tagged":
        return "\n".join(f"<tool_call>\n{o}\n</tool_call>" for o in each)
    if style == "prose":
        return f"I will make the call now: {each[0] if len(each) == 1 else json.dumps(objects)}"
    if style == "think":
        tagged = "\n".join(f"<tool_call>\n{o}\n</tool_call>" for o in each)
        return f'<think>\nWhich tool? {{"name": "none"}} Let me call it.\n</think>\n\n{tagged}'
    if style == "doubled":
        return "\n".join(f"<tools>{o.replace('{', '{{').replace('}', '}}')}</tools>" for o in each)
    if style == "llama":  # Llama 3.2's pythonic calls
        return (
            "["
            + ", ".join(f"{o['name']}({', '.join(f'{k}={v!r}' for k, v in o['arguments'].items())})" for o in objects)
            + "]"
        )
    if style == "llama_json":  # Llama 3.1's JSON calls, after its python tag
        return "".join(
            f"<|python_tag|>{json.dumps({'name': o['name'], 'parameters': o['arguments']})}" for o in objects
        )
    if style == "hermes":  # Hermes 2 Pro's: Python-literal dicts in tags
        return "\n".join(f"<tool_call>\n{o!r}\n</tool_call>" for o in objects)
    return f"[TOOL_CALLS] {json.dumps(objects)}"  # Mistral's


def _no_tools_reply(style: ToolsError, model: str) -> Reply:
    """What each server answers when its model cannot call tools."""
    if style == "ollama":
        return Reply(400, error_body(f"{model} does not support tools", "api_error"))
    if style == "openrouter":  # a 404, as if the model were unknown
        return Reply(
            404,
            {
                "error": {
                    "message": "No endpoints found that support tool use. To learn more about provider routing, "
                    "visit: https://openrouter.ai/docs/provider-routing",
                    "code": 404,
                }
            },
        )
    if style == "litellm":
        return Reply(
            400,
            error_body(
                f"litellm.UnsupportedParamsError: ollama does not support parameters: ['tools'], for model={model}. "
                "To drop these, set `litellm.drop_params=True` or for proxy: `litellm_settings: drop_params: true`",
                "None",
            ),
        )
    if style == "plain":
        return Reply(400, error_body("tools not supported"))
    if style == "llama.cpp":  # a 500, which the SDK retries first
        return Reply(
            500,
            {"error": {"code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}},
            {"retry-after-ms": "1"},
        )
    return Reply(
        400,
        {
            "object": "error",
            "message": '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    )
