"""Specialists: their definitions, their own tools, and the loop that runs one on a task."""

from mcp_team.specialists.definition import Specialist
from mcp_team.specialists.loop import SpecialistResult, handoff_message, run_specialist
from mcp_team.specialists.team import DEFAULT_TEAM
from mcp_team.specialists.tools import Tool, ToolFailed
from mcp_team.specialists.verdict import Verdict, parse_verdict

__all__ = [
    "DEFAULT_TEAM",
    "Specialist",
    "SpecialistResult",
    "Tool",
    "ToolFailed",
    "Verdict",
    "handoff_message",
    "parse_verdict",
    "run_specialist",
]
