"""Handoffs: the supervisor (adaptive and planned), the executor, budgets, retries and run records."""

from mcp_team.handoffs.executor import RunEvent
from mcp_team.handoffs.planner import PlanError, validate_plan
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
    "Failure",
    "Handoff",
    "HandoffRecord",
    "Plan",
    "PlanError",
    "PlanTask",
    "RunEvent",
    "RunResult",
    "RunSettings",
    "Team",
    "UnknownSpecialist",
    "UsageReport",
    "validate_plan",
    "validation_problems",
]
