"""`mcp-team serve`: the team over MCP, on stdio (the default) or streamable HTTP.

Clients spawn `mcp-team serve` at every launch, so what this imports before `initialize` is answered
is what the cold-start benchmark measures.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import TYPE_CHECKING

from mcp_team.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    auth_flags,
    call_timeout_flag,
    check_faults,
    error,
    log_to_stderr,
    model_flags,
    register_secrets,
    start_tracing,
    team_flag,
    trace_flags,
)
from mcp_team.cli.runs import durable_config, durable_flags

if TYPE_CHECKING:
    import socket

    from mcp.server.mcpserver import MCPServer

    from mcp_team.cli.common import Subparsers
    from mcp_team.runs.service import Runs
    from mcp_team.server.oauth.resource import ResourceServer
    from mcp_team.server.runs import ServerRuns
    from mcp_team.server.state import ServerState
    from mcp_team.telemetry.setup import Tracing

EXIT_STARTUP_FAILED = 3  # uvicorn's code when the app does not start
GRACE_SECONDS = 1.0  # after SIGTERM, how long running work gets to wind down


def add_parsers(sub: Subparsers) -> None:
    serve = sub.add_parser("serve", help="serve the team over MCP (stdio by default)")
    model_flags(serve)
    team_flag(serve)
    call_timeout_flag(serve)
    trace_flags(serve)
    serve.add_argument("--watch", action="store_true", help="reload the team when its file changes")
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    serve.add_argument("--host", help="HTTP bind address (default 127.0.0.1; others need a token: docs/operating.md)")
    serve.add_argument("--port", type=int, help="HTTP port (default 8765)")
    serve.add_argument(
        "--shutdown-timeout",
        type=int,
        metavar="SECONDS",
        help="HTTP: seconds calls still in progress get to end after SIGTERM before they are cut (a second "
        "SIGTERM cuts them at once); open streams end at once (default: $MCP_TEAM_SHUTDOWN_TIMEOUT, else 5)",
    )
    auth_flags(serve)
    durable_flags(serve)
    serve.set_defaults(handler=serve_command)


def serve_command(args: argparse.Namespace) -> int:
    import anyio
    from pydantic import ValidationError

    from mcp_team.cli.settings import model_settings, process_settings, settings_problems, team_spec
    from mcp_team.telemetry.content import register_secret

    http_only = ("host", "port", "shutdown_timeout", "auth_issuer", "public_url")
    if not args.http and (given := [f"--{f.replace('_', '-')}" for f in http_only
                                  if getattr(args, f) is not None]):  # fmt: skip
        # A warning, not an error: a client's config with a stray --port must still start its stdio server.
        verb = "applies" if len(given) == 1 else "apply"
        print(f"mcp-team: {' and '.join(given)} {verb} only with --http: serving over stdio, add --http for HTTP",
              file=sys.stderr)  # fmt: skip
    log_to_stderr()
    try:
        settings = model_settings(args)
        if settings.configured_backend() in (None, "sampling"):
            print(
                "mcp-team: no model configured; tools will run on the client's model through MCP sampling",
                file=sys.stderr,
            )
        elif settings.backend() == "offline":
            print("mcp-team: offline backend: deterministic answers, no LLM is called", file=sys.stderr)
        from mcp_team.server.surface.limits import ServerLimits
        from mcp_team.server.views.run_view import view_settings

        spec = team_spec(args)
        limits, views = ServerLimits(), view_settings()  # read once, here: the app and the run pages share them
        durable = durable_config(args)  # opened in the background once the server answers (see server/runs.py)
        register_secrets(settings, spec)
        check_faults(settings, spec)
        http, oauth = None, None
        if args.http:
            from mcp_team.server.oauth.settings import OAuthSettings
            from mcp_team.server.transports.http import HttpSettings, check_bind

            flags = {"host": args.host, "port": args.port, "shutdown_timeout": args.shutdown_timeout,
                     "public_url": args.public_url}  # fmt: skip
            overrides = {k: v for k, v in flags.items() if v is not None}
            http = HttpSettings(**overrides)
            oauth = OAuthSettings(**({"issuer": args.auth_issuer} if args.auth_issuer is not None else {}))
            check_bind(http, oauth)
            if durable is not None:  # an HTTP server is not spawned per client: check now, fail before serving
                from mcp_team.runs.launch import check

                check(durable)
            if http.http_token is not None:
                register_secret(http.http_token.get_secret_value())
            if oauth.introspection_client_secret is not None:
                register_secret(oauth.introspection_client_secret.get_secret_value())
        tracing = start_tracing(args)
    except ValidationError as exc:  # a ConfigError reaches main(), which says it the same way
        from mcp_team.server.oauth.settings import OAuthSettings
        from mcp_team.server.surface.limits import ServerLimits
        from mcp_team.server.transports.http import HttpSettings

        problems = settings_problems(exc, HttpSettings, ServerLimits, OAuthSettings)
        return error(f"invalid settings: {'; '.join(problems)}", EXIT_USAGE)

    from mcp_team.server.app import build_server
    from mcp_team.server.runs import OPEN_DELAY, ServerRuns

    try:
        if http is None:
            opened = ServerRuns(durable, on_open=say_resumed)
            server = build_server(
                settings, spec, watch=args.watch, tracing=tracing, limits=limits, durable=opened, views=views
            )
            anyio.run(_serve_stdio, server, tracing, process_settings(args).max_message_bytes, opened)
        else:
            from mcp_team.server.transports.http import HttpServer, auth_for, resource_server

            assert oauth is not None
            sockets = listen(http.host, http.port)  # before saying it serves: a port in use is a usage error
            port = sockets[0].getsockname()[1]
            resource = resource_server(http, oauth, port)  # with the port bound: the canonical URL may name it
            opened = ServerRuns(durable, open_delay=OPEN_DELAY, on_open=say_resumed)
            auth = resource.auth if resource is not None else auth_for(http)
            server = build_server(
                settings, spec, auth=auth, watch=args.watch, tracing=tracing, limits=limits, durable=opened, views=views
            )
            if resource is not None:
                say_issuer(resource)
            base = f"http://{http.host}:{port}"
            print(f"mcp-team: serving streamable HTTP on {base}/mcp; runs at {base}/runs", file=sys.stderr)
            # The run service is told first that the calls the stop cancels leave their runs to resume.
            served = HttpServer(
                server,
                http,
                port,
                on_signal=opened.stopping,
                before_exit=tracing.shutdown if tracing is not None else None,  # bounded, as in `finally` below
                oauth=resource,
                views=views,
            )
            opened.liveness.on_death(lambda: setattr(served, "should_exit", True))  # a part died: stop, exit 1
            with contextlib.suppress(KeyboardInterrupt):  # as uvicorn.run: Ctrl-C stops the server, cleanly
                served.run(sockets=sockets)
            if not served.started:  # the app's start-up failed (uvicorn said why)
                return EXIT_STARTUP_FAILED
        if opened.liveness.dead is not None:  # said as it happened; said again as the last line, with the exit
            return error(f"stopped: {opened.liveness.dead}", EXIT_FAILED)
        if opened.error is not None:
            # Durable runs could not open (calls got the error meanwhile): the client's user fixes the flags.
            return error(opened.error, EXIT_USAGE)
        return EXIT_OK
    finally:
        # Stdin closed, SIGTERM or Ctrl-C: whatever ended the server, export what is left.
        if tracing is not None:
            tracing.shutdown()


def say_resumed(runs: Runs) -> None:
    """Say which runs an earlier process left running and what became of each (resumed here, or finished as they
    had ended), once the run service is open: their model calls are no surprise then."""
    for settled in runs.recovered:
        print(f"mcp-team: {settled.describe()}", file=sys.stderr, flush=True)


def say_issuer(resource: ResourceServer) -> None:
    """Say what the OAuth set-up is, and whether the issuer answers now: serving goes on either way (tokens are
    refused, the log saying why, until it does), so a cluster can start before its issuer."""
    import anyio

    from mcp_team.server.oauth.issuer import probe
    from mcp_team.server.oauth.metadata import DiscoveryError

    print(f"mcp-team: OAuth: tokens of {resource.issuer.url} for {resource.resource} (metadata at "
          f"{resource.metadata_url})", file=sys.stderr)  # fmt: skip
    try:
        anyio.run(probe, resource.settings)
    except DiscoveryError as exc:
        print(f"mcp-team: warning: {exc}; tokens are refused until the issuer answers (check the set-up with "
              "`mcp-team check --http`)", file=sys.stderr)  # fmt: skip


def listen(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to `host`:`port` for uvicorn to serve on, one per address the name has, as asyncio's
    `create_server` (which uvicorn uses when given none) binds them. Bound here, where a failure is a clear
    `ConfigError` naming the fix; uvicorn logs the OS error, then exits 3."""
    import errno
    import socket

    from mcp_team.errors import ConfigError

    sockets: list[socket.socket] = []
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        where = f"{host}:{port}"
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"cannot serve on {where}: the port is in use (address already in use), likely by another server; "
                f"choose another with --port (or MCP_TEAM_PORT)"
            ) from None
        raise ConfigError(f"cannot serve on {where}: {exc.strerror or exc}; check --host and --port") from None
    return sockets


