"""Tool calls a model wrote as text instead of making them: bare, fenced or tagged JSON naming a tool.

Small local models (e.g. Qwen2.5 1.5B on llama.cpp's server) often answer a turn with the JSON of the
call they mean to make. Such a reply is neither a call nor an answer: the engine sends it back to the
model (the supervisor's turns, a specialist's loop) instead of taking it as the final answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

# A tool call written as text: the JSON object of a call (bare, fenced, or in <tool_call> tags, as small
# local models write them) naming one of the offered tools.
_NAMED = re.compile(r'"(?:name|tool|tool_name|function|recipient_name)"\s*:\s*"(?:functions\.)?([\w.-]+)"')
_FENCED = re.compile(r"```(?:json|tool_call)?\s*(.*?)```|<tool_call>(.*?)</tool_call>", re.S | re.I)

TEXT_TOOL_CALL_FEEDBACK = (
    "Your last reply wrote a tool call as text ({name}), so it did not run and is not an answer. Call the tool "
    "itself, through tool calling; do not write the call as JSON in your reply. When you have the answer, "
    "reply with the answer itself."
)


def text_tool_call(text: str, tools: Collection[str]) -> str | None:
    """The name of the offered tool a text-only reply tries to call, or None when it is a real answer.

    A model that cannot (or forgot how to) call tools through the API writes the call as JSON: bare,
    in a code fence, or in `<tool_call>` tags. Such a turn must go back to the model, never become the
    run's answer. Only JSON naming one of `tools` counts, so an answer that merely contains JSON does not.
    """
    if not tools:  # nothing it could be calling (most specialists have no tools)
        return None
    stripped = text.strip()
    candidates = [next(g for g in m.groups() if g is not None) for m in _FENCED.finditer(stripped)]
    if stripped.startswith(("{", "[")):
        candidates.append(stripped)
    for candidate in candidates:
        for name in _names(candidate):
            if name in tools:
                return name
    return None


def _names(candidate: str) -> list[str]:
    """Tool names a candidate JSON call names; read with a pattern when the JSON itself is broken."""
    try:
        value: Any = json.loads(candidate)
    except ValueError:
        return _NAMED.findall(candidate)
    calls = value if isinstance(value, list) else [value]
    names = []
    for call in calls:
        if isinstance(call, dict):
            name = call.get("name") or call.get("tool") or call.get("tool_name") or call.get("function")
            if isinstance(name, dict):
                name = name.get("name")
            if isinstance(name, str):
                names.append(name.removeprefix("functions."))
    return names
