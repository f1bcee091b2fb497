"""Specialist tools: a typed definition plus an async function. Each specialist owns its list."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mcp_team.errors import McpTeamError
from mcp_team.llm import ToolDefinition


class ToolFailed(McpTeamError):
    """A tool refused or failed; the message goes back to the model as an error result."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    run: Callable[[dict[str, Any]], Awaitable[str]]

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(name=self.name, description=self.description, input_schema=self.input_schema)