async def _serve_stdio(
    server: MCPServer[ServerState], tracing: Tracing | None, limit: int | None, opened: ServerRuns
) -> None:
    """Serve until stdin closes or SIGTERM/SIGINT arrives; either way running work is cancelled and its spans
    exported. MCP clients stop stdio servers with close-stdin, then SIGTERM, then SIGKILL. Every line is checked
    by the stdio gate (server/transports/stdio.py): a bad or oversized one is answered with a JSON-RPC error."""
    import signal

    import anyio

    from mcp_team.server.transports.stdio import serve_stdio

    stopped = anyio.Event()

    async def stop_on_signal(serving: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                opened.stopping()  # a stop, not the client: the runs of calls cancelled now resume later
                serving.cancel()
                with anyio.move_on_after(GRACE_SECONDS):
                    await stopped.wait()
                if not stopped.is_set():
                    # The stdin reader is a blocking read in a worker thread that no cancellation can
                    # interrupt while the client keeps stdin open. The runs are cancelled by now: export
                    # their spans and leave. The SDK's teardown of the external MCP servers (close stdin,
                    # 2 s, SIGTERM, 2 s, SIGKILL) is cut short by the exit: kill them, or one slow to exit
                    # outlives this process.
                    from mcp_team.server.children import exit_now

                    exit_now(tracing.shutdown if tracing is not None else None)
                return

    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as serving:
            tg.start_soon(stop_on_signal, serving)
            opened.liveness.on_death(serving.cancel)  # a part died: stop serving, exit 1
            try:
                await serve_stdio(server, limit=limit)
            finally:
                stopped.set()
        tg.cancel_scope.cancel()
