"""The configuration of an external MCP server (`McpServerConfig`) and the names its tools get.

Apart from `mcp_tools` (the live sessions) so that reading and checking a team file never imports the
MCP SDK: a run whose team names no MCP server starts without it.
"""

from __future__ import annotations

import re
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

SERVER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class McpServerConfig(BaseModel):
    """One external MCP server: a stdio `command` (with `args`, `env`) or a streamable HTTP `url` (with `headers`)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    name: str = Field(pattern=SERVER_NAME_PATTERN, description="How the team file refers to this server.")
    command: str | None = Field(default=None, description="Executable of a stdio server.")
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description="Added to a minimal inherited environment.")
    url: str | None = Field(default=None, description="Endpoint of a streamable HTTP server, e.g. http://host/mcp.")
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP headers, e.g. Authorization.")
    allowed_tools: list[str] | None = Field(default=None, description="Remote tool names to offer; None: all.")
    tool_prefix: str = Field(default="", pattern=r"^[A-Za-z0-9_-]{0,32}$", description="Prefix of the local names.")

    @model_validator(mode="after")
    def _one_transport(self) -> Self:
        where = f"MCP server '{self.name}'"
        if self.command is not None and self.url is not None:
            raise ValueError(f"{where}: give either `command` (a stdio server) or `url` (an HTTP server), not both")
        if self.command is None and self.url is None:
            raise ValueError(f"{where}: give `command` (a stdio server) or `url` (a streamable HTTP server)")
        if self.command is not None:
            if not self.command.strip():
                raise ValueError(f"{where}: `command` is empty")
            if self.headers:
                raise ValueError(f"{where}: `headers` apply only to a `url` server")
        if self.url is not None:
            if not re.match(r"^https?://[^/?#\s]+", self.url):
                raise ValueError(f"{where}: `url` must be an http:// or https:// URL, got {self.url!r}")
            if self.args or self.env:
                raise ValueError(f"{where}: `args` and `env` apply only to a `command` server")
        return self

    @property
    def target(self) -> str:
        """The command line or URL, for messages."""
        if self.url is not None:
            return self.url
        return " ".join([self.command or "", *self.args])


def local_name(config: McpServerConfig, remote_name: str) -> str:
    """The name specialists see: prefix + remote name, made valid for model APIs (`[A-Za-z0-9_-]{1,64}`)."""
    name = config.tool_prefix + remote_name
    if _TOOL_NAME.match(name):
        return name
    return (re.sub(r"[^A-Za-z0-9_-]", "_", name) or "tool")[:64]
