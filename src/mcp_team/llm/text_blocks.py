"""The blocks of a model's reply that may hold a tool call written as text: inside tool-call tags or a chat
template's markers (their arguments JSON or XML elements), in a code fence, or JSON (or a Python literal) anywhere
in the prose, each decoded.

`llm.text_calls` reads calls from these blocks; `json_objects` gives every JSON object a reply holds (a
judge's verdict written as JSON). Written on the standard library's JSON decoder and `ast` (see text_calls).
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Iterator
from typing import Any, Literal

Where = Literal["tag", "fence", "whole", "inline"]
"""Where a call was written: in tool-call tags or markers, in a code fence, as the whole reply, or in prose."""

_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.S | re.I)
# Tags and markers a chat template puts around calls (Qwen and Hermes, Llama 3.x, Mistral, and what small
# models make of them: `<tools>`, `<function_call>`). A missing closing tag runs to the end of the reply.
_TAGGED = re.compile(
    r"<(tool_call|tools|function_call|functioncall|tool_calls)>(.*?)(?:</\1>|(?=<\1>)|$)"
    r"|<\|python_tag\|>(.*?)(?:<\|eom_id\|>|<\|eot_id\|>|(?=<\|python_tag\|>)|$)"
    r"|<function(?:=|\s+name=)[\"']?([\w.-]+)[\"']?\s*>(.*?)(?:</function>|$)"
    r"|\[TOOL_CALLS\]\s*([\w.-]+)\s*\[ARGS\]\s*(.*?)(?=\[TOOL_CALLS\]|$)"
    r"|\[TOOL_CALLS\](.*?)(?=\[TOOL_CALLS\]|$)",
    re.S | re.I,
)
# A call written as XML inside other tags: Qwen3-Coder's template (`<function=NAME><parameter=KEY>VALUE</parameter>`)
# and what small models make of it (`<tools><function name="NAME"><arguments><KEY>VALUE</KEY></arguments>`).
_XML_FUNCTION = re.compile(r"<function(?:=|\s+name=)[\"']?([\w.-]+)[\"']?\s*>(.*?)(?:</function>|$)", re.S | re.I)
_XML_WRAPPER = re.compile(r"\s*<(arguments|parameters|args)>(.*?)(?:</\1>|$)\s*", re.S | re.I)
_XML_PARAMETER = re.compile(
    r"<parameter(?:=|\s+name=)[\"']?([\w.-]+)[\"']?\s*>(.*?)(?:</parameter>|(?=<parameter)|$)"
    r"|<([\w.-]+)>(.*?)</\3>",
    re.S,
)
# A fence never closed runs to the end of the reply, as a tag does: a call cut off at the output limit.
_FENCE = re.compile(r"```[ \t]*([\w-]*)[ \t]*\n?(.*?)(?:```|$)", re.S)
# Where JSON that may hold a call starts: an object, or a list of objects. Not every `[`: a reply's own brackets
# (`[1]`, `[offline w0]`, Markdown links) hold no call, and trying each as JSON cost a failed decode apiece (a
# synthesis of 32 results: 0.75 ms). An object inside another kind of list is still found at its own `{`.
_OPEN = re.compile(r"\{|\[(?=\s*\{)")
_FENCE_LANGUAGES = {"", "json", "json5", "tool_call", "tool_code", "tool", "javascript", "js", "python", "py"}


def strip_thinking(text: str) -> str:
    """`text` without `<think>` blocks (an unclosed one runs to the end)."""
    return _THINK.sub("", text) if "<think>" in text.lower() else text


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every JSON object `text` holds (in tags, fences, or anywhere), in order: a verdict or a ruling written as
    JSON is read from these."""
    found: list[dict[str, Any]] = []
    spans: list[tuple[int, int]] = []
    for start, end, _where, value, _raw, _name in blocks(strip_thinking(text)):
        if any(s <= start < e for s, e in spans):
            continue
        items = value if isinstance(value, list) else [value]
        if dicts := [item for item in items if isinstance(item, dict)]:
            spans.append((start, end))
            found.extend(dicts)
    return found


