"""A terminal waterfall of one run, drawn from its Jaeger JSON (plain text, no ANSI).

span                               timeline                        time  status      tokens
supervisor                         ██████████████████████████████  4.2s  ok       2.1k/640
  chat claude-sonnet-5-5 (plan)    ███                            410ms  ok        900/120
  → researcher: find papers on…       █████████████               1.9s  ok        1.2k/300
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from mcp_team.telemetry import attributes as A

__all__ = ["render_waterfall", "span_label"]

TASK_TAG: Final = A.HANDOFF_TASK
_TRANSFER_PREFIX: Final = "transfer_to_"
_BAR: Final = "█"
_TICK: Final = "▏"


def _tags(span: Mapping[str, Any]) -> dict[str, Any]:
    return {str(t.get("key")): t.get("value") for t in span.get("tags") or () if isinstance(t, Mapping)}


def span_label(operation: str, tags: Mapping[str, Any]) -> str:
    """Short label: `→ X` for a handoff, `X` for an agent, `chat M (phase)`, `tool T`, `plan X`."""
    op, _, rest = operation.partition(" ")
    target = rest.split(" ")[0] if rest else ""
    if op == A.OP_EXECUTE_TOOL:
        transfer_to = tags.get(A.TRANSFER_TARGET_NAME)
        if transfer_to or target.startswith(_TRANSFER_PREFIX):
            return f"→ {transfer_to or target[len(_TRANSFER_PREFIX) :]}"
        return f"tool {tags.get(A.TOOL_NAME) or target}"
    if op == A.OP_INVOKE_AGENT:
        return str(tags.get(A.AGENT_NAME) or rest or operation)
    if op == A.OP_CHAT:
        phase = tags.get(A.PHASE)
        return f"chat {rest}" + (f" ({phase})" if phase else "")
    if op == A.OP_PLAN:
        return f"plan {rest}"
    return operation


def _oneline(text: str) -> str:
    return " ".join(text.split())


def _fit(text: str, width: int) -> str:
    if width <= 0:
        return ""
    if len(text) <= width:
        return text.ljust(width)
    return text[: width - 1] + "…"


def _fmt_duration(us: int) -> str:
    ms = us / 1000
    if ms < 1:
        return f"{us}µs"
    if ms < 1000:
        return f"{ms:.0f}ms"
    s = ms / 1000
    if s < 100:
        return f"{s:.1f}s"
    return f"{s:.0f}s"


def _fmt_count(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(n)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _tokens(tags: Mapping[str, Any]) -> str:
    tin, tout = _int(tags.get(A.USAGE_INPUT_TOKENS)), _int(tags.get(A.USAGE_OUTPUT_TOKENS))
    if tin is None and tout is None:
        return ""
    return f"{_fmt_count(tin or 0)}/{_fmt_count(tout or 0)}"


def _status(tags: Mapping[str, Any]) -> str:
    if tags.get("error") is True or tags.get("otel.status_code") == "ERROR":
        return str(tags.get(A.ERROR_TYPE) or "error")
    return "ok"


def _bar(start: int, duration: int, t0: int, total: int, width: int) -> str:
    if width <= 0:
        return ""
    if total <= 0:
        return _BAR * width
    left = int((start - t0) / total * width)
    left = min(max(left, 0), width - 1)
    right = round((start - t0 + duration) / total * width)
    right = min(max(right, left + 1), width)
    cells = [" "] * width
    for i in range(left, right):
        cells[i] = _BAR
    if duration * width < total and right - left == 1:
        cells[left] = _TICK if duration * width * 4 < total else _BAR
    return "".join(cells)


def _tree(spans: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """Spans in depth-first order (children by start time) with their depth; orphans become roots."""
    by_id = {s.get("spanID"): s for s in spans}
    children: dict[Any, list[dict[str, Any]]] = {}
    roots: list[dict[str, Any]] = []
    for span in spans:
        parent = next((r.get("spanID") for r in span.get("references") or () if r.get("refType") == "CHILD_OF"), None)
        if parent is not None and parent in by_id and parent != span.get("spanID"):
            children.setdefault(parent, []).append(span)
        else:
            roots.append(span)

    def start(s: dict[str, Any]) -> int:
        return _int(s.get("startTime")) or 0

    out: list[tuple[int, dict[str, Any]]] = []
    seen: set[Any] = set()
    stack = [(0, s) for s in sorted(roots, key=start, reverse=True)]
    while stack:
        depth, span = stack.pop()
        if span.get("spanID") in seen:
            continue
        seen.add(span.get("spanID"))
        out.append((depth, span))
        kids = sorted(children.get(span.get("spanID"), ()), key=start, reverse=True)
        stack.extend((depth + 1, k) for k in kids)
    return out


def _render_trace(trace: Mapping[str, Any], width: int) -> list[str]:
    spans = [s for s in trace.get("spans") or () if isinstance(s, dict)]
    if not spans:
        return [f"trace {trace.get('traceID', '?')}: no spans"]
    rows = _tree(spans)
    t0 = min(_int(s.get("startTime")) or 0 for s in spans)
    t1 = max((_int(s.get("startTime")) or 0) + (_int(s.get("duration")) or 0) for s in spans)
    total = t1 - t0

    # The status column fits the longest error.type (within reason); the label gets ~58% of the rest.
    status_w = min(18, max(6, *(len(_status(_tags(s))) for s in spans)))
    dur_w, tok_w = 6, 9
    fixed = dur_w + status_w + tok_w + 4  # 4 separating spaces
    label_w = max(16, min(48, int((width - fixed) * 0.58)))
    bar_w = max(8, width - fixed - label_w)

    root_tags = _tags(rows[0][1])
    run_id = next((v for _, s in rows if (v := _tags(s).get(A.CONVERSATION_ID))), None)
    errors = sum(1 for _, s in rows if _status(_tags(s)) != "ok")
    ids = ([f"run {run_id}"] if run_id else []) + [f"trace {trace.get('traceID', '?')}"]
    head = [_fmt_duration(total)]
    head.append(f"{len(spans)} spans")
    if errors:
        head.append(f"{errors} failed")
    if root_tokens := _tokens(root_tags):
        head.append(f"tokens {root_tokens}")
    header = " · ".join(ids + head)
    # Long run ids: the ids on one line, the numbers on the next.
    lines = [header] if len(header) <= width else [" · ".join(ids), " · ".join(head)]
    lines.append(
        f"{_fit('span', label_w)} {_fit('timeline', bar_w)} {'time':>{dur_w}} {_fit('status', status_w)} "
        f"{'tokens':>{tok_w}}"
    )
    for depth, span in rows:
        tags = _tags(span)
        label = span_label(str(span.get("operationName", "")), tags)
        task = tags.get(TASK_TAG)
        if isinstance(task, str) and task.strip():
            label = f"{label}: {_oneline(task)}"
        indent = "  " * min(depth, 12)
        start = _int(span.get("startTime")) or 0
        duration = _int(span.get("duration")) or 0
        lines.append(
            f"{_fit(indent + label, label_w)} {_bar(start, duration, t0, total, bar_w)} "
            f"{_fmt_duration(duration):>{dur_w}} {_fit(_status(tags), status_w)} {_tokens(tags):>{tok_w}}"
        )
    return [line.rstrip() for line in lines]


def render_waterfall(doc: Mapping[str, Any], *, width: int = 100) -> list[str]:
    """Plain-text rows of a waterfall for each trace in a Jaeger JSON document (normally one run).

    One row per span in tree order: label (indented by depth, with the handoff task when content
    capture recorded it), a bar placed by start/duration relative to the run, duration, status
    (`ok` or the `error.type`) and tokens (input/output). Lines are at most `width` characters.
    """
    width = max(width, 60)
    lines: list[str] = []
    for trace in doc.get("data") or ():
        if not isinstance(trace, Mapping):
            continue
        if lines:
            lines.append("")
        lines.extend(_render_trace(trace, width))
    return lines or ["(no trace)"]
