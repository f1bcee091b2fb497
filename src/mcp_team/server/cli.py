"""The `mcp-team` command line: `run` a request through the team, `serve` the team over MCP.

Imports stay light at module level: clients spawn `mcp-team serve` at every launch, and the
anthropic SDK and rich are only imported by the commands that use them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp_team.handoffs import RunEvent, RunResult

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PARTIAL, EXIT_CANCELLED = 0, 1, 2, 3, 130
GRACE_SECONDS = 1.0  # after SIGTERM, how long running work gets to wind down


def _model_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        choices=["anthropic", "offline"],
        help="model backend (default: $MCP_TEAM_MODEL, else anthropic when ANTHROPIC_API_KEY is set)",
    )
    parser.add_argument(
        "--offline-latency-ms", type=float, metavar="MS", help="offline backend: simulated latency per call"
    )
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KIND[:AGENT[:TIMES]]",
        help="offline backend: inject a fault, e.g. rate_limit:researcher:1 (repeatable)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-team", description="A team of LLM specialists and a supervisor, as an MCP server."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run one request through the team and print the answer")
    run.add_argument("request", help="what you want the team to do")
    _model_flags(run)
    _team_flag(run)
    _trace_flags(run)
    run.add_argument(
        "--jaeger-json", metavar="FILE", help="write this run's trace as Jaeger JSON (for Jaeger's Upload)"
    )
    run.add_argument("--mode", choices=["adaptive", "planned"], help="adaptive (default) or planned")
    run.add_argument("--json", action="store_true", help="print the structured run result as JSON")
    run.add_argument("--quiet", action="store_true", help="no progress on stderr")
    run.add_argument("--max-handoffs", type=int, metavar="N")
    run.add_argument("--max-model-calls", type=int, metavar="N")
    run.add_argument("--max-tokens", type=int, metavar="N")
    run.add_argument("--deadline", type=float, metavar="SECONDS")

    serve = sub.add_parser("serve", help="serve the team over MCP (stdio by default)")
    _model_flags(serve)
    _team_flag(serve)
    _trace_flags(serve)
    serve.add_argument("--watch", action="store_true", help="reload the team when its file changes")
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    serve.add_argument("--host", help="HTTP bind address (default 127.0.0.1; others need a token, see README)")
    serve.add_argument("--port", type=int, help="HTTP port (default 8765)")

    init = sub.add_parser("init", help="write a commented starter team.toml (the default team, or a preset)")
    init.add_argument("path", nargs="?", default="team.toml", help="where to write it (default: team.toml)")
    init.add_argument("--preset", help="start from a preset team (see --list)")
    init.add_argument("--list", action="store_true", help="list the presets")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")

    check = sub.add_parser("check", help="validate a team file and show the team")
    check.add_argument("path", nargs="?", help="the team file (default: the one `serve` would load)")

    show = sub.add_parser("trace", help="show a run's trace as a waterfall (from a trace directory or file)")
    show.add_argument("run", help="a run id (looked up in --dir) or a Jaeger JSON file")
    show.add_argument("--dir", metavar="DIR", help="the trace directory (default: $MCP_TEAM_TRACE_DIR)")
    show.add_argument("--jaeger-json", metavar="FILE", help="also write the trace to FILE for Jaeger's Upload")
    show.add_argument("--width", type=int, default=100, help="columns (default 100)")
    return parser


def _trace_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("tracing (default: the OTEL_* variables; off when none is set)")
    group.add_argument("--otlp-endpoint", metavar="URL", help="export spans over OTLP, e.g. http://localhost:4318")
    group.add_argument("--trace-exporter", choices=["otlp", "console", "none"], help="console writes to stderr")
    group.add_argument("--trace-dir", metavar="DIR", help="write every run as a Jaeger JSON file in DIR")


def _team_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--team", metavar="PATH", help="team file (default: $MCP_TEAM_FILE, else ./team.toml, else the built-in team)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    commands = {"run": _run, "serve": _serve, "init": _init, "check": _check, "trace": _trace}
    try:
        return commands[args.command](args)
    except KeyboardInterrupt:
        print("mcp-team: cancelled", file=sys.stderr)
        return EXIT_CANCELLED
    except BaseException as exc:
        if os.environ.get("MCP_TEAM_DEBUG"):
            raise
        return _report(exc)


def _report(exc: BaseException) -> int:
    """A clear one-line error instead of a traceback (MCP_TEAM_DEBUG=1 shows the traceback)."""
    from mcp_team.llm.settings import ConfigError

    leaf = exc
    while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
        leaf = leaf.exceptions[0]  # the server's task groups wrap a start-up failure
    if isinstance(leaf, ConfigError):
        return _error(str(leaf), EXIT_USAGE)
    if isinstance(leaf, OSError):
        where = f" ({leaf.filename})" if leaf.filename else ""
        return _error(f"{leaf.strerror or leaf}{where}", EXIT_FAILED)
    if isinstance(leaf, SystemExit):
        return int(leaf.code or 0) if isinstance(leaf.code, int) else EXIT_FAILED
    return _error(
        f"unexpected {type(leaf).__name__}: {leaf} (set MCP_TEAM_DEBUG=1 to see the traceback; please report it)",
        EXIT_FAILED,
    )


def _model_settings(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from pydantic import ValidationError

    from mcp_team.handoffs import validation_problems
    from mcp_team.llm.settings import ConfigError, ModelSettings

    overrides: dict[str, object] = {}
    if args.model:
        overrides["model"] = args.model
    if args.offline_latency_ms is not None:
        overrides["offline_latency_ms"] = args.offline_latency_ms
    if args.fault:
        overrides["offline_faults"] = ",".join(args.fault)
    try:
        return ModelSettings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigError(f"invalid settings: {'; '.join(validation_problems(exc))}") from None


def _start_tracing(args: argparse.Namespace, trace_dir: str | None = None):  # type: ignore[no-untyped-def]
    """Tracing as the OTEL_* variables and flags say (None when off). Raises `ConfigError` on bad values."""
    from mcp_team.llm.settings import ConfigError
    from mcp_team.telemetry.setup import TracingConfig, setup_tracing

    try:
        config = TracingConfig.from_env(
            exporter=args.trace_exporter, endpoint=args.otlp_endpoint, trace_dir=trace_dir or args.trace_dir
        )
        return setup_tracing(config)
    except ValueError as exc:
        raise ConfigError(f"tracing: {exc}") from None


def _register_secrets(settings, spec) -> None:  # type: ignore[no-untyped-def]
    """Secrets never appear in spans, logs or records, whatever the capture setting."""
    from mcp_team.telemetry.content import register_secret

    for secret in (settings.anthropic_api_key, settings.supervisor_api_key, settings.specialist_api_key):
        if secret is not None:
            register_secret(secret.get_secret_value())
    for value in spec.secrets():
        register_secret(value)


def _run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from mcp_team.handoffs import Budgets, validation_problems
    from mcp_team.llm.settings import build_models
    from mcp_team.server.teamfile import load_team

    if not args.request.strip():
        return _error('the request is empty; say what you want the team to do, e.g. mcp-team run "..."')
    _log_to_stderr()
    try:
        spec = load_team(args.team)
        settings = _model_settings(args).model_copy(update=spec.model_overrides)
        _register_secrets(settings, spec)
        models = build_models(settings)
        limits = {
            k: v
            for k, v in {
                "max_handoffs": args.max_handoffs,
                "max_model_calls": args.max_model_calls,
                "max_tokens": args.max_tokens,
                "deadline_seconds": args.deadline,
            }.items()
            if v is not None
        }
        budgets = Budgets(**limits) if limits else None
    except ValidationError as exc:  # a ConfigError reaches main(), which says it the same way
        problems = "; ".join(p.replace("_", "-") for p in validation_problems(exc, prefix="--"))
        return _error(f"invalid budget: {problems}", EXIT_USAGE)
    if args.jaeger_json and not args.trace_dir:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="mcp-team-trace-") as trace_dir:
            return _run_traced(args, spec, settings, models, budgets, trace_dir)
    return _run_traced(args, spec, settings, models, budgets, None)


def _run_traced(args, spec, settings, models, budgets, trace_dir):  # type: ignore[no-untyped-def]
    import anyio
    from rich.console import Console

    tracing = _start_tracing(args, trace_dir)

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    if settings.backend() == "offline":
        console.print("[yellow]mcp-team: offline backend: deterministic answers, no LLM is called[/yellow]")
    on_event = None if args.quiet else _progress(console)
    try:
        result = anyio.run(_run_team, spec, models, args.request, args.mode, budgets, on_event)
    finally:
        if tracing is not None:
            tracing.shutdown()
    print(result.model_dump_json(indent=2) if args.json else result.answer, flush=True)  # the answer comes first
    if not args.quiet:
        _summary(console, result)
    if args.jaeger_json:
        written = _save_jaeger(tracing, result.run_id, args.jaeger_json)
        console.print(f"mcp-team: trace written to {written}" if written else "mcp-team: no trace was recorded")
    return {"complete": EXIT_OK, "partial": EXIT_PARTIAL}.get(result.status, EXIT_FAILED)


def _log_to_stderr() -> None:
    """Warnings and errors to stderr (stdout is the answer, or the stdio transport), redacted."""
    import logging

    from mcp_team.telemetry.content import RedactingFilter

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="mcp-team: %(levelname)s %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactingFilter())


def _serve(args: argparse.Namespace) -> int:

    import anyio
    from pydantic import ValidationError

    from mcp_team.handoffs import validation_problems
    from mcp_team.telemetry.content import register_secret

    _log_to_stderr()
    try:
        settings = _model_settings(args)
        if settings.configured_backend() in (None, "sampling"):
            print(
                "mcp-team: no model configured; tools will run on the client's model through MCP sampling",
                file=sys.stderr,
            )
        elif settings.backend() == "offline":
            print("mcp-team: offline backend: deterministic answers, no LLM is called", file=sys.stderr)
        from mcp_team.server.teamfile import load_team

        spec = load_team(args.team)
        _register_secrets(settings, spec)
        http = None
        if args.http:
            from mcp_team.server.http import HttpSettings, check_bind

            overrides = {k: v for k, v in {"host": args.host, "port": args.port}.items() if v is not None}
            http = HttpSettings(**overrides)
            check_bind(http)
            if http.http_token is not None:
                register_secret(http.http_token.get_secret_value())
        tracing = _start_tracing(args)
    except ValidationError as exc:  # a ConfigError reaches main(), which says it the same way
        return _error(f"invalid settings: {'; '.join(validation_problems(exc))}", EXIT_USAGE)

    from mcp_team.server.app import build_server

    try:
        if http is None:
            server = build_server(settings, spec, watch=args.watch, tracing=tracing)
            anyio.run(_serve_stdio, server, tracing)
            return EXIT_OK
        import uvicorn

        from mcp_team.server.http import auth_for, http_app

        server = build_server(settings, spec, auth=auth_for(http), watch=args.watch, tracing=tracing)
        print(f"mcp-team: serving streamable HTTP on http://{http.host}:{http.port}/mcp", file=sys.stderr)
        uvicorn.run(http_app(server, http), host=http.host, port=http.port, log_level="warning")
        return EXIT_OK
    finally:
        # Stdin closed, SIGTERM or Ctrl-C: whatever ended the server, export what is left.
        if tracing is not None:
            tracing.shutdown()


async def _serve_stdio(server, tracing) -> None:  # type: ignore[no-untyped-def]
    """Serve until stdin closes or SIGTERM/SIGINT arrives; either way running work is cancelled and its spans
    exported. MCP clients stop stdio servers with close-stdin, then SIGTERM, then SIGKILL."""
    import signal

    import anyio

    stopped = anyio.Event()

    async def stop_on_signal(serving: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                serving.cancel()
                with anyio.move_on_after(GRACE_SECONDS):
                    await stopped.wait()
                if not stopped.is_set():
                    # The stdin reader is a blocking read in a worker thread that no cancellation can
                    # interrupt while the client keeps stdin open. The runs are cancelled by now: export
                    # their spans and leave.
                    if tracing is not None:
                        tracing.shutdown()
                    os._exit(0)
                return

    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as serving:
            tg.start_soon(stop_on_signal, serving)
            try:
                await server.run_stdio_async()
            finally:
                stopped.set()
        tg.cancel_scope.cancel()


async def _run_team(spec, models, request, mode, budgets, on_event):  # type: ignore[no-untyped-def]
    """One run of the team file's team, with its external MCP servers up for the run's duration."""
    from contextlib import nullcontext

    from mcp_team.handoffs import Team
    from mcp_team.specialists.mcp_tools import McpToolPool

    async with McpToolPool(spec.mcp_servers) if spec.mcp_servers else nullcontext() as pool:
        team = Team(models, spec.build(pool), spec.run_settings)
        return await team.run(request, mode=mode, budgets=budgets, on_event=on_event)


def _save_jaeger(tracing, run_id: str, target: str) -> str | None:  # type: ignore[no-untyped-def]
    import shutil

    files = tracing.trace_files if tracing is not None else None
    if files is None or not files.path_for(run_id).is_file():
        return None
    shutil.copyfile(files.path_for(run_id), target)
    return target


def _trace(args: argparse.Namespace) -> int:
    import shutil
    from pathlib import Path

    from mcp_team.telemetry.jaeger import load_trace_file
    from mcp_team.telemetry.waterfall import render_waterfall

    path = Path(args.run)
    if not path.is_file():
        directory = args.dir or os.environ.get("MCP_TEAM_TRACE_DIR")
        if not directory:
            return _error(
                "no trace directory: pass --dir DIR or set MCP_TEAM_TRACE_DIR (where `run`/`serve` "
                "wrote traces with --trace-dir), or give the path of a trace file"
            )
        path = Path(directory) / f"{args.run}.json"
        if not path.is_file():
            known = sorted(p.stem for p in Path(directory).glob("*.json"))[-5:]
            return _error(
                f"no trace for run '{args.run}' in {directory}"
                + (f" (latest: {', '.join(known)})" if known else " (it is empty)"),
                EXIT_FAILED,
            )
    try:
        doc = load_trace_file(path)
    except (OSError, ValueError) as exc:
        return _error(f"{path} is not a usable trace file: {exc}", EXIT_FAILED)
    print("\n".join(render_waterfall(doc, width=args.width)))
    if args.jaeger_json:
        shutil.copyfile(path, args.jaeger_json)
        print(f"mcp-team: wrote {args.jaeger_json} (Jaeger UI: Search > Upload > JSON File)", file=sys.stderr)
    return EXIT_OK


def _init(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mcp_team.server.teamfile import PRESETS, preset_text, render_team_file

    if args.list:
        for name in PRESETS:
            print(name)
        return EXIT_OK
    path = Path(args.path)
    if path.exists() and not args.force:
        return _error(f"{path} already exists; pass --force to overwrite it", EXIT_USAGE)
    text = preset_text(args.preset) if args.preset else render_team_file()
    path.write_text(text, encoding="utf-8")
    print(f"mcp-team: wrote {path}" + (f" (preset {args.preset})" if args.preset else ""), file=sys.stderr)
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from mcp_team.llm.settings import ConfigError
    from mcp_team.server.teamfile import load_team

    try:
        spec = load_team(args.path)
        team = spec.build(None, lenient=True)
    except ConfigError as exc:
        print(f"mcp-team: {exc}", file=sys.stderr)
        return EXIT_FAILED
    table = Table(title=f"{spec.source}: {len(team)} specialists, {spec.run_settings.mode} mode")
    table.add_column("name", no_wrap=True)
    table.add_column("description", ratio=3)
    table.add_column("tools", ratio=1)
    for column in ("max turns", "token budget", "model role"):
        table.add_column(column, no_wrap=True)
    grants = {s.name: s.tools for s in spec.model.specialists} if spec.model else {}
    for s in team:
        tools = grants.get(s.name) or [t.name for t in s.tools]
        table.add_row(
            s.name, s.description, ", ".join(tools) or "-", str(s.max_turns), str(s.max_tokens or "-"), s.model_role
        )
    console = Console()
    if not console.is_terminal:
        console.width = 140  # piped or captured: rich would assume 80 columns
    console.print(table)
    if spec.mcp_servers:
        print("MCP servers: " + ", ".join(m.name for m in spec.mcp_servers))
    return EXIT_OK


def _progress(console):  # type: ignore[no-untyped-def]
    async def on_event(event: RunEvent) -> None:
        r = event.record
        if event.kind == "handoff_started" and r is not None:
            retry = f" (retry {r.attempt - 1})" if r.attempt > 1 else ""
            console.print(f"[cyan]→ {r.id} {r.target}{retry}[/cyan] {_short(r.task)}")
        elif event.kind == "handoff_finished" and r is not None:
            seconds = (r.ended_at - r.started_at).total_seconds() if r.ended_at and r.started_at else 0.0
            if r.status == "completed":
                verdict = f" {r.verdict.verdict}" if r.verdict else ""
                tokens = r.usage.total_tokens
                console.print(f"[green]✓ {r.id} {r.target}[/green]{verdict} {seconds:.1f}s {tokens} tokens")
            else:
                console.print(f"[red]✗ {r.id} {r.target} {r.status} ({r.error_type})[/red] {_short(r.error or '')}")
        else:
            console.print(f"[dim]· {event.message}[/dim]")

    return on_event


def _summary(console, result: RunResult) -> None:  # type: ignore[no-untyped-def]
    style = {"complete": "green", "partial": "yellow"}.get(result.status, "red")
    u = result.usage
    console.print(
        f"[{style}]{result.status}[/{style}]: {len(result.handoffs)} handoffs, {u.model_calls} model calls, "
        f"{u.total.total_tokens} tokens, run {result.run_id}"
        + (f", trace {result.trace_id}" if result.trace_id else "")
    )


def _short(text: str, width: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _error(message: str, code: int = EXIT_USAGE) -> int:
    print(f"mcp-team: error: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
