"""Tool calls a model wrote as text: read, checked against the offered tools' schemas, and made real calls.

Small local models (Qwen2.5 1.5B on llama.cpp's server, among many) answer a turn with the call they mean to
make written out, not as a native `tool_calls` entry: fenced (```json {"name": ..., "arguments": ...}```),
bare, in Qwen's and Hermes' `<tool_call>` tags, after a line of prose, behind a `<think>` block, with doubled
braces (`{{"name": ...}}`, a template's escaping), as Llama 3.x writes them (`{"name": ..., "parameters": ...}`,
`<|python_tag|>`, `<function=NAME>{...}</function>`, `[NAME(a=1)]`), as Mistral's do (`[TOOL_CALLS] [...]`,
`[TOOL_CALLS]NAME[ARGS]{...}`), or as XML (Qwen3-Coder's `<function=NAME><parameter=KEY>...</parameter>`, and a
small model's `<function name="NAME"><arguments><KEY>...</KEY></arguments>`).

`read_calls` reads such a reply. A call runs (`as_tool_calls`, from `llm.call.chat`) only when it is
unambiguous: it names a tool the request offered, its arguments validate against that tool's JSON schema, and
the reply holds no conflicting call. Otherwise the reply's `problems` say, quoting it, what was wrong, and the
engine sends that back to the model (`feedback`) instead of taking the reply as an answer. Whether a model's
replies are read this way is its `tool_calls` setting (`reads_text_calls`): `auto` (the default) for
OpenAI-compatible servers other than OpenAI's own API, `text` always, `native` never.

What is no answer, and what goes back to the model, is `llm.answers`'.

The blocks a call may be written in are found and decoded by `llm.text_blocks` (the standard library's JSON
decoder, `ast` for Python-literal calls); the arguments are checked with `jsonschema` (see the report of issue
33: the parsers on PyPI rename arguments, drop calls of tools not offered silently, or come with a serving
engine).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mcp_team.llm.text_blocks import Where, blocks, decode, strip_thinking, unfenced
from mcp_team.llm.types import Model, ModelResponse, TextBlock, ToolDefinition, ToolUseBlock, built, defaults_of

ToolCallMode = Literal["auto", "native", "text"]
TOOL_CALL_MODES: tuple[ToolCallMode, ...] = ("auto", "native", "text")

# A chat template's own markers, which are no answer however they are arranged.
_MARKERS = re.compile(
    r"</?(?:tool_call|tool_response|tools|function_call|tool_calls|think|response|answer)>|<\|[\w]+\|>|\[/?[A-Z_]+\]"
)
_NAME_KEYS = ("name", "tool", "tool_name", "function", "recipient_name")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input", "tool_input")
_NOT_ARGUMENTS = {*_NAME_KEYS, "type", "id", "call_id"}
# A call a broken JSON text names, for the message that says it could not be read.
_NAMED = re.compile(r'"(?:name|tool|tool_name|function|recipient_name)"\s*:\s*"(?:functions\.)?([\w.-]+)"')
_TAIL_LIMIT = 200  # characters of prose after an unfenced call for it to still be the point of the reply


@dataclass(frozen=True)
class TextCall:
    """A call written as text: the tool, its arguments, where it was written, and the text it was read from."""

    name: str
    arguments: dict[str, Any]
    where: Where
    source: str
    problem: str | None = None  # why it cannot run: an unknown tool, arguments its schema refuses
    called: str = ""  # the name as written, when an alias (see `read_calls`) made it `name`


@dataclass(frozen=True)
class Reading:
    """What a reply's text holds in calls."""

    calls: tuple[TextCall, ...] = ()  # every call found, runnable or not, duplicates dropped, in order
    prose: str = ""  # the text without the calls and any <think> block
    ambiguous: str | None = None  # why the calls, each fine, cannot all be meant (two different ones in prose)
    ends_with_call: bool = False  # nothing of substance follows the last call
    tail: str = ""  # what follows the last call (template markers left out)

    @property
    def problems(self) -> list[str]:
        found = [c.problem for c in self.calls if c.problem]
        return [*found, self.ambiguous] if self.ambiguous else found

    @property
    def runnable(self) -> tuple[TextCall, ...]:
        """The calls to run: all of them, when every one is fine; none when any is not (it goes back whole)."""
        return () if not self.calls or self.problems else self.calls

    @property
    def names(self) -> list[str]:
        return list(dict.fromkeys(c.name for c in self.calls))


def only_markers(text: str) -> bool:
    """Whether `text` holds nothing but a chat template's markers (`<tool_response>`, `<|im_end|>`)."""
    return bool(text.strip()) and not _MARKERS.sub("", text).strip()


