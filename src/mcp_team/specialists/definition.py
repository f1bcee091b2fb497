"""A specialist is data: name, one-line description, system prompt, model role, tools, budgets."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mcp_team.specialists.tools import Tool

# At most 53 characters: the supervisor calls a specialist through the tool `handoff_to_<name>`, and model APIs
# (OpenAI's, Anthropic's) refuse a tool whose name is longer than 64.
NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,52}$"
NAME_RULE = "1 to 53 letters, digits, _ or -, starting with a letter"


class Specialist(BaseModel):
    """A member of the team: what the supervisor sees of it (`name`, `description`) and how it works (its
    system prompt, the model of its `model_role` or its own, its tools and its turn and token limits).

    A specialist sees only the task of its handoff, never the rest of the run. `model_role` picks its model from
    the team's `ModelSet` (`"specialist"` by default; a role the set does not name falls back to the specialist
    model)."""

    # extra="forbid": a misspelt keyword (`max_turn=3`, `prompt=...`) is an error, not a setting silently dropped.
    model_config = ConfigDict(defer_build=True, frozen=True, arbitrary_types_allowed=True, extra="forbid")

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

    @field_validator("description", "system_prompt")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @property
    def instructions(self) -> str:
        """The full system prompt the model sees. Its first line names the role."""
        return f"You are the {self.name} specialist on a team led by a supervisor.\n\n{self.system_prompt}"

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)
