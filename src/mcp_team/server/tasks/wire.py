"""A run as an MCP task on the wire, on each protocol revision: its status, its fields, the tool result it
ended with (what a plain `run_team` call would have returned), `run_team`'s arguments checked as a plain
call checks them, and the errors the spec names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata
from pydantic import ValidationError

from mcp_team.handoffs import RunResult
from mcp_team.server.surface import results
from mcp_team.server.surface.strict import invalid_arguments, tool_error, tool_error_text, unknown_arguments
from mcp_team.telemetry.content import redact_value

TASK_TOOL = "run_team"
POLL_MS = 1000  # a run takes seconds to minutes
KEEP = frozenset({"content", "structuredContent", "isError"})  # a result's data, not its response envelope


@dataclass(frozen=True)
class TaskRun:
    """A run as the task layer sees it. `status` is the run's: running, complete, partial, failed,
    cancelled or interrupted (it could not go on, e.g. its process stopped)."""

    run_id: str
    status: str
    created_at: datetime
    updated_at: datetime
    owner: str | None = None
    reason: str | None = None
    result: RunResult | None = None
    waiting: str | None = None  # the human checkpoint a durable run waits at, by name

    @property
    def finished(self) -> bool:
        return self.status != "running"


def task_status(run: TaskRun, modern: bool) -> str:
    if run.status == "running":
        return "working"
    if run.status in ("complete", "partial"):
        return "completed"
    if run.status == "cancelled":
        return "cancelled"
    if run.status == "failed":  # the tool's error: 2026 reports it as a completed task with an isError result
        return "completed" if modern else "failed"
    return "failed"  # interrupted: the run could not go on, a protocol-level failure


def status_message(run: TaskRun) -> str:
    handoffs = run.result.handoffs if run.result else []
    done = sum(1 for h in handoffs if h.status != "running")
    if run.status == "running" and run.waiting is not None:  # nothing happens until someone answers: say who, how
        return (f"waiting at checkpoint '{run.waiting}' for a person's answer: see it with get_run and answer it "
                f"with answer_checkpoint (run_id: this task's id); {done} handoff(s) finished")  # fmt: skip
    if run.status == "running":
        return f"running: {done} handoff(s) finished, {len(handoffs) - done} in progress"
    if run.reason:
        return f"{run.status}: {run.reason}"
    return f"{run.status} after {len(handoffs)} handoff(s)"


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def task_wire(run: TaskRun, *, modern: bool, detailed: bool = False) -> dict[str, Any]:
    """The task as each revision spells it; `detailed` (2026 tasks/get) inlines the result or error."""
    wire: dict[str, Any] = {
        "taskId": run.run_id,
        "status": task_status(run, modern),
        "statusMessage": status_message(run),
        "createdAt": _iso(run.created_at),
        "lastUpdatedAt": _iso(run.updated_at),
        ("ttlMs" if modern else "ttl"): None,  # runs are kept: no expiry
        ("pollIntervalMs" if modern else "pollInterval"): POLL_MS,
    }
    if modern and detailed:
        if wire["status"] == "completed":
            wire["result"] = tool_result(run)
        elif wire["status"] == "failed":
            wire["error"] = interrupted_error(run).error.model_dump(mode="json", exclude_none=True)
    return wire


_RUN_TEAM: FuncMetadata | None = None


def _run_team_metadata() -> FuncMetadata:
    """`run_team`'s argument validation and result conversion, as the SDK does them for a plain call."""
    global _RUN_TEAM
    if _RUN_TEAM is None:
        from mcp_team.server.surface.tools import run_team

        _RUN_TEAM = func_metadata(run_team, skip_names=["ctx"])
    return _RUN_TEAM


def validate_arguments(arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """`run_team`'s arguments validated as a plain call validates them; -32602 naming what is wrong."""
    metadata = _run_team_metadata()
    given = dict(arguments or {})
    accepted = metadata.arg_model.model_json_schema(by_alias=True).get("properties", {})
    if problem := unknown_arguments(given, accepted):
        raise MCPError(types.INVALID_PARAMS, tool_error_text(TASK_TOOL, problem))  # the plain call's words
    try:
        return metadata.validate_arguments(given)
    except ValidationError as exc:
        raise MCPError(types.INVALID_PARAMS, tool_error_text(TASK_TOOL, invalid_arguments(exc))) from None


def tool_result(run: TaskRun) -> dict[str, Any]:
    """What a plain `run_team` call would have returned for this finished run (redacted like it)."""
    result = run.result
    if run.status in ("complete", "partial") and result is not None:
        wire = results.tool_result(result).model_dump(by_alias=True, mode="json", exclude_none=True)
    else:
        wire = tool_error(TASK_TOOL, _failure(run)).model_dump(by_alias=True, mode="json", exclude_none=True)
    # The result as data, without the envelope of the response it came in (resultType, _meta).
    return {k: redact_value(v) if k in ("content", "structuredContent") else v for k, v in wire.items() if k in KEEP}


def _failure(run: TaskRun) -> str:
    where = f"run {run.run_id}, see team://runs/{run.run_id}"
    if run.status == "cancelled":
        return f"the run was cancelled ({where}): {run.reason or 'cancelled by request'}"
    result = run.result
    failures = [f for f in (result.failures if result else []) if not f.recovered]
    reasons = "; ".join(f"{f.specialist}: {f.kind}: {f.reason}" for f in failures)
    return f"the team could not answer ({where}). {reasons or run.reason or (result.answer if result else '')}"


def interrupted_error(run: TaskRun) -> MCPError:
    return MCPError(
        types.INTERNAL_ERROR,
        f"the run could not go on: {run.reason or 'it stopped'}. Its finished handoffs are at "
        f"team://runs/{run.run_id}; start it again",
    )


def not_found(task_id: str) -> MCPError:
    return MCPError(
        types.INVALID_PARAMS,
        f"Failed to retrieve task: Task not found: no task {task_id[:200]!r} for this client (a task id is the "
        f"run id that tools/call answered with)",
    )
