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
    """A tool a specialist may call. What it does to the world is what MCP clients are told of the specialist's
    tool and of `run_team` (their readOnlyHint and destructiveHint), and a client may skip asking its user
    before a read-only one: the defaults are MCP's, the cautious ones (it may change and delete things). Say
    `read_only=True` of a tool that only reads."""

    name: str
    description: str
    input_schema: dict[str, Any]
    run: Callable[[dict[str, Any]], Awaitable[str]]
    read_only: bool = False
    destructive: bool = True  # when not read-only: it may delete or overwrite, not only add

    def __post_init__(self) -> None:
        # Checked here, not when a model first calls it: a wrong schema would fail every model call of its specialist.
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"a Tool's name must be a non-empty str, not {self.name!r}")
        if not isinstance(self.input_schema, dict):
            wrong = type(self.input_schema).__name__
            raise TypeError(
                f"tool {self.name!r}: input_schema must be a JSON schema dict, not {wrong}: "
                '{"type": "object", "properties": {...}}'
            )

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(name=self.name, description=self.description, input_schema=self.input_schema)
