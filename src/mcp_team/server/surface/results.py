"""What a tool result says to whoever reads only its text: the answer first.

A host's model and a text-only client (the Inspector's CLI) read a tool result's `content`, not its
`structuredContent`. So the first text block is the answer itself, under a line with the run's status, size and
cost (a partial answer ends with what is missing, as the engine writes it; a run still going says how to follow
it), with the run's notes after it. The structured result stays in `structuredContent`, and as JSON in the second
text block, for clients that parse the text. One function, `tool_result`, for every tool that returns a run or a
specialist's result: `run_team`, `start_run`, `get_run`, `cancel_run`, the specialist tools and tasks' results.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel

from mcp_team.specialists import SpecialistResult

_STATUS = {
    "complete": "Complete",
    "partial": "Partial: some work failed, and the answer ends with what is missing",
    "failed": "Failed",
    "cancelled": "Cancelled",
    "interrupted": "Interrupted: the run could not go on",
    "running": "Running",
}


def tool_result(value: BaseModel | Mapping[str, Any]) -> CallToolResult:
    """`value` (a `RunResult`, a run record's view as `get_run` gives it, or a `SpecialistResult`) as a tool
    result: its answer as the first text block, the structured result in `structuredContent` and as JSON."""
    structured = value.model_dump(mode="json", by_alias=True) if isinstance(value, BaseModel) else dict(value)
    text = specialist_text(structured) if isinstance(value, SpecialistResult) else run_text(structured)
    data = json.dumps(structured, indent=2, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text), TextContent(type="text", text=data)],
        structured_content=structured,
    )


def run_text(run: Mapping[str, Any]) -> str:
    """A run for people: its status line, then its answer (or, while it goes, how to follow it), then its notes."""
    status = str(run.get("status") or "running")
    handoffs = run.get("handoffs") or []
    total = (run.get("usage") or {}).get("total") or {}
    tokens = int(total.get("input_tokens") or 0) + int(total.get("output_tokens") or 0)
    facts = [f"run {run.get('run_id')}", _count(len(handoffs), "handoff"), *_spent(tokens, total)]
    head = f"{_STATUS.get(status, status.capitalize())} ({', '.join(facts)})"
    if reason := run.get("reason"):
        head += f": {reason}"
    body = _following(run, handoffs) if status == "running" else str(run.get("answer") or "(no answer)")
    notes = [str(n) for n in run.get("notes") or []]
    tail = "\n\nNotes:\n" + "\n".join(f"- {n}" for n in notes) if notes else ""
    return f"{head}\n\n{body}{tail}"


def specialist_text(result: Mapping[str, Any]) -> str:
    """A specialist's result for people: who, how it went, then its answer."""
    usage = result.get("usage") or {}
    tokens = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
    facts = [_count(int(result.get("turns") or 0), "turn"), *_spent(tokens, usage)]
    head = f"{result.get('specialist')}: {result.get('status')} ({', '.join(facts)})"
    body = str(result.get("output") or result.get("error") or "(no answer)")
    return f"{head}\n\n{body}"


def _following(run: Mapping[str, Any], handoffs: list[Mapping[str, Any]]) -> str:
    run_id = run.get("run_id")
    if waiting := run.get("waiting"):
        return (
            f"Waiting at checkpoint {waiting.get('name')} for a person's answer: answer it with answer_checkpoint "
            f'(run_id "{run_id}").\n\n{waiting.get("summary") or ""}'
        ).rstrip()
    going = sum(1 for h in handoffs if h.get("status") == "running")
    return (
        f"{_count(len(handoffs) - going, 'handoff')} finished, {going} in progress. Its answer comes with "
        f'get_run (run_id "{run_id}"; wait_seconds waits for it), or at team://runs/{run_id}.'
    )


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'' if n == 1 else 's'}"


def _spent(tokens: int, usage: Mapping[str, Any]) -> list[str]:
    """Tokens and cost for people: no calls yet, nothing to say; an unknown cost (a local or offline model) is not
    $0."""
    if not tokens:
        return []
    usd = usage.get("cost_usd")
    return [f"{tokens:,} tokens", "cost unknown" if usd is None else f"${usd:.4f}"]