def blocks(body: str) -> Iterator[tuple[int, int, Where, Any, str, str | None]]:
    """Each block of `body` that may hold calls: (start, end, where, decoded value or None, its text, the name
    a marker gave it), tags first, then fences, then JSON anywhere in the rest."""
    for m in _TAGGED.finditer(body):
        if m.group(2) is not None:
            inner, name = m.group(2), None
            if decode(unfenced(inner.strip())) is None and _XML_FUNCTION.search(inner):  # XML calls in the tags
                for f in _XML_FUNCTION.finditer(inner):
                    at = m.start(2) + f.start()
                    yield at, m.start(2) + f.end(), "tag", _from_xml(f.group(2)), f.group(0), f.group(1)
                continue
        elif m.group(3) is not None:
            inner, name = m.group(3), None
        elif m.group(4) is not None:
            inner, name = m.group(5), m.group(4)
        elif m.group(6) is not None:
            inner, name = m.group(7), m.group(6)
        else:
            inner, name = m.group(8), None
        inner = unfenced(inner.strip())
        value = _from_xml(inner) if m.group(4) is not None else decode(inner)  # `<function=NAME>`: JSON or XML
        yield m.start(), m.end(), "tag", value, inner, name
    for m in _FENCE.finditer(body):
        if m.group(1).lower() in _FENCE_LANGUAGES:
            inner = m.group(2).strip()
            yield m.start(), m.end(), "fence", decode(inner), inner, None
    stripped = body.strip()
    whole_at = body.find(stripped) if stripped else 0
    read_any = False
    i = 0
    while (opened := _OPEN.search(body, i)) is not None:
        i = opened.start()
        decoded = _decode_at(body, i)
        if decoded is None:
            i += 1
            continue
        value, end = decoded
        read_any = True
        where: Where = "whole" if i == whole_at and not body[end:].strip() else "inline"
        yield i, end, where, value, body[i:end], None
        i = end
    if stripped.startswith("{") and not read_any:  # a reply of broken JSON: cut off at its token limit, say
        yield whole_at, whole_at + len(stripped), "whole", None, stripped, None
    if stripped.startswith("[") and stripped.endswith("]") and "(" in stripped:  # Llama 3.2's `[name(a=1)]`
        yield whole_at, whole_at + len(stripped), "whole", _python_calls(stripped), stripped, None


def _from_xml(inner: str) -> Any:
    """The arguments of an XML-written call: JSON when they are JSON, else its parameters (see `_xml_arguments`)."""
    text = unfenced(inner.strip())
    value = decode(text)
    return value if value is not None or not text else _xml_arguments(text)


def _xml_arguments(inner: str) -> dict[str, Any] | None:
    """A call's arguments written as XML elements, each parameter one (`<parameter=task>...</parameter>`, or
    `<task>...</task>`, either inside `<arguments>`): values as written, a JSON object, list or string decoded;
    None when it holds no such element."""
    if (wrapped := _XML_WRAPPER.fullmatch(inner)) is not None:
        inner = wrapped.group(2)
    arguments: dict[str, Any] = {}
    for p in _XML_PARAMETER.finditer(inner):
        key, value = (p.group(1), p.group(2)) if p.group(1) is not None else (p.group(3), p.group(4))
        value = value.strip()
        if value[:1] in '{["':
            decoded = decode(value)
            value = decoded if decoded is not None else value
        arguments[key] = value
    return arguments or None


def unfenced(text: str) -> str:
    m = _FENCE.fullmatch(text)
    return m.group(2).strip() if m else text


def decode(text: str) -> Any:
    """`text` as JSON: strict, then with doubled braces made single, then as a Python literal; None if none."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    if "{{" in text:
        try:
            return json.loads(text.replace("{{", "{").replace("}}", "}"))
        except ValueError:
            pass
        # Only the outer braces doubled, or only the opening one: `{{"name": ..., "arguments": {...}}}}`,
        # `{{"name": ..., "arguments": {...}}`.
        for single in (text[1:-1], text[1:]) if text.startswith("{{") else ():
            try:
                return json.loads(single)
            except ValueError:
                pass
    if text[0] in "{[":
        try:
            return ast.literal_eval(_parsed(text))  # Hermes 2's `{'name': ..., 'arguments': {...}}`: literals only
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):  # TypeError: `{{...}}`, a set
            return None
    return None


_DECODER = json.JSONDecoder()


def _decode_at(text: str, i: int) -> tuple[Any, int] | None:
    """The JSON value starting at `text[i]` and where it ends; doubled braces read as single ones."""
    try:
        return _DECODER.raw_decode(text, i)
    except ValueError:
        pass
    if text.startswith("{{", i):
        end = _balanced_end(text, i)
        if end is not None:
            value = decode(text[i:end])
            if value is not None:
                return value, end
    return None


def _balanced_end(text: str, i: int) -> int | None:
    """Where the brace opened at `text[i]` closes, strings skipped; None when it never does."""
    depth, in_string, escaped = 0, False, False
    for j in range(i, len(text)):
        ch = text[j]
        if in_string:
            escaped = ch == "\\" and not escaped
            if ch == '"' and not escaped:
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return None


def _parsed(text: str) -> ast.expr:
    """`text` parsed as one Python expression, without the warnings Python gives for a model's odd escapes
    (`"\\("`): they went to the server's stderr."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))
        return ast.parse(text, mode="eval").body


def _python_calls(text: str) -> list[dict[str, Any]] | None:
    """Llama 3.2's pythonic calls, `[name(a=1, b="x"), ...]`, as call objects; None when it is not that."""
    try:
        node = _parsed(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if not isinstance(node, ast.List) or not node.elts:
        return None
    calls = []
    for elt in node.elts:
        if not isinstance(elt, ast.Call) or not isinstance(elt.func, ast.Name) or elt.args:
            return None
        try:
            arguments = {kw.arg: ast.literal_eval(kw.value) for kw in elt.keywords if kw.arg is not None}
        except ValueError:
            return None
        calls.append({"name": elt.func.id, "arguments": arguments})
    return calls
