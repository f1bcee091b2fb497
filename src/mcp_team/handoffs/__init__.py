"""Handoffs: the supervisor (adaptive and planned), running handoffs, budgets, retries, run records, and the
runtime seam a durable executor fills."""

from mcp_team.handoffs.context import RunEvent
from mcp_team.handoffs.planner import PlanError, validate_plan
from mcp_team.handoffs.runtime import Ephemeral, Runtime
from mcp_team.handoffs.schema import (
    Budgets,
    Failure,
    Handoff,
    HandoffRecord,
    Plan,
    PlanTask,
    RunResult,
    RunSettings,
    UsageReport,
    validation_problems,
)
from mcp_team.handoffs.team import Team, UnknownSpecialist

__all__ = [
    "Budgets",
    "Ephemeral",
    "Failure",
    "Handoff",
    "HandoffRecord",
    "Plan",
    "PlanError",
    "PlanTask",
    "RunEvent",
    "RunResult",
    "RunSettings",
    "Runtime",
    "Team",
    "UnknownSpecialist",
    "UsageReport",
    "validate_plan",
    "validation_problems",
]
