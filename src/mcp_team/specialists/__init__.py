"""Specialists: their definitions, their own tools, and the loop that runs one on a task."""

from mcp_team.specialists.defaults import DEFAULT_TEAM
from mcp_team.specialists.definition import Specialist
from mcp_team.specialists.loop import Gather, SpecialistResult, gather_concurrently, handoff_message, run_specialist
from mcp_team.specialists.tools import Tool, ToolFailed
from mcp_team.specialists.verdict import Verdict, parse_verdict

__all__ = [
    "DEFAULT_TEAM",
    "Gather",
    "Specialist",
    "SpecialistResult",
    "Tool",
    "ToolFailed",
    "Verdict",
    "gather_concurrently",
    "handoff_message",
    "parse_verdict",
    "run_specialist",
]
