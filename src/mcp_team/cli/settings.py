"""Where a command reads its settings: once, from its flags and its environment, into objects it passes down.

- `ProcessSettings`: what the process as a whole is configured with — the team file, the call timeout, the trace
  directory, the stdio message limit, whether spans may carry content. `process_settings(args)` builds it once
  per command (flags over variables) and keeps it on `args`.
- `model_settings(args)`: the models' `ModelSettings` (llm/settings.py), the variables under `--model` and friends.
- The parts that only `serve` has read their own classes where `serve` starts (`ServerLimits`, `ViewSettings`,
  `HttpSettings`, `OAuthSettings`): each belongs to the part it configures, which a library caller builds alone.
- `settings_problems`: a bad value named by the flag and the variable the user may have set, never by a field.

Nothing below `cli/` and `server/` reads the environment (tests/project/test_settings_at_the_edge.py). One read
stays outside: `MCP_TEAM_DEBUG`, in cli/main.py, which decides how an error is reported — including an error in
building these settings.
"""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Any

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from mcp_team.errors import ConfigError, message_of
from mcp_team.handoffs.schema import LONGEST_CALL
from mcp_team.llm.settings import ModelSettings, env_variable, env_variables
from mcp_team.telemetry.content import CAPTURE_ENV

if TYPE_CHECKING:
    from mcp_team.teamfile.loading import TeamSpec


class ProcessSettings(BaseSettings):
    """The settings of one `mcp-team` process that no single part owns. Built once per command by
    `process_settings`; a flag given wins over its variable."""

    model_config = SettingsConfigDict(env_prefix="MCP_TEAM_", extra="ignore", frozen=True, populate_by_name=True)

    team_file: str | None = Field(
        default=None, validation_alias="MCP_TEAM_FILE", description="--team; else ./team.toml, else the built-in team"
    )
    call_timeout: float | None = Field(
        default=None, allow_inf_nan=False,
        description="Seconds one model call may take; else the team file's call_timeout, else 180.",
    )  # fmt: skip
    trace_dir: str | None = Field(default=None, description="Where every run's trace is written (OTLP JSON).")
    max_message_bytes: int | None = Field(  # None: the transport's own (server/transports/stdio.py), 4 MiB
        default=None, ge=1024, description="The largest JSON-RPC message stdio takes."
    )
    capture_content: str | None = Field(
        default=None, validation_alias=CAPTURE_ENV, description="Whether spans may carry prompts and answers."
    )

    @field_validator("call_timeout")
    @classmethod
    def _a_call_can_take_it(cls, seconds: float | None) -> float | None:
        if seconds is not None and not 0 < seconds <= LONGEST_CALL:
            raise ValueError(f"must be a positive number of seconds, at most {LONGEST_CALL:g} (a day), got {seconds:g}")
        return seconds


# The flag that sets each setting as well as its variable: a problem names both, as the user may have used either.
_FLAGS = {"model": "--model", "offline_latency_ms": "--offline-latency-ms", "faults": "--fault", "host": "--host",
          "port": "--port", "issuer": "--auth-issuer", "public_url": "--public-url", "team_file": "--team",
          "call_timeout": "--call-timeout", "trace_dir": "--trace-dir"}  # fmt: skip

# The attribute of `args` for each `ProcessSettings` field a flag sets (commands without the flag lack it).
_ARGS = {"team_file": "team", "call_timeout": "call_timeout", "trace_dir": "trace_dir"}


def process_settings(args: argparse.Namespace) -> ProcessSettings:
    """This command's `ProcessSettings`: read on the first call, the same object after. Raises `ConfigError`."""
    found = getattr(args, "process_settings", None)
    if isinstance(found, ProcessSettings):
        return found
    flags = {field: value for field, name in _ARGS.items() if (value := getattr(args, name, None)) is not None}
    try:
        settings = ProcessSettings(**flags)
    except ValidationError as exc:
        raise ConfigError(f"invalid settings: {'; '.join(settings_problems(exc, ProcessSettings))}") from None
    args.process_settings = settings
    return settings


def model_settings(args: argparse.Namespace) -> ModelSettings:
    """The model settings: the environment, overridden by `model_flags`. Raises `ConfigError` on bad values."""
    overrides: dict[str, Any] = {}
    if args.model:
        overrides["model"] = args.model
    if args.offline_latency_ms is not None:
        overrides["offline_latency_ms"] = args.offline_latency_ms
    if args.fault:
        overrides["faults"] = ",".join(args.fault)
    try:
        return ModelSettings(**overrides)
    except ValidationError as exc:
        raise ConfigError(f"invalid settings: {'; '.join(settings_problems(exc, ModelSettings))}") from None
    except SettingsError as exc:  # a variable holding JSON that does not parse
        field = re.search(r'field "(\w+)"', str(exc))
        name = f"MCP_TEAM_{field.group(1).upper()}" if field else "an MCP_TEAM_ variable"
        raise ConfigError(f"invalid settings: {name} is not valid JSON ({exc.__cause__ or exc})") from None


def team_spec(args: argparse.Namespace) -> TeamSpec:
    """The team file this command names (`--team`, else `MCP_TEAM_FILE`, else ./team.toml, else the built-in team),
    with `--call-timeout` / `MCP_TEAM_CALL_TIMEOUT` over its call timeout. Raises `ConfigError`."""
    import dataclasses

    from mcp_team.teamfile.loading import load_team

    settings = process_settings(args)
    spec = load_team(settings.team_file)
    if settings.call_timeout is None:
        return spec
    return dataclasses.replace(spec, overrides={**spec.overrides, "call_timeout": settings.call_timeout})


def settings_problems(exc: ValidationError, *candidates: type[BaseSettings]) -> list[str]:
    """Each error of settings read from the environment, named by the variable that sets it
    (`MCP_TEAM_REQUESTS_PER_MINUTE: Input should be a valid integer`), not by the field behind it. `exc` is
    matched to the one of `candidates` that raised it (by name); of any other model, fields are named."""
    import os

    settings = next((c for c in candidates if c.__name__ == exc.title), None)
    problems = []
    for e in exc.errors():
        name, *rest = [str(part) for part in e["loc"]] or ["settings"]
        # pydantic names a field with alias choices by its first (MCP_TEAM_OPENAI_BASE_URL), a field with an
        # alias by its alias (MCP_TEAM_FILE), a value given by field name by its field (team_file)
        key = None if settings is None else next(
            (k for k in settings.model_fields if name == k or name in env_variables(settings, k)), None
        )  # fmt: skip
        if settings is not None and key is not None:
            # the variable the user set (OPENAI_BASE_URL), else the first
            variable = env_variable(settings, key, os.environ)
            name = f"{_FLAGS[key]} / {variable}" if key in _FLAGS else variable  # either may have set it
        problems.append(f"{'.'.join([name, *rest])}: {message_of(e)}")
    return problems
