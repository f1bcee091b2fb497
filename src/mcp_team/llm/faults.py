"""Fault injection around any model (`--fault KIND[:AGENT[:TIMES]]`, `MCP_TEAM_FAULTS`), so tests and
users drive every failure path of the real engine on any backend: offline, anthropic, openai, replay.

A fault is aimed at a member (`researcher`, `supervisor`, `planner`, `*` for any); the planner's
requests are also the supervisor's. Kinds:
- errors (`rate_limit`, `server_error`, `overloaded`): the call fails as the API would, never reaching
  the model; `timeout`: the call never answers (the engine's call timeout cuts it);
- the supervisor's (`unknown_specialist`, `malformed_tool_call`, `repeat_handoff`) change what it asks
  for, in both modes: in its turns (adaptive) a handoff to a specialist that does not exist, a handoff
  whose arguments break the schema, the same handoff over and over; in the planner's plan (planned) a
  task for a specialist that does not exist, a plan that breaks the schema, a task repeated with its id;
- a specialist's: `endless_tools` (keeps calling a tool, never answers), `revise` (a reviewer's PASS
  verdict becomes REVISE);
- `conflict`: the closing `finalize` (synthesis or adaptive supervisor) of a team with a judge reports
  that the first two specialists' results disagree, so the judge has a conflict to rule on.
A fault counts a use (`TIMES`) only when it changed something.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import anyio

from mcp_team.llm.call import ModelSet
from mcp_team.llm.types import (
    Model,
    ModelError,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from mcp_team.llm.wrappers import WrapperModel, map_models

FaultKind = Literal[
    "rate_limit",  # raise a 429
    "server_error",  # raise a 500
    "overloaded",  # raise a 529
    "timeout",  # never answer (the engine's call timeout cuts it)
    "unknown_specialist",  # supervisor: also hand off to (plan a task for) a specialist that does not exist
    "malformed_tool_call",  # supervisor: a handoff (a plan) whose arguments do not match the schema
    "repeat_handoff",  # supervisor: the same handoff forever; planner: a task repeated with its id
    "endless_tools",  # specialist: keep calling tools, never answer
    "revise",  # reviewer: a PASS verdict becomes REVISE
    "conflict",  # supervisor: its finalize reports that two specialists' results conflict (a team with a judge)
]
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)

_ERRORS: dict[str, tuple[int, str]] = {
    "rate_limit": (429, "rate_limited"),
    "server_error": (500, "server_error"),
    "overloaded": (529, "overloaded"),
}
_SUPERVISOR_KINDS = ("unknown_specialist", "malformed_tool_call", "repeat_handoff")
_VERDICT = re.compile(r"VERDICT:\s*PASS", re.I)
GHOST = "ghost"  # the specialist no team has


@dataclass
class Fault:
    """Inject `kind` into calls made as `agent` ("*" for any), `times` times (None: always)."""

    kind: FaultKind
    agent: str = "*"
    times: int | None = None

    def take(self, agent: str) -> bool:
        if self.agent not in ("*", agent) or self.times == 0:
            return False
        if self.times is not None:
            self.times -= 1
        return True


def parse_faults(spec: str) -> list[Fault]:
    """Parse `kind[:agent[:times]]`, comma-separated, e.g. `rate_limit:researcher:1,repeat_handoff`."""
    faults = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        parts = item.split(":")
        if len(parts) > 3 or parts[0] not in FAULT_KINDS:
            raise ValueError(
                f"bad fault {item!r}: expected KIND[:AGENT[:TIMES]] with KIND one of {', '.join(FAULT_KINDS)}"
            )
        agent = parts[1] if len(parts) > 1 and parts[1] else "*"
        times = parts[2] if len(parts) > 2 else ""
        if times and not times.isdigit():
            raise ValueError(f"bad fault {item!r}: TIMES must be a whole number, got {times!r}")
        faults.append(Fault(parts[0], agent, int(times) if times else None))  # type: ignore[arg-type]
    return faults


class FaultyModel(WrapperModel):
    """`wrapped` with `faults` injected. Models of one run share one list, so `TIMES` counts across them."""

    def __init__(self, wrapped: Model, faults: Sequence[Fault]) -> None:
        super().__init__(wrapped)
        self.faults = faults

    def _take(self, request: ModelRequest, kinds: Sequence[str]) -> str | None:
        member = request.member or ("specialist" if request.phase == "specialist" else "supervisor")
        agent = "supervisor" if request.phase == "plan" else member  # planning is the supervisor's work
        for fault in self.faults:
            if fault.kind in kinds and (fault.take(agent) or (member != agent and fault.take(member))):
                return fault.kind
        return None

    async def complete(self, request: ModelRequest) -> ModelResponse:
        supervising = request.phase in ("act", "plan")
        before = [*_ERRORS, "timeout"]
        if supervising:
            before += ["malformed_tool_call"] + (["repeat_handoff"] if request.phase == "act" else [])
        elif request.phase == "specialist":
            before.append("endless_tools")
        fault = self._take(request, before)
        if fault in _ERRORS:
            status, kind = _ERRORS[fault]
            agent = "supervisor" if request.phase == "plan" else request.member or "supervisor"
            raise ModelError(kind, f"fault injected: HTTP {status} for {agent}", status=status)  # type: ignore[arg-type]
        if fault == "timeout":
            await anyio.sleep_forever()
        if fault is not None:
            return self._respond(request, _replacement(fault, request))

        response = await self.wrapped.complete(request)
        if (changed := _conflicting(request, response)) is not None and self._take(request, ["conflict"]):
            return response.model_copy(update={"content": changed})
        if supervising:
            for kind in ("unknown_specialist", "repeat_handoff"):
                changed = _changed(kind, request, response)
                if changed is not None and self._take(request, [kind]):
                    return response.model_copy(update={"content": changed})
        elif _passes(request, response) and self._take(request, ["revise"]):
            text = _VERDICT.sub("VERDICT: REVISE", response.text, count=1)
            text += "\n- (fault injected) Tighten the structure and state the key figures up front."
            return response.model_copy(update={"content": [TextBlock(text=text)]})
        return response

    def _respond(self, request: ModelRequest, content: list[TextBlock | ToolUseBlock]) -> ModelResponse:
        # Token counts are a size estimate (4 characters a token), so budgets behave as on a model.
        prompt = len(request.system) + sum(len(m.model_dump_json()) for m in request.messages)
        output = sum(len(b.model_dump_json()) for b in content)
        return ModelResponse(
            content=content,
            stop_reason="tool_use",
            usage=Usage(input_tokens=prompt // 4 + 1, output_tokens=output // 4 + 1),
            model=self.wrapped.name,
        )


def _replacement(kind: str, request: ModelRequest) -> list[TextBlock | ToolUseBlock]:
    """What a fault answers instead of the model."""
    if kind == "endless_tools":
        tool = sorted(t.name for t in request.tools)[0] if request.tools else "nonexistent_tool"
        return [ToolUseBlock(id=f"fault_{tool}_{len(request.messages)}", name=tool, input={"expression": "1+1"})]
    if request.phase == "plan":  # malformed_tool_call
        plan = {"tasks": "not a list of tasks", "priority": "high"}
        return [ToolUseBlock(id="fault_submit_plan", name=_plan_tool(request), input=plan)]
    first = next((t.name for t in request.tools if t.name.startswith("handoff_to_")), "handoff_to_" + GHOST)
    if kind == "repeat_handoff":
        return [ToolUseBlock(id="fault_repeat", name=first, input={"task": f"Work on: {_first_text(request)}"})]
    malformed = {"task": ["not", "a", "string"], "priority": "high"}
    return [ToolUseBlock(id="fault_malformed", name=first, input=malformed)]


def _changed(kind: str, request: ModelRequest, response: ModelResponse) -> list[TextBlock | ToolUseBlock] | None:
    """The response's content with `kind` applied to what the model asked for, or None when it does not apply."""
    content = list(response.content)
    if request.phase == "act":
        if kind != "unknown_specialist" or not any(u.name.startswith("handoff_to_") for u in response.tool_uses):
            return None
        haunt = ToolUseBlock(id="fault_ghost", name=f"handoff_to_{GHOST}", input={"task": "Haunt the request"})
        return [*content, haunt]
    at = next((i for i, b in enumerate(content) if isinstance(b, ToolUseBlock) and b.name == _plan_tool(request)), None)
    if at is None:
        return None
    use = content[at]
    assert isinstance(use, ToolUseBlock)
    tasks = use.input.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        return None
    if kind == "unknown_specialist":
        ghost: dict[str, Any] = {"id": "t_ghost", "specialist": GHOST, "description": "Haunt the request"}
        tasks = [*tasks, {**ghost, "depends_on": []}]
    else:  # repeat_handoff: the first task again, with its id
        tasks = [*tasks, json.loads(json.dumps(tasks[0]))]
    content[at] = use.model_copy(update={"input": {**use.input, "tasks": tasks}})
    return content