def read_calls(
    text: str, tools: Sequence[ToolDefinition], *, any_name: bool = False, aliases: Mapping[str, str] | None = None
) -> Reading:
    """The calls `text` writes of the offered `tools`, each checked against its tool's schema.

    `any_name`: also read calls of tools that were not offered (each with a problem saying so), as a reply
    that is no answer but a call meant for some tool; without it, only JSON of the call's shape (a name and
    arguments, or inside tool-call tags) naming another tool counts, so an answer that holds JSON does not.
    """
    body = strip_thinking(text)
    offered = {t.name: t for t in tools}
    # Other names that mean one offered tool alone (the engine's: a member's name for its handoff): read as it.
    offered = {**{alias: offered[name] for alias, name in (aliases or {}).items() if name in offered}, **offered}
    spans: list[tuple[int, int]] = []
    found: list[TextCall] = []
    for start, end, where, value, raw, name in blocks(body):
        if any(s <= start < e for s, e in spans):
            continue  # inside a block already read (a fence inside tags, JSON inside a fence)
        block = list(_calls_of(value, raw, where, name, offered, any_name))
        if not block:
            continue
        spans.append((start, end))
        found.extend(block)
    if not found:
        only = arguments_only(body, tools)
        if only is not None:
            found, spans = [only], [(0, len(body))]
    if not found:
        return Reading(prose=body.strip())
    calls = tuple(_unique(found))
    prose = _without(body, spans)
    last_end = max(e for _s, e in spans)
    tail = _MARKERS.sub("", body[last_end:]).strip()
    inline = [c for c in calls if c.where == "inline"]
    ambiguous = None
    # Different calls each written in its own place amid prose ("either A or B"): which is meant is unclear. Calls
    # in one block (a list), or in blocks with no prose around them, are all meant.
    if prose and len({c.source for c in inline}) > 1 and len({(c.name, _key(c.arguments)) for c in calls}) > 1:
        what = " and ".join(f"{c.name} {quote(c.source, 80)}" for c in calls[:3])
        ambiguous = (
            f"the reply's prose holds {len(calls)} different calls ({what}), so which one is meant is unclear: "
            "make the one call you mean, through tool calling"
        )
    if inline and len(tail) > _TAIL_LIMIT:  # a call quoted amid an answer, not made: no call at all
        return Reading(prose=body.strip())
    return Reading(calls, prose, ambiguous, ends_with_call=len(tail) <= _TAIL_LIMIT, tail=tail)


def _calls_of(
    value: Any, raw: str, where: Where, name: str | None, offered: dict[str, ToolDefinition], any_name: bool
) -> Iterator[TextCall]:
    """The calls a decoded block holds (none when it is not a call: an answer's own JSON)."""
    if name is not None:  # `<function=NAME>{...}`, `[TOOL_CALLS]NAME[ARGS]{...}`: the marker names it
        yield _call(name.removeprefix("functions."), value, raw, where, offered, explicit=True)
        return
    if value is None:
        if where == "tag" or (where in ("fence", "whole") and _NAMED.search(raw)):  # broken JSON meant as a call
            named = _NAMED.findall(raw)
            if named and (any_name or named[0].removeprefix("functions.") in offered):
                yield TextCall(named[0], {}, where, raw, f"the call of {named[0]} could not be read as JSON: "
                               f"{quote(raw)}")  # fmt: skip
        return
    items = value if isinstance(value, list) else [value]
    for item in items:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("tool_calls"), list):  # OpenAI's message shape, written out
            yield from _calls_of(item["tool_calls"], raw, where, None, offered, any_name)
            continue
        found = _name_of(item)
        if found is None:
            continue
        tool, arguments, explicit = found
        if tool not in offered and not any_name and not (explicit or where == "tag"):
            continue  # JSON with a `name` that names no tool: an answer's data, not a call
        yield _call(tool, arguments, raw, where, offered, explicit or where == "tag")


def _name_of(item: dict[str, Any]) -> tuple[str, Any, bool] | None:
    """The tool a call object names, its arguments, and whether it has a call's shape (a name and arguments)."""
    function = item.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):  # {"type": "function", "function": ...}
        return function["name"].removeprefix("functions."), _arguments(function), True
    for key in _NAME_KEYS:
        if isinstance(item.get(key), str) and item[key].strip():
            tool = item[key].strip().removeprefix("functions.")
            if any(k in item for k in _ARGUMENT_KEYS):
                return tool, _arguments(item), True
            return tool, {k: v for k, v in item.items() if k not in _NOT_ARGUMENTS}, False  # flattened
    return None


def _arguments(item: dict[str, Any]) -> Any:
    for key in _ARGUMENT_KEYS:
        if key in item:
            value = item[key]
            if isinstance(value, str):  # OpenAI's arguments are a JSON string
                decoded = decode(value.strip())
                return decoded if decoded is not None else value
            return value
    return {}


