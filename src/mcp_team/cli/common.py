"""What several commands share: exit codes, the one-line error, the model, team and tracing flags, and what
they turn into besides settings (tracing, registered secrets, logging to stderr; settings: cli/settings.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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


def call_timeout_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--call-timeout",
        type=float,
        metavar="SECONDS",
        default=None,  # then $MCP_TEAM_CALL_TIMEOUT: both read by cli/settings.py
        help="seconds one model call may take before it fails as a timeout (and is retried) "
        "(default: $MCP_TEAM_CALL_TIMEOUT, else the team file's call_timeout, else 180)",
    )


def trace_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("tracing (default: the OTEL_* variables; off when none is set)")
    group.add_argument("--otlp-endpoint", metavar="URL", help="export spans over OTLP, e.g. http://localhost:4318")
    group.add_argument("--trace-exporter", choices=["otlp", "console", "none"], help="console writes to stderr")
    group.add_argument("--trace-dir", metavar="DIR", help="write every run's trace to DIR/<run id>.json (OTLP JSON)")


def start_tracing(args: argparse.Namespace, trace_dir: str | None = None) -> Tracing | None:
    """Tracing as the OTEL_* variables and flags say (None when off), and content on its spans as
    OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT says. Raises `ConfigError` on bad values."""
    import os

    from mcp_team.cli.settings import process_settings
    from mcp_team.errors import ConfigError
    from mcp_team.telemetry.content import parse_capture_mode, set_capture_enabled
    from mcp_team.telemetry.setup import TracingConfig, setup_tracing

    settings = process_settings(args)
    set_capture_enabled(parse_capture_mode(settings.capture_content))
    try:  # the OTEL_* variables are a standard set of their own: TracingConfig reads them from the mapping given
        config = TracingConfig.from_env(
            os.environ, exporter=args.trace_exporter, endpoint=args.otlp_endpoint,
            trace_dir=trace_dir or settings.trace_dir,
        )  # fmt: skip
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
