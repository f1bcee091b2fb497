"""What is no answer, and what goes back to a model whose reply was none or wrote calls as text that did not run.

A reply taken as an answer (the supervisor's, a specialist's, the closing synthesis's) is none when it is empty
(or only a chat template's markers, or punctuation alone), a tool call written as text, JSON meant for a tool, or
the request said back; the engine sends it back once with `NoAnswer.feedback`, then says why the run has no answer.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp_team.llm.text_blocks import strip_thinking
from mcp_team.llm.text_calls import Reading, arguments_only, only_markers, quote, read_calls
from mcp_team.llm.types import ToolDefinition

TEXT_TOOL_CALL_FEEDBACK = (
    "Your last reply wrote a tool call as text ({name}), so it did not run and is not an answer. Call the tool "
    "itself, through tool calling; do not write the call as JSON in your reply. When you have the answer, "
    "reply with the answer itself."
)


def feedback(reading: Reading, read_text: bool) -> str:
    """What to tell a model whose reply wrote calls as text that did not run: why, quoting it, and what to do."""
    names = ", ".join(reading.names)
    if not read_text or not reading.problems:
        return TEXT_TOOL_CALL_FEEDBACK.format(name=names)
    problems = "\n".join(f"- {p}" for p in reading.problems)
    return (
        f"Your last reply wrote a call of {names} as text, and it could not run:\n{problems}\n"
        "Call the tool again with arguments that fit its schema (through tool calling if you can), or, when "
        "you have the answer, reply with the answer itself."
    )


@dataclass(frozen=True)
class NoAnswer:
    """Why a reply meant as an answer is none, in a few words (`why`) and as the model is told (`feedback`)."""

    kind: Literal["empty_answer", "tool_call_as_answer", "tool_json_as_answer", "echoed_request"]
    why: str
    feedback: str = field(default="")


def not_an_answer(
    text: str, request: str = "", tools: Sequence[ToolDefinition] = (), control: Sequence[str] = ()
) -> NoAnswer | None:
    """Why `text`, a reply taken as an answer, is none, or None when it is one: empty (or only template
    markers), a tool call written as text (of any tool, offered or not, with nothing after it), JSON meant for
    one of `tools` (the arguments of a call, without the call), a short reply about the run's own machinery (a
    template's `<tool_response>` left in, or one of the `control` tools, a supervisor's, named as code), or
    `request` repeated back."""
    body = strip_thinking(text)
    if not body.strip() or only_markers(body):
        said = f" (only {quote(body.strip(), 60)})" if body.strip() else ""
        return _no("empty_answer", f"the reply was empty{said}")
    if not re.search(r"\w", body):  # punctuation alone, e.g. the `}` left of a call: no word, no number
        return _no("empty_answer", f"the reply holds no word or number (only {quote(body.strip(), 60)})")
    if (only := arguments_only(body, tools)) is not None:
        return _no("tool_json_as_answer", f"the reply is JSON meant for the {only.name} tool: {quote(body)}")
    reading = read_calls(body, tools, any_name=True)
    if reading.calls and not reading.tail and len(reading.prose) < 400:  # it ends in the call: the point of it
        names = ", ".join(reading.names)
        return _no("tool_call_as_answer", f"the reply is a call of {names} written as text: {quote(body)}")
    if len(body) <= ABOUT_THE_RUN_CHARS and (named := _about_the_run(body, control)) is not None:
        return _no("tool_call_as_answer", f"the reply is about the run's own tools ({named}), not an answer: "
                   f"{quote(body)}")  # fmt: skip
    if request and _echoes(body, request):
        return _no("echoed_request", f"the reply repeats the request: {quote(body)}")
    return None


def _no(kind: Any, why: str) -> NoAnswer:
    return NoAnswer(
        kind,
        why,
        f"Your last reply is not an answer: {why}. Reply with the answer itself, written out in full for the user "
        "(and if you need a tool, call it through tool calling, not as text).",
    )


# Longer than this, a reply that names a control tool is taken as an answer that mentions it (a user may ask how
# the team works); the replies seen about the run instead of answering it were 100-900 characters.
ABOUT_THE_RUN_CHARS = 1200
_PLACEHOLDER = re.compile(r"""["'`]<tool_(?:response|call)>["'`]""")  # a value, not a template's wrapping tag


def _about_the_run(body: str, control: Sequence[str]) -> str | None:
    """What in `body` shows it is about the run, not an answer (seen on a 1.5B model: "To finalize the run ...
    use `{"answer": "<tool_response>"}`", "we can use the handoff_to_reviewer tool to ..."): a template marker
    left in as a value (quoted: around text it is a template's wrapping, stripped elsewhere), or a control tool
    named as code (`finalize`, finalize(...), "the finalize tool"; a name with an underscore, such as
    handoff_to_reviewer, anywhere as a word). None when nothing does."""
    if (marker := _PLACEHOLDER.search(body)) is not None:
        return marker.group(0)
    lowered = body.lower()
    for name in control:
        if name.lower() not in lowered:  # every pattern below holds the name: the usual case, without a regex
            continue
        code = rf"`{re.escape(name)}`|\b{re.escape(name)}\s*\(|\b{re.escape(name)}\s+(?:tool|function)\b"
        if re.search(code + (rf"|\b{re.escape(name)}\b" if "_" in name else ""), body, re.IGNORECASE):
            return name
    return None


def _words(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


def _echoes(answer: str, request: str) -> bool:
    """Whether `answer` is `request` said back (whole, or with a label such as `Request:`), not an answer."""
    a, r = _words(answer), _words(request)
    if not a or not r:
        return False
    a = a.removeprefix("request ").removeprefix("task ")
    if a == r or (r.startswith(a) and len(a) >= 0.8 * len(r)):
        return True
    return len(a) <= 1.2 * len(r) and difflib.SequenceMatcher(None, a, r).ratio() >= 0.9
