"""Follow-ups: a run in a thread sees the earlier requests and answers of that thread, within a budget.

The budget is in characters (about 4 per token): the newest turns first, each answer clipped to
`TURN_CHARS` (its start and its end kept), until `HISTORY_CHARS` are used; older turns are dropped
and the history says how many. Only finished runs with an answer (complete or partial) count. The
history is computed once, when the run starts, and stored in the run workflow's input, so a replay
sees exactly the same text.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

HISTORY_CHARS = 24_000  # ~6k tokens: room for the last few turns without crowding the supervisor's prompt
TURN_CHARS = 6_000
MAX_TURNS = 20


class ThreadTurn(BaseModel, defer_build=True):
    run_id: str
    request: str
    answer: str


class ThreadHistory(BaseModel, defer_build=True):
    turns: list[ThreadTurn] = []
    omitted: int = 0  # older turns left out for the budget


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[… {len(text) - limit} characters left out …]\n{text[-tail:]}"


def build_history(
    finished: Sequence[tuple[str, str, str]], *, budget: int = HISTORY_CHARS, turn_chars: int = TURN_CHARS
) -> ThreadHistory:
    """`finished`: (run id, request, answer) of the thread's earlier runs, oldest first."""
    kept: list[ThreadTurn] = []
    used = 0
    for run_id, request, answer in reversed(finished[-MAX_TURNS:]):
        turn = ThreadTurn(run_id=run_id, request=clip(request, turn_chars // 3), answer=clip(answer, turn_chars))
        size = len(turn.request) + len(turn.answer)
        if kept and used + size > budget:
            break
        kept.append(turn)
        used += size
    return ThreadHistory(turns=list(reversed(kept)), omitted=len(finished) - len(kept))


def compose_request(request: str, history: ThreadHistory) -> str:
    """The request as the engine sees it: the thread so far, then the new request."""
    if not history.turns:
        return request
    parts = ["This request continues a conversation. Earlier in this thread:"]
    if history.omitted:
        parts.append(f"({history.omitted} earlier turns left out)")
    for i, turn in enumerate(history.turns, 1):
        parts.append(f"[{i}] Request:\n{turn.request}\n\n[{i}] Answer:\n{turn.answer}")
    parts.append(f"Now:\n{request}")
    return "\n\n".join(parts)
