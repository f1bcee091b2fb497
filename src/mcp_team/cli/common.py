"""What several commands share: exit codes, the one-line error, and the model, team and tracing flags
with what they turn into (settings, tracing, registered secrets, logging to stderr)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_team.errors import message_of

if TYPE_CHECKING:
    from pydantic import ValidationError
    from pydantic_settings import BaseSettings
    from rich.console import Console
    from rich.table import Table

    from mcp_team.llm.settings import ModelSettings
    from mcp_team.teamfile.loading import TeamSpec
    from mcp_team.telemetry.setup import Tracing

    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PARTIAL, EXIT_CANCELLED = 0, 1, 2, 3, 130


def error(message: str, code: int = EXIT_USAGE) -> int:
    """Say what is wrong on stderr, the way every command does; returns the exit code."""
    print(f"mcp-team: error: {message}", file=sys.stderr)
    return code


# The width of a console that is not a terminal: wide enough that nothing a command says is ever wrapped.
UNWRAPPED = 1_000_000


def console(*, stderr: bool = False) -> Console:
    """A console for what a command prints. At a terminal, as wide as it is; anywhere else (a pipe, a file, a CI
    log) nothing is wrapped: a line is as long as what it says, since a reader or a script there splits lines
    itself (rich would wrap at 80 columns, splitting e.g. `1/1 cases pass` of a long title in two)."""
    from rich.console import Console

    out = Console(stderr=stderr, highlight=False, soft_wrap=True)
    if not out.is_terminal:
        out.width = UNWRAPPED
    return out


def print_table(out: Console, table: Table) -> None:
    """`table` on `out`. Not at a terminal, its title and caption are lines of their own: rich wraps them to the
    table's width, however wide the console."""
    if out.is_terminal:
        out.print(table)
        return
    title, caption = table.title, table.caption
    table.title = table.caption = None
    if title:
        out.print(title)
    out.print(table)
    if caption:
        out.print(caption)


def model_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        metavar="PROVIDER[:MODEL]",
        help="anthropic, openai, offline, or a model such as openai:gpt-4o-mini (default: $MCP_TEAM_MODEL, else "
        "anthropic when ANTHROPIC_API_KEY is set, else openai when OPENAI_API_KEY or OPENAI_BASE_URL is)",
    )
    parser.add_argument(
        "--offline-latency-ms", type=float, metavar="MS", help="offline backend: simulated latency per call"
    )
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KIND[:AGENT[:TIMES]]",
        help="inject a fault into the model, whichever it is, e.g. rate_limit:researcher:1 (repeatable; "
        "kinds: rate_limit, server_error, overloaded, timeout, unknown_specialist, malformed_tool_call, "
        "repeat_handoff, endless_tools, revise, conflict; AGENT: a member's name, supervisor or "
        "planner, default any member; TIMES: how many of its calls it changes, default every one)",
    )


def auth_flags(parser: argparse.ArgumentParser) -> None:
    """`serve --http`'s OAuth flags (and `check --http`'s, which shows what they set up)."""
    parser.add_argument(
        "--auth-issuer",
        metavar="URL",
        help="HTTP: be an OAuth 2.1 resource server of this issuer (its identifier, exactly): each person's token, "
        "each person's runs (default: $MCP_TEAM_AUTH_ISSUER; see docs/serving-several-people.md)",
    )
    parser.add_argument(
        "--public-url",
        metavar="URL",
        help="HTTP: the URL clients reach /mcp at, e.g. https://team.example.com/mcp: the audience of every token "
        "(default: $MCP_TEAM_PUBLIC_URL, else http://HOST:PORT/mcp on a loopback bind)",
    )


def team_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--team", metavar="PATH", help="team file (default: $MCP_TEAM_FILE, else ./team.toml, else the built-in team)"
    )


def team_file(flag: str | None) -> str | None:
    """The team file `--team` names, else `MCP_TEAM_FILE`'s; None: `load_team` looks for ./team.toml."""
    import os

    return flag or os.environ.get("MCP_TEAM_FILE") or None


def call_timeout_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--call-timeout",
        type=float,
        metavar="SECONDS",
        default=None,  # then $MCP_TEAM_CALL_TIMEOUT, read by `with_call_timeout` (which names it when it is wrong)
        help="seconds one model call may take before it fails as a timeout (and is retried) "
        "(default: $MCP_TEAM_CALL_TIMEOUT, else the team file's call_timeout, else 180)",
    )


def with_call_timeout(spec: TeamSpec, seconds: float | None) -> TeamSpec:
    """`spec` with its run settings' call timeout replaced, when `seconds` (else MCP_TEAM_CALL_TIMEOUT) is given.
    Raises `ConfigError`."""
    import dataclasses
    import math
    import os

    from mcp_team.errors import ConfigError
    from mcp_team.handoffs.schema import LONGEST_CALL

    if seconds is None:
        if not (variable := os.environ.get("MCP_TEAM_CALL_TIMEOUT")):
            return spec
        try:
            seconds = float(variable)
        except ValueError:
            raise ConfigError(f"MCP_TEAM_CALL_TIMEOUT must be a number of seconds, got {variable!r}") from None
    if not (seconds > 0 and math.isfinite(seconds)) or seconds > LONGEST_CALL:
        raise ConfigError(
            "--call-timeout / MCP_TEAM_CALL_TIMEOUT must be a positive number of seconds, at most "
            f"{LONGEST_CALL:g} (a day), got {seconds:g}"
        )
    return dataclasses.replace(spec, overrides={**spec.overrides, "call_timeout": float(seconds)})