def _call(
    name: str, arguments: Any, raw: str, where: Where, offered: dict[str, ToolDefinition], explicit: bool
) -> TextCall:
    if arguments is None:
        arguments = {}
    tool = offered.get(name)
    called = ""
    if tool is not None and tool.name != name:
        name, called = tool.name, name  # an alias, read as the tool it means
    if tool is None:
        have = ", ".join(dict.fromkeys(t.name for t in offered.values())) or "none"
        return TextCall(name, {}, where, raw, f"{name} is not a tool you have (yours: {have}), in {quote(raw)}")
    if not isinstance(arguments, dict):
        problem = f"the arguments of {called or name} are not a JSON object, in {quote(raw)}"
        return TextCall(name, {}, where, raw, problem, called)
    if problems := schema_problems(tool.input_schema, arguments):
        problem = f"the arguments of {called or name} do not fit its schema ({'; '.join(problems)}), in {quote(raw)}"
        return TextCall(name, arguments, where, raw, problem, called)
    return TextCall(name, arguments, where, raw, None, called)


def schema_problems(schema: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    """What is wrong with `arguments` for a tool of input `schema`, at most three, each `path: message`."""
    import jsonschema

    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
    except jsonschema.SchemaError:
        return []  # a tool's schema this validator cannot read: the tool itself judges its arguments
    return [f"{'.'.join(map(str, e.path)) or 'arguments'}: {e.message}" for e in errors[:3]]


def arguments_only(body: str, tools: Sequence[ToolDefinition]) -> TextCall | None:
    """A reply that is only a JSON object (fenced or tagged or bare) of the arguments of exactly one offered tool,
    as `{"answer": "..."}` for finalize or `{"tasks": [...]}` for submit_plan: that tool's call."""
    inner = _MARKERS.sub("", unfenced(body.strip())).strip()
    inner = unfenced(inner)
    value = decode(inner) if inner.startswith("{") else None
    if not isinstance(value, dict) or not value:
        return None
    fits = [t for t in tools if _fits(t.input_schema, value)]
    if len(fits) != 1:
        return None
    return TextCall(fits[0].name, value, "whole", inner)


def _fits(schema: dict[str, Any], value: dict[str, Any]) -> bool:
    """Whether `value` is the arguments of a tool of `schema`: every key one of its properties, every required
    one there, and valid."""
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not set(value) <= set(properties):
        return False
    required = schema.get("required") or []
    return bool(required) and set(required) <= set(value) and not schema_problems(schema, value)


def _key(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, default=str)


def _unique(calls: list[TextCall]) -> Iterator[TextCall]:
    seen: set[tuple[str, str]] = set()
    for c in calls:
        key = (c.name, _key(c.arguments))
        if key not in seen:
            seen.add(key)
            yield c


def _without(body: str, spans: list[tuple[int, int]]) -> str:
    out, at = [], 0
    for start, end in sorted(spans):
        out.append(body[at:start])
        at = max(at, end)
    out.append(body[at:])
    return _MARKERS.sub("", "".join(out)).strip()


def quote(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return f"`{flat if len(flat) <= width else flat[: width - 1] + '…'}`"


# -- the model's setting ---------------------------------------------------------------------------------


def reads_text_calls(model: Model) -> bool:
    """Whether calls `model` writes as text are read and run: its `tool_calls` setting (`auto` by default:
    on for OpenAI-compatible servers other than OpenAI's own API, whose models call tools natively)."""
    mode = getattr(model, "tool_calls", "auto")
    if mode == "text":
        return True
    if mode == "native":
        return False
    return model.provider == "openai" and getattr(model, "base_url", None) is not None


_USE_DEFAULTS = defaults_of(ToolUseBlock)


def as_tool_calls(
    response: ModelResponse, tools: Sequence[ToolDefinition], aliases: Mapping[str, str] | None = None
) -> ModelResponse | None:
    """`response` with the calls its text writes made real tool calls (`from_text` set), the rest of its text
    kept; None when it has native calls already, or its text holds no call that can run. `aliases`: see
    `read_calls`."""
    if not tools or response.tool_uses or response.stop_reason == "max_tokens":  # a cut-off call is no call
        return None
    text = response.text
    reading = read_calls(text, tools, aliases=aliases)
    if not reading.runnable:
        return None
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]  # ids the same on every replay of the same reply
    content: list[TextBlock | ToolUseBlock] = [TextBlock(text=reading.prose)] if reading.prose else []
    for n, call in enumerate(reading.runnable):
        values = {"id": f"call_text_{digest}_{n}", "name": call.name, "input": call.arguments, "from_text": True}
        content.append(built(ToolUseBlock, _USE_DEFAULTS, values))
    return response.model_copy(update={"content": content, "stop_reason": "tool_use"})
