"""Our model types in Chat Completions' shapes and back: the messages and tools of a `ModelRequest`, and a
reply as a `ModelResponse`, however incomplete a compatible server made it.

Tool results become `tool` messages (failed ones marked in their text: the API has no error flag); a reasoning
model's `<think>` block in a reply's text is dropped, as the reasoning a server splits out is; tool-call
arguments that are not a JSON object become a `ToolUseBlock` with `input_error`, for the engine to send back
to the model to fix; a reply without `usage` counts zero tokens, at an unknown cost. The SDK's types are for
the type checker only: `import openai` is llm/openai.py's alone (it is slow).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from mcp_team.llm.sdk_errors import clip
from mcp_team.llm.types import (
    Message,
    ModelRequest,
    ModelResponse,
    StopReason,
    TextBlock,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)

if TYPE_CHECKING:
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionMessageParam,
        ChatCompletionMessageToolCallParam,
        ChatCompletionToolParam,
    )

ERROR_PREFIX = "Error: "  # Chat Completions has no error flag on tool results, so failed ones say so in text

_STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def to_messages(request: ModelRequest) -> list[ChatCompletionMessageParam]:
    """Our system prompt and messages in the Chat Completions shape.

    Tool results become `tool` messages, right after the assistant turn that asked for them and
    before any text of the same user turn, as the API requires.
    """
    out: list[ChatCompletionMessageParam] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for message in request.messages:
        out.extend(_message(message))
    return out


def _message(message: Message) -> list[ChatCompletionMessageParam]:
    if isinstance(message.content, str):
        if message.role == "user":
            return [{"role": "user", "content": message.content}]
        return [{"role": "assistant", "content": message.content}]
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    if message.role == "assistant":
        calls: list[ChatCompletionMessageToolCallParam] = [
            {
                "id": b.id,
                "type": "function",
                # An unreadable call goes back as `{}`: servers that parse the history would reject the original.
                "function": {"name": b.name, "arguments": "{}" if b.input_error else json.dumps(b.input)},
            }
            for b in message.content
            if isinstance(b, ToolUseBlock)
        ]
        if calls:
            return [{"role": "assistant", "content": text or None, "tool_calls": calls}]
        return [{"role": "assistant", "content": text}]
    out: list[ChatCompletionMessageParam] = [
        {
            "role": "tool",
            "tool_call_id": b.tool_use_id,
            "content": f"{ERROR_PREFIX}{b.content}" if b.is_error else b.content,
        }
        for b in message.content
        if isinstance(b, ToolResultBlock)
    ]
    if text or not out:
        out.append({"role": "user", "content": text})
    return out


def to_tool_params(tools: list[ToolDefinition]) -> list[ChatCompletionToolParam]:
    """Our tool definitions as Chat Completions function tools."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": dict(t.input_schema)},
        }
        for t in tools
    ]


def parse_arguments(raw: object) -> tuple[dict[str, Any], str | None]:
    """A tool call's arguments as `(input, None)`, or `({}, why they cannot be read)`.

    Empty arguments mean no arguments. Besides the JSON text the API specifies, an object (as some
    servers send) is taken as it is, and a JSON string holding the JSON object is decoded twice.
    """
    if isinstance(raw, dict):
        return raw, None
    text = raw.strip() if isinstance(raw, str) else "" if raw is None else json.dumps(raw)
    if not text:
        return {}, None
    try:
        value = json.loads(text)
        if isinstance(value, str):
            value = json.loads(value)
    except ValueError as err:
        return {}, f"the arguments are not valid JSON ({err}): {clip(text)}"
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, got {type(value).__name__}: {clip(text)}"
    return value, None


def from_completion(completion: ChatCompletion, requested_model: str) -> ModelResponse:
    """The API's reply as our `ModelResponse`; missing fields get the values that make sense."""
    if not completion.choices:
        raise ValueError("the reply has no choices")
    choice = completion.choices[0]
    message = choice.message
    content: list[TextBlock | ToolUseBlock] = []
    text = message.content
    if isinstance(text, list):  # content parts, as a few servers answer
        text = "".join(p.get("text", "") if isinstance(p, dict) else str(getattr(p, "text", "")) for p in text)
    if text:
        text = without_reasoning(text)
    if text:
        content.append(TextBlock(text=text))
    refusal = getattr(message, "refusal", None)
    if refusal:
        content.append(TextBlock(text=refusal))
    for i, call in enumerate(message.tool_calls or []):
        function = getattr(call, "function", None)
        if function is None:
            continue  # a custom (non-function) tool call: we offer none
        arguments, error = parse_arguments(function.arguments)
        content.append(ToolUseBlock(id=call.id or f"call_{i}", name=function.name, input=arguments, input_error=error))
    has_calls = any(isinstance(b, ToolUseBlock) for b in content)
    stop = _STOP_REASONS.get(choice.finish_reason or "", "tool_use" if has_calls else "end_turn")
    if refusal:
        stop = "refusal"
    elif stop == "end_turn" and has_calls:
        stop = "tool_use"  # some servers say "stop" after tool calls
    return ModelResponse(
        content=content,
        stop_reason=stop,
        usage=from_usage(completion.usage),
        model=completion.model or requested_model,
        id=completion.id or None,
    )


_THINK, _THOUGHT = "<think>", "</think>"
# A closing tag without its opening one ends reasoning only on a line of its own, as chat templates write it: in
# prose ("split on </think> and keep what follows") it is part of the answer.
_BARE_THOUGHT = re.compile(r"(?:^|\n)[ \t]*</think>[ \t]*(?:\n|$)")


def without_reasoning(text: str) -> str:
    """A reply's text without the reasoning a model wrote before its answer, as `<think>...</think>`.

    Reasoning models (DeepSeek-R1, Qwen3, QwQ) write it into the content on a server that does not split it
    out into `reasoning_content` (vLLM without --reasoning-parser, llama.cpp with --reasoning-format none,
    Ollama's older versions); their chat templates often open the tag in the prompt, so the content has only
    the closing one, on a line of its own. Kept, it would be a specialist's result and the run's answer, and hide
    a tool call written as text after it. A reply that is all reasoning (cut off inside it) has no answer.
    """
    head = text.lstrip()
    if head.startswith(_THINK):
        end = head.find(_THOUGHT)
        return "" if end < 0 else head[end + len(_THOUGHT) :].lstrip()
    if _THINK not in text and (bare := _BARE_THOUGHT.search(text)):
        return text[bare.end() :].lstrip()
    return text


def from_usage(usage: Any) -> Usage:
    """The reply's token counts; `prompt_tokens` includes cached input.

    A server that reports no count, or only one of the two, leaves what the call used unknown: it counts zero
    for what is missing, and its cost is unknown (null), never priced from the zeros (which would call it free).
    """
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    details = getattr(usage, "prompt_tokens_details", None)
    return Usage(
        input_tokens=prompt or 0,
        output_tokens=completion or 0,
        cache_read_input_tokens=(getattr(details, "cached_tokens", None) or 0) if details else 0,
        cache_creation_input_tokens=(getattr(details, "cache_write_tokens", None) or 0) if details else 0,
        cost_usd=None if prompt is None or completion is None else 0.0,
    )