def _conflicting(request: ModelRequest, response: ModelResponse) -> list[TextBlock | ToolUseBlock] | None:
    """The response with its finalize reporting a conflict between the first two specialists, or None."""
    finalize = next((t for t in request.tools if t.name == "finalize"), None)
    if finalize is None or "conflicts" not in finalize.input_schema.get("properties", {}):
        return None
    # Who worked: the synthesis reads "### name (completed)" headings; the adaptive supervisor its own handoffs.
    text = "\n".join(b.text for m in request.messages for b in m.blocks if isinstance(b, TextBlock))
    text += "".join(b.content for m in request.messages for b in m.blocks if isinstance(b, ToolResultBlock))
    found = re.findall(r"^### ([A-Za-z0-9_-]+) \(completed\)", text, re.M)
    uses = [b.name for m in request.messages for b in m.blocks if isinstance(b, ToolUseBlock)]
    found += [name.removeprefix("handoff_to_") for name in uses if name.startswith("handoff_to_")]
    found = list(dict.fromkeys(found))
    content = list(response.content)
    at = next((i for i, b in enumerate(content) if isinstance(b, ToolUseBlock) and b.name == "finalize"), None)
    if len(found) < 2 or at is None:
        return None
    use = content[at]
    assert isinstance(use, ToolUseBlock)
    first, second = found[:2]
    conflict = {
        "about": "(fault injected) the key figure",
        "positions": [
            {"specialist": first, "claim": f"{first} says the figure is 42"},
            {"specialist": second, "claim": f"{second} says the figure is 24"},
        ],
    }
    content[at] = use.model_copy(update={"input": {**use.input, "conflicts": [conflict]}})
    return content


def _passes(request: ModelRequest, response: ModelResponse) -> bool:
    """Whether a specialist's response is a final answer with a PASS verdict."""
    return request.phase == "specialist" and not response.tool_uses and bool(_VERDICT.search(response.text))


def _plan_tool(request: ModelRequest) -> str:
    return request.tools[0].name if len(request.tools) == 1 else "submit_plan"


def _first_text(request: ModelRequest) -> str:
    first = request.messages[0] if request.messages else None
    return "".join(b.text for b in first.blocks if isinstance(b, TextBlock)) if first else ""


def with_faults(models: ModelSet, faults: Sequence[Fault]) -> ModelSet:
    """`models` with `faults` injected into every model (no faults: `models` itself)."""
    if not faults:
        return models
    shared = list(faults)
    return map_models(models, lambda model: FaultyModel(model, shared))
