"""A specialist is data: name, one-line description, system prompt, model role, tools, budgets."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from mcp_team.specialists.tools import Tool

NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"


class Specialist(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str = Field(pattern=NAME_PATTERN, description="Also the MCP tool name; letters, digits, _ and -.")
    description: str = Field(min_length=1, description="One line; the supervisor routes by it.")
    system_prompt: str = Field(min_length=1)
    model_role: str = "specialist"
    tools: tuple[Tool, ...] = ()
    max_turns: int = Field(default=6, ge=1, le=100)
    max_tokens: int | None = Field(default=None, ge=1, description="Token budget for one handoff.")
    returns_verdict: bool = Field(default=False, description="Its answers end in a PASS/REVISE verdict.")
    fallback: str | None = Field(
        default=None, description="The specialist that takes its handoffs once its circuit is open (team file)."
    )

    @property
    def instructions(self) -> str:
        """The full system prompt the model sees. Its first line names the role."""
        return f"You are the {self.name} specialist on a team led by a supervisor.\n\n{self.system_prompt}"

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)
