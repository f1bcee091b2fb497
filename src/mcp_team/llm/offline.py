"""The offline backend: a deterministic stand-in for an LLM that needs no network.

What it does follows from why it is called (`request.phase`) and who asks (`request.member`),
never from matching the system prompt; the content it works on comes from the messages and the
offered tools, as a model would read them:
- `act` (the supervisor's turn): it delegates by simple keyword rules (independent specialists in
  one turn, then the writer, then the reviewer) through the offered `handoff_to_*` tools;
- `synthesize`: it answers from the results in the prompt; `plan` and `refine`: it plans or
  rewrites a failed task;
- otherwise it is the specialist `member` and answers plainly, calling its `calculate` tool when
  the task contains arithmetic.
A request without a phase (one that came over a wire without that field) is read from its
offered tools.

Every answer says it is offline. It has no faults of its own: `llm.faults` wraps it (or any other
backend) to drive every failure path through the real engine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from mcp_team.llm.types import (
    Message,
    ModelRequest,
    ModelResponse,
    Phase,
    StopReason,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    built,
    defaults_of,
)

OFFLINE_NOTICE = "offline backend: deterministic answers, no LLM is called"

_GATHER_RULES: dict[str, re.Pattern[str]] = {
    "researcher": re.compile(r"research|find|investigat|history|compar|look up|sources?|market|who|what", re.I),
    "analyst": re.compile(r"analy|calculat|compute|estimat|number|cost|price|trend|\d\s*[-+*/^]\s*\d", re.I),
    "coder": re.compile(r"\bcode|function|script|implement|program|python|bug|refactor", re.I),
}
_WRITER_RULE = re.compile(r"writ|draft|report|summar|explain|article|email|blog|document", re.I)
_REVIEW_RULE = re.compile(r"review|check|verif|critique|proofread", re.I)
_EXPRESSION = re.compile(r"[\d.(][\d.\s()+\-*/%^]*[+\-*/%^][\d.\s()+\-*/%^]*[\d.)]")
MAX_REVISIONS_OFFLINE = 2


@dataclass
class OfflineModel:
    """Deterministic model. `latency` seconds are slept per call (anyio, so cancellable)."""

    latency: float = 0.0
    name: str = "offline"
    provider: str = "offline"
    calls: int = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        tools = {t.name for t in request.tools}
        phase = _phase_of(request, tools)
        member = request.member or "specialist"
        if self.latency:
            await anyio.sleep(self.latency)
        if phase == "act":
            content = _supervise(request)
        elif phase == "synthesize":
            content = [_call("finalize", {"answer": _synthesis(request)})]
        elif phase == "plan":
            content = [_call("submit_plan", _plan(request))]
        elif phase == "refine":
            content = [_call("refine_task", {"task": _refine(request)})]
        else:
            content = _specialist(request, member, tools)
        return _response(request, content)


def _phase_of(request: ModelRequest, tools: set[str]) -> Phase:
    if request.phase != "specialist" or request.member:
        return request.phase
    # No phase and no member: a request from outside the engine. Read it from the offered tools.
    if "submit_plan" in tools:
        return "plan"
    if "refine_task" in tools:
        return "refine"
    if "finalize" in tools:
        return "act" if len(tools) > 1 else "synthesize"
    return "specialist"


# The answers are built, not validated (`built`): on every call (the offline model is what the CPU benchmark
# calls), from values made here, of the right types already. Each is what the validated constructor gives.
_RESPONSE_DEFAULTS = defaults_of(ModelResponse)
_USAGE_DEFAULTS = defaults_of(Usage)
_TEXT_DEFAULTS = defaults_of(TextBlock)
_TOOL_USE_DEFAULTS = defaults_of(ToolUseBlock)


def _response(request: ModelRequest, content: list[TextBlock | ToolUseBlock]) -> ModelResponse:
    # Token counts are a size estimate (4 characters a token) so budgets behave realistically.
    prompt_chars = len(request.system)
    for message in request.messages:
        prompt_chars += len(_text_of(message))
    out_chars = 0
    stop: StopReason = "end_turn"
    for block in content:
        if isinstance(block, TextBlock):
            out_chars += len(block.text)
        else:
            out_chars += len(block.input_json)
            stop = "tool_use"
    usage = {
        "input_tokens": prompt_chars // 4 + 1,
        "output_tokens": out_chars // 4 + 1,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    return built(
        ModelResponse,
        _RESPONSE_DEFAULTS,
        {
            "content": content,
            "stop_reason": stop,
            "usage": built(Usage, _USAGE_DEFAULTS, usage),
            "model": "offline",
            "id": None,
        },
    )


def _text(text: str) -> TextBlock:
    return built(TextBlock, _TEXT_DEFAULTS, {"text": text})


def _call(name: str, args: dict[str, Any], n: int = 0) -> ToolUseBlock:
    return built(
        ToolUseBlock, _TOOL_USE_DEFAULTS, {"type": "tool_use", "id": f"offline_{name}_{n}", "name": name, "input": args}
    )


def _text_of(message: Message) -> str:
    if isinstance(message.content, str):
        return message.content
    parts = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolResultBlock):
            parts.append(block.content)
        else:
            parts.append(block.input_json)
    return "\n".join(parts)


# --- supervisor --------------------------------------------------------------------------------


@dataclass
class _Done:
    specialist: str
    task: str
    output: str
    ok: bool


def _history(messages: Sequence[Message]) -> list[_Done]:
    """The handoffs made so far and what came back, read from the conversation."""
    asked: dict[str, ToolUseBlock] = {}
    done: list[_Done] = []
    for message in messages:
        for block in message.blocks:
            if isinstance(block, ToolUseBlock):
                asked[block.id] = block
            elif isinstance(block, ToolResultBlock) and block.tool_use_id in asked:
                use = asked[block.tool_use_id]
                name = use.name.removeprefix("handoff_to_")
                done.append(_Done(name, str(use.input.get("task", "")), block.content, not block.is_error))
    return done


def _select(request_text: str, team: Iterable[str]) -> tuple[list[str], bool, bool]:
    """Which specialists a request needs: (independent gatherers, writer?, reviewer?)."""
    team = list(team)
    known = {*_GATHER_RULES, "writer", "reviewer"}
    custom = [s for s in team if s not in known]
    if custom and len(custom) == len(team):
        gatherers = custom  # a team of its own specialists only: every one of them works independently
    else:
        gatherers = [s for s, rule in _GATHER_RULES.items() if s in team and rule.search(request_text)]
        lowered = request_text.lower()
        gatherers += [s for s in custom if s.replace("_", " ") in lowered]
    writer = "writer" in team and (bool(_WRITER_RULE.search(request_text)) or not gatherers)
    reviewer = "reviewer" in team and bool(_REVIEW_RULE.search(request_text))
    if not gatherers and not writer and team:
        gatherers = [team[0]]
    return gatherers, writer, reviewer


def _supervise(request: ModelRequest) -> list[TextBlock | ToolUseBlock]:
    request_text = _text_of(request.messages[0])
    team = [t.name.removeprefix("handoff_to_") for t in request.tools if t.name.startswith("handoff_to_")]
    done = _history(request.messages)
    gatherers, writer, reviewer = _select(request_text, team)

    # Errors about the call itself (bad arguments, unknown names) mean the handoff never ran.
    # So do handoffs a person sent back at the plan checkpoint (handoffs/approval.py).
    done = [d for d in done if not d.output.startswith(("malformed handoff", "there is no specialist", "not run:"))]
    answered = {d.specialist for d in done}
    pending = [g for g in gatherers if g not in answered]
    if pending and not answered & {"writer", "reviewer"}:
        calls = [_call(f"handoff_to_{name}", _gather_task(name, request_text), i) for i, name in enumerate(pending)]
        return [_text(f"Delegating to {len(calls)} specialists in parallel."), *calls]

    drafts = [d for d in done if d.specialist == "writer" and d.ok]
    reviews = [d for d in done if d.specialist == "reviewer"]
    writer_tries = [d for d in done if d.specialist == "writer"]
    gathered = [d for d in done if d.specialist not in ("writer", "reviewer") and d.ok]
    if writer and not writer_tries:
        context = "\n\n".join(f"{d.specialist}: {d.output}" for d in gathered)
        return [
            _call(
                "handoff_to_writer",
                {
                    "task": f"Write the answer to: {request_text}",
                    "context": context,
                    "expected_output": "A clear, well-structured draft.",
                },
            )
        ]
    if reviewer and drafts:
        reviewed_latest = len(reviews) >= len(drafts)
        if not reviewed_latest:
            return [
                _call(
                    "handoff_to_reviewer",
                    {"task": f"Review this draft against the request: {request_text}", "context": drafts[-1].output},
                )
            ]
        last = reviews[-1]
        if last.ok and "VERDICT: REVISE" in last.output and len(drafts) <= MAX_REVISIONS_OFFLINE:
            return [
                _call(
                    "handoff_to_writer",
                    {
                        "task": f"Revise the draft for: {request_text}",
                        "context": f"Draft:\n{drafts[-1].output}\n\nReview:\n{last.output}",
                    },
                )
            ]
    return [_call("finalize", {"answer": _final_answer(request_text, done)})]


def _gather_task(name: str, request_text: str) -> dict[str, Any]:
    verbs = {
        "researcher": "Research the facts needed for",
        "analyst": "Analyse the quantitative parts of",
        "coder": "Write the code needed for",
    }
    return {
        "task": f"{verbs.get(name, 'Handle your part of')}: {request_text}",
        "expected_output": "Findings the writer can use.",
    }


def _final_answer(request_text: str, done: list[_Done]) -> str:
    latest: dict[str, _Done] = {}
    for d in done:
        if d.ok:
            latest[d.specialist] = d
    if "writer" in latest:
        body = latest["writer"].output
    else:
        body = "\n\n".join(f"## {d.specialist}\n{d.output}" for d in latest.values()) or "No specialist succeeded."
    return f"[{OFFLINE_NOTICE}]\nAnswer to: {request_text}\n\n{body}"


def _synthesis(request: ModelRequest) -> str:
    return f"[{OFFLINE_NOTICE}]\nSynthesis of the team's results.\n\n{_text_of(request.messages[-1])}"


def _plan(request: ModelRequest) -> dict[str, Any]:
    request_text = _text_of(request.messages[0])
    # A person's changes to an earlier plan (handoffs/planner.py) count like the request's own words.
    request_text += "".join(f" {m}" for m in re.findall(r"asked for changes: (.*)", _text_of(request.messages[-1])))
    team = re.findall(r"^- ([A-Za-z0-9_.-]+):", request.system, re.M)
    gatherers, writer, reviewer = _select(request_text, team)
    tasks: list[dict[str, Any]] = [
        {
            "id": f"t{i + 1}",
            "specialist": name,
            "description": _gather_task(name, request_text)["task"],
            "depends_on": [],
        }
        for i, name in enumerate(gatherers)
    ]
    if writer:
        tasks.append(
            {
                "id": f"t{len(tasks) + 1}",
                "specialist": "writer",
                "description": f"Write the answer to: {request_text}",
                "depends_on": [t["id"] for t in tasks],
            }
        )
    if reviewer and writer:
        tasks.append(
            {
                "id": f"t{len(tasks) + 1}",
                "specialist": "reviewer",
                "description": f"Review the draft against the request: {request_text}",
                "depends_on": [tasks[-1]["id"]],
            }
        )
    return {"tasks": tasks, "combine": "Lead with the writer's draft if there is one; otherwise merge the findings."}


def _refine(request: ModelRequest) -> str:
    text = _text_of(request.messages[-1])
    task = re.search(r"Failed task:\s*(.*?)\n\s*\nError:", text, re.S)
    original = task.group(1).strip() if task else text.strip()
    # A rewritten task, as a model writes one: no notes about the engine, which would reach the answer.
    return f"{original}\nKeep the answer short and focused."


# --- specialists -------------------------------------------------------------------------------


def _specialist(request: ModelRequest, name: str, tools: set[str]) -> list[TextBlock | ToolUseBlock]:
    last = request.messages[-1]
    task = _text_of(request.messages[0])
    # A plain-text message has no tool results (and `blocks` would build a TextBlock to say so).
    has_blocks = last.role == "user" and not isinstance(last.content, str)
    results = [b for b in last.content if isinstance(b, ToolResultBlock)] if has_blocks else []
    if "calculate" in tools and not results:
        expression = _EXPRESSION.search(task)
        if expression:
            return [_call("calculate", {"expression": expression.group(0).strip()})]
    if "DECISION: <specialist name or neither>" in task:  # a judge (handoffs/judge.py): the first position holds
        first = re.search(r"^- ([A-Za-z0-9_-]+): ", task, re.M)
        side = first.group(1) if first else "neither"
        return [_text(f"DECISION: {side}\n- Its result is the better supported. [{OFFLINE_NOTICE}]")]
    if name == "reviewer":
        if "TODO" in task:
            return [
                _text(
                    f"VERDICT: REVISE\n- Tighten the structure and state the key figures up front.\n[{OFFLINE_NOTICE}]"
                )
            ]
        return [
            _text(f"VERDICT: PASS\n- The draft addresses the request and uses the findings given.\n[{OFFLINE_NOTICE}]")
        ]
    body = _section(task, "Task:")
    context = _section(task, "Context from the supervisor:")
    if name == "writer":
        lines = [f"[offline writer] Draft: {body[:300]}"]
        if context:  # the findings' own notices left out: the draft ends with one of its own
            lines += ["", "Drawing on the team's findings:", context.replace(f"\n({OFFLINE_NOTICE}.)", "")]
    else:
        lines = [f"[offline {name}] Notes on: {body[:300]}"]
        if context:
            lines.append(f"(Used {context.count(chr(10)) + 1} lines of context.)")
    lines += [f"Tool result: {r.content}" for r in results]
    lines.append(f"({OFFLINE_NOTICE}.)")
    return [_text("\n".join(lines))]


def _section(text: str, heading: str) -> str:
    """The body under `heading` in a handoff message (see specialists.loop.handoff_message)."""
    start = text.find(heading + "\n")
    if start < 0:
        return "" if heading != "Task:" else text.strip()
    body = text[start + len(heading) + 1 :]
    for other in ("\n\nContext from the supervisor:\n", "\n\nExpected output:\n"):
        body = body.split(other, 1)[0]
    return body.strip()
