"""What a team file may say: its schema (`TeamFileModel` and its tables), checked by pydantic, and the error a
file that cannot be used raises (`TeamFileError`). Loading one: `loading`; the checks beyond the schema:
`problems`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mcp_team.errors import ConfigError
from mcp_team.handoffs import RunSettings
from mcp_team.handoffs.gates import Gates
from mcp_team.llm.settings import check_base_url
from mcp_team.llm.text_calls import ToolCallMode
from mcp_team.llm.wrappers import SamplingSettings
from mcp_team.specialists.definition import NAME_PATTERN
from mcp_team.specialists.mcp_config import McpServerConfig
from mcp_team.specialists.tools import MAX_RESULT_CHARS


class TeamFileError(ConfigError):
    """A team file that cannot be used; `problems` lists each one as `key.path: what is wrong`."""

    def __init__(self, path: Path | str, problems: Sequence[str]) -> None:
        self.path, self.problems = str(path), list(problems)
        super().__init__(f"{path}: invalid team file:\n" + "\n".join(f"  - {p}" for p in problems))


class _Strict(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid")


class SupervisorSpec(RunSettings):
    """`[supervisor]`: the run settings, plus the model concurrency of the whole server."""

    max_concurrency: int | None = Field(default=None, ge=1)
    max_team_depth: int = Field(default=3, ge=1, description="How deep teams may nest (this file is 1).")


class ModelsSpec(_Strict):
    """`[models]`: model strings per role, the fallback of each, and their sampling settings (see `llm.settings`)."""

    supervisor: str | None = None
    specialist: str | None = None
    supervisor_fallback: str | None = None
    specialist_fallback: str | None = None
    supervisor_sampling: SamplingSettings | None = None
    specialist_sampling: SamplingSettings | None = None
    # Whether tool calls a model writes as text are run: auto, native or text (see llm/text_calls.py).
    tool_calls: ToolCallMode | None = None
    supervisor_tool_calls: ToolCallMode | None = None
    specialist_tool_calls: ToolCallMode | None = None


class ToolSettings(_Strict):
    read_dirs: list[str] = Field(default_factory=list, description="Directories read_file/list_files may read.")
    fetch_allow_private: bool = False
    fetch_allowed_hosts: list[str] = Field(default_factory=list)
    fetch_max_bytes: int = Field(default=1_000_000, ge=1)
    max_result_chars: int = Field(
        default=MAX_RESULT_CHARS, ge=1, description="What a model sees of any tool's result or error; longer is cut."
    )
    notes_file: str = ".mcp-team/notes.jsonl"


class SpecialistSpec(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    description: str = Field(min_length=1)
    prompt: str | None = None
    prompt_file: str | None = None
    model_role: Literal["supervisor", "specialist"] = "specialist"
    max_turns: int = Field(default=6, ge=1, le=100)
    max_tokens: int | None = Field(default=None, ge=1)
    tools: list[str] = Field(default_factory=list)
    returns_verdict: bool = False
    # Its own model, when not its role's: a model string, and its endpoint when not its provider's.
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, description="The variable that holds its endpoint's API key.")
    fallback_model: str | None = None
    sampling: SamplingSettings | None = Field(default=None, description="Its temperature and output limit.")
    tool_calls: ToolCallMode | None = Field(default=None, description="auto, native or text; default: its role's.")
    fallback: str | None = Field(default=None, description="The specialist that takes over once its circuit opens.")
    gates: Gates | None = None  # quality gates on its output (handoffs/gates.py)
    team: str | dict[str, Any] | None = None  # a member that is a team: a team file's path, or an inline table

    _base_url = field_validator("base_url")(check_base_url)


class TeamFileModel(_Strict):
    supervisor: SupervisorSpec = Field(default_factory=SupervisorSpec)
    models: ModelsSpec = Field(default_factory=ModelsSpec)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    mcp_servers: list[McpServerConfig] = Field(default_factory=list)
    specialists: list[SpecialistSpec] = Field(min_length=1)