def trace_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("tracing (default: the OTEL_* variables; off when none is set)")
    group.add_argument("--otlp-endpoint", metavar="URL", help="export spans over OTLP, e.g. http://localhost:4318")
    group.add_argument("--trace-exporter", choices=["otlp", "console", "none"], help="console writes to stderr")
    group.add_argument("--trace-dir", metavar="DIR", help="write every run's trace to DIR/<run id>.json (OTLP JSON)")


def model_settings(args: argparse.Namespace) -> ModelSettings:
    """The model settings: the environment, overridden by `model_flags`. Raises `ConfigError` on bad values."""
    import re

    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from mcp_team.errors import ConfigError
    from mcp_team.llm.settings import ModelSettings

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


# The settings a flag sets as well as a variable: a problem names both, as the user may have used either.
_FLAGS = {"model": "--model", "offline_latency_ms": "--offline-latency-ms", "faults": "--fault", "host": "--host",
          "port": "--port", "issuer": "--auth-issuer", "public_url": "--public-url"}  # fmt: skip


def settings_problems(exc: ValidationError, *candidates: type[BaseSettings]) -> list[str]:
    """Each error of settings read from the environment, named by the variable that sets it
    (`MCP_TEAM_REQUESTS_PER_MINUTE: Input should be a valid integer`), not by the field behind it. `exc` is
    matched to the one of `candidates` that raised it (by name); of any other model, fields are named."""
    import os

    from mcp_team.llm.settings import env_variable, env_variables

    settings = next((c for c in candidates if c.__name__ == exc.title), None)
    problems = []
    for e in exc.errors():
        name, *rest = [str(part) for part in e["loc"]] or ["settings"]
        # pydantic names a field with alias choices by its first (MCP_TEAM_OPENAI_BASE_URL)
        key = None if settings is None else next(
            (k for k in settings.model_fields if name == k or name in env_variables(settings, k)), None
        )  # fmt: skip
        if settings is not None and key is not None:
            # the variable the user set (OPENAI_BASE_URL), else the first
            variable = env_variable(settings, key, os.environ)
            name = f"{_FLAGS[name]} / {variable}" if name in _FLAGS else variable  # either may have set it
        problems.append(f"{'.'.join([name, *rest])}: {message_of(e)}")
    return problems


def start_tracing(args: argparse.Namespace, trace_dir: str | None = None) -> Tracing | None:
    """Tracing as the OTEL_* variables and flags say (None when off), and content on its spans as
    OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT says. Raises `ConfigError` on bad values."""
    import os

    from mcp_team.errors import ConfigError
    from mcp_team.telemetry.content import CAPTURE_ENV, parse_capture_mode, set_capture_enabled
    from mcp_team.telemetry.setup import TracingConfig, setup_tracing

    set_capture_enabled(parse_capture_mode(os.environ.get(CAPTURE_ENV)))
    try:
        config = TracingConfig.from_env(
            os.environ, exporter=args.trace_exporter, endpoint=args.otlp_endpoint, trace_dir=trace_dir or args.trace_dir
        )
        return setup_tracing(config)
    except ValueError as exc:
        raise ConfigError(f"tracing: {exc}") from None


def register_secrets(settings: ModelSettings, spec: TeamSpec) -> None:
    """Secrets never appear in spans, logs or records, whatever the capture setting."""
    from mcp_team.telemetry.content import register_secret

    for secret in settings.secrets():
        register_secret(secret)
    for value in spec.secrets():
        register_secret(value)


def check_faults(settings: ModelSettings, spec: TeamSpec) -> None:
    """`ConfigError` for a fault that does not parse, or one aimed at a member the team does not have: it would
    never happen, and a test of what a fault does would pass for the wrong reason."""
    from mcp_team.errors import ConfigError
    from mcp_team.llm.faults import parse_faults

    try:
        faults = parse_faults(settings.faults)
    except ValueError as exc:
        # As `build_models` says it; said here too since `serve` builds its model only on the first call, and a
        # server that started would answer every call with this instead of refusing to start.
        raise ConfigError(f"--fault / MCP_TEAM_FAULTS: {exc}") from None
    known = {"*", "supervisor", "planner", "specialist", *spec.names}
    for fault in faults:
        if fault.agent not in known:
            raise ConfigError(
                f"--fault / MCP_TEAM_FAULTS: {fault.kind}:{fault.agent} names no member of this team; use one of "
                f"{', '.join(sorted(known - {'*'}))}, or leave AGENT out for any"
            )


def log_to_stderr() -> None:
    """Warnings and errors to stderr (stdout is the answer, or the stdio transport), redacted."""
    import logging

    from mcp_team.telemetry.content import RedactingFilter

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="mcp-team: %(levelname)s %(message)s")
    logging.getLogger("mcp_team.server.watch").setLevel(logging.INFO)  # a team reloaded is news, not a warning
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactingFilter())


def unwritable(target: str | Path, example: str) -> str | None:
    """Why a file the command writes at its end (a report, a trace) cannot be written to `target`, or None:
    checked before the work, which it would otherwise outlive only to fail. Its directory is made, as
    `--record`'s is; `example` is the kind of file name to suggest for a directory."""
    import os

    path = Path(target)
    if path.is_dir():
        return f"is a directory; give a file name, e.g. {example}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        return f"{path.parent} is a file, not a directory; write it elsewhere"
    except OSError as exc:
        return f"cannot make its directory {path.parent} ({exc.strerror})"
    if not os.access(path if path.exists() else path.parent, os.W_OK):
        return "cannot be written (no permission); write it elsewhere"
    return None
