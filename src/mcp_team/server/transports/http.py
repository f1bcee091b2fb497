"""Streamable HTTP: bearer-token auth, allowed hosts/origins (DNS-rebinding protection), `/healthz`,
resumable SSE streams (an event store), a limit on the size of a JSON-RPC message, and stopping promptly with
streams open (`HttpServer`).

Two kinds of auth, one at a time: a static token (`MCP_TEAM_HTTP_TOKEN`) for a server one person uses, or
OAuth 2.1 (`--auth-issuer`, `server/oauth/`) for a server several people use, each seeing their own runs.
Loopback binds work without either. Any other bind address needs one of them and explicit allowed hosts and
origins, or the server refuses to start. An empty token is refused: it would let anyone in while looking
configured.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import signal
import socket
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

import uvicorn
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import ListenHandler
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sse_starlette.sse import AppStatus
from starlette.applications import Starlette
from uvicorn.lifespan.on import LifespanOn

from mcp_team.errors import ConfigError
from mcp_team.server.children import exit_now
from mcp_team.server.lowlevel import lowlevel_of
from mcp_team.server.oauth.settings import OAuthSettings, is_loopback
from mcp_team.server.transports.cors import McpCors
from mcp_team.server.transports.events import DEFAULT_MAX_BYTES, RETRY_MS, MemoryEventStore, scope_per_session
from mcp_team.server.transports.messages import check_http_bodies
from mcp_team.server.views.run_view import ViewSettings, add_run_pages

if TYPE_CHECKING:
    from mcp_team.server.oauth.resource import ResourceServer

_LOCAL_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
_LOCAL_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
SHUTDOWN_TIMEOUT = 5  # seconds held calls get after SIGTERM: under Docker's 10 s and Kubernetes' 30 s before SIGKILL
FORCED_GRACE = 1.0  # seconds a second signal leaves to cut the calls and end the app, before the process just exits


class HttpSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MCP_TEAM_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    http_token: SecretStr | None = Field(default=None, description="Bearer token clients must send.")
    allowed_hosts: list[str] = Field(default_factory=list, description="Extra Host header values, e.g. team.example:*")
    allowed_origins: list[str] = Field(default_factory=list, description="Extra Origin values.")
    cors: bool = Field(
        default=False, description="Answer CORS on /mcp for the allowed origins (server/transports/cors.py)."
    )
    max_message_bytes: int = Field(
        default=4 * 1024 * 1024, ge=1024, description="Largest JSON-RPC message a client may POST (413 above)."
    )
    event_store_bytes: int = Field(
        default=DEFAULT_MAX_BYTES, ge=1024 * 1024, description="Memory kept for clients to resume SSE streams."
    )
    shutdown_timeout: int = Field(  # whole seconds: what uvicorn takes
        default=SHUTDOWN_TIMEOUT, ge=0, le=3600, description="Seconds held calls get to end after SIGTERM (then cut)."
    )
    public_url: str | None = Field(
        default=None,
        description="The URL clients reach /mcp at (behind a proxy: the proxy's), e.g. https://team.example.com/mcp; "
        "with OAuth, the audience every token must name.",
    )

    @field_validator("http_token")
    @classmethod
    def _token_not_blank(cls, token: SecretStr | None) -> SecretStr | None:
        if token is not None and not token.get_secret_value().strip():
            raise ValueError("MCP_TEAM_HTTP_TOKEN is set but empty: set a token, or unset the variable")
        return token


class StaticTokenVerifier(TokenVerifier):
    """Accepts exactly one bearer token (compared in constant time)."""

    def __init__(self, token: SecretStr) -> None:
        self._token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._token.get_secret_value().encode()):
            return AccessToken(token="[redacted]", client_id="mcp-team-client", scopes=["mcp-team"])
        return None


def check_bind(settings: HttpSettings, oauth: OAuthSettings | None = None) -> None:
    """Refuse two kinds of auth at once, and a non-loopback bind without auth, explicit hosts and origins, or
    (with OAuth) the public URL (`ConfigError`)."""
    issuer = oauth.issuer if oauth is not None else None
    if settings.http_token is not None and issuer is not None:
        raise ConfigError(
            "both a static token (MCP_TEAM_HTTP_TOKEN) and an OAuth issuer (--auth-issuer / MCP_TEAM_AUTH_ISSUER) "
            "are set: choose one. The token suits a server one person uses; the issuer, a server several people "
            "use (each with their own runs). Unset the other"
        )
    if is_loopback(settings.host):
        return
    missing = []
    if settings.http_token is None and issuer is None:
        missing.append("auth: an OAuth issuer (--auth-issuer) or a bearer token (MCP_TEAM_HTTP_TOKEN)")
    if issuer is not None and settings.public_url is None:
        missing.append("the URL clients reach it at, the audience of every token (--public-url / MCP_TEAM_PUBLIC_URL)")
    if not settings.allowed_hosts:
        missing.append("the allowed Host values (MCP_TEAM_ALLOWED_HOSTS, e.g. '[\"team.example.com:*\"]')")
    if not settings.allowed_origins:
        missing.append("the allowed Origin values (MCP_TEAM_ALLOWED_ORIGINS)")
    if missing:
        raise ConfigError(f"binding to {settings.host} (not loopback) needs " + " and ".join(missing))


def public_url(settings: HttpSettings, port: int) -> str:
    """The server's canonical URL: as configured, else (a loopback bind) where it listens."""
    if settings.public_url:
        return settings.public_url
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    return f"http://{host}:{port}/mcp"


def resource_server(settings: HttpSettings, oauth: OAuthSettings, port: int) -> ResourceServer | None:
    """The OAuth resource server `oauth` sets up (None without an issuer); `ConfigError` if it cannot be one."""
    if oauth.issuer is None:
        return None
    from mcp_team.server.oauth.resource import resource_server as made

    url = public_url(settings, port)
    try:
        return made(oauth, url)
    except ValueError as exc:
        raise ConfigError(f"invalid public URL (--public-url / MCP_TEAM_PUBLIC_URL): {exc}") from None


def auth_for(settings: HttpSettings) -> tuple[TokenVerifier, AuthSettings] | None:
    """The token verifier and auth settings for `MCPServer`, when a token is configured."""
    if settings.http_token is None:
        return None
    url = f"http://{settings.host}:{settings.port}/mcp"
    auth = AuthSettings.model_validate(
        {
            "issuer_url": url,
            "resource_server_url": url,
            "required_scopes": ["mcp-team"],
            "validate_token_resource": False,
        }
    )
    return StaticTokenVerifier(settings.http_token), auth


def http_app(
    server: MCPServer[Any],
    settings: HttpSettings,
    auth: tuple[TokenVerifier, AuthSettings] | None = None,
    oauth: ResourceServer | None = None,
    views: ViewSettings | None = None,
) -> Starlette:
    """The ASGI app for `server` with DNS-rebinding protection (`/healthz` and `/readyz`, no auth: server/health.py,
    added by `build_server`) and the run pages
    (`/runs`, `/runs/{id}`: same checks as `/mcp`). `auth`: the token verifier `server` was built with, when it
    is not the static token of `settings` (`ConfigError` if the server checks tokens and the pages would not);
    `oauth`: the OAuth resource server `server` was built with (`build_server(auth=oauth.auth)`), whose
    challenges, per-request scopes and metadata go on the app; `views`: the run pages' settings (None: read now)."""
    pages_auth = oauth.auth if oauth is not None else auth or auth_for(settings)
    if pages_auth is None and server.settings.auth is not None:
        raise ConfigError(
            "this server checks tokens (build_server(auth=...)) but its run pages (/runs) would not: pass the same "
            "`auth` to http_app"
        )

    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*_LOCAL_HOSTS, *settings.allowed_hosts],
        allowed_origins=[*_LOCAL_ORIGINS, *settings.allowed_origins],
    )
    add_run_pages(server, security, pages_auth, views, permits=oauth.permits_pages if oauth is not None else None)
    # With an event store every SSE event has an id, each POST stream opens with a priming event and a `retry`,
    # and a client that reconnects with Last-Event-ID gets what it missed (SEP-1699): its own, never another's.
    events = MemoryEventStore(settings.event_store_bytes)
    app = server.streamable_http_app(
        json_response=False,
        transport_security=security,
        host=settings.host,
        event_store=events,
        retry_interval=RETRY_MS,
        max_request_body_size=settings.max_message_bytes,
    )
    scope_per_session(server.session_manager, events)
    check_http_bodies(server.session_manager, security, settings.max_message_bytes)
    if oauth is not None:
        oauth.install(app, settings.max_message_bytes)
    if settings.cors:  # off by default: a browser page on an allowed origin may call /mcp (server/transports/cors.py)
        app.add_middleware(McpCors, origins=security.allowed_origins)
    return app


class HttpServer(uvicorn.Server):
    """uvicorn's server for an MCP app, stopping promptly with streams open.

    On SIGTERM or SIGINT uvicorn stops accepting connections, then waits for every open one to close before it
    ends the app's lifespan (where the SDK would end its sessions): an open stream that never ends by itself (a
    2026-07-28 `subscriptions/listen`, a 2025-11-25 session's GET stream) held the process until its client
    left. Here those streams are ended as the wait begins (`end_streams`); a call still held after the
    settings' `shutdown_timeout` (a run on a client's model, an ephemeral run) is cut by uvicorn, or at once by
    a second SIGTERM or Ctrl-C. Any later point of the stop takes a second signal too: a stop cut short gets
    `FORCED_GRACE` to cut its calls and end the app; a signal that comes as the app's own shutdown runs (its
    external MCP servers closing, seconds for one slow to exit; the run service stopping), which uvicorn waits
    out, ends the process at once (`_exit_now`, killing the external servers still running). A stop asked for
    by signals exits 0, as a clean stop, cut calls or not (uvicorn would raise the signal again once done, and
    the process would die of it without flushing its spans). `on_signal` is told first, in the signal handler.

    Process-wide: sse-starlette's automatic drain is turned off (see `__init__`)."""

    def __init__(
        self,
        server: MCPServer[Any],
        settings: HttpSettings,
        port: int,
        on_signal: Callable[[], None] | None = None,
        before_exit: Callable[[], None] | None = None,
        oauth: ResourceServer | None = None,
        views: ViewSettings | None = None,
    ) -> None:
        app = http_app(server, settings, oauth=oauth, views=views)
        config = uvicorn.Config(
            app, host=settings.host, port=port, log_level="warning", timeout_graceful_shutdown=settings.shutdown_timeout
        )
        config.load()  # sets the lifespan class, which `_serve` would set again if it loaded the config itself
        config.lifespan_class = _AppLifespan
        super().__init__(config)
        self.mcp = server
        self.on_signal = on_signal
        self.before_exit = before_exit  # what an exit at once (`_exit_now`) must still do: flush the spans
        self._loop: asyncio.AbstractEventLoop | None = None  # serving's, for a signal handler to call into
        # sse-starlette (the SDK's 2025-11-25 SSE responses) ends every one of its streams about 0.5 s after
        # uvicorn begins to exit, held POST calls included: their answers (a durable run's id, a run's result)
        # raced that cut, and no call got the shutdown timeout. Its supported switch, process-wide (this server
        # is the whole process): the streams that must end are ended by `end_streams`, the held calls end as
        # their work does, and uvicorn cuts what is left at the timeout. (Nothing sets `AppStatus.should_exit`,
        # which would end them all again.)
        AppStatus.disable_automatic_graceful_drain()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.on_signal is not None:
            self.on_signal()
        # As uvicorn's, without remembering the signal to raise again; a second signal forces the exit, SIGTERM
        # too (uvicorn: only Ctrl-C): hosts and people send SIGTERM again to mean "now".
        if self.should_exit and sig in (signal.SIGINT, signal.SIGTERM):
            self.force_exit = True
            if isinstance(getattr(self, "lifespan", None), _AppLifespan) and self.lifespan.ending and self._loop:
                # Nothing in uvicorn looks at `force_exit` from here on. On the loop, not in the handler: it may
                # have interrupted a logging or span-export lock this thread holds.
                self._loop.call_soon_threadsafe(self._exit_now)
        else:
            self.should_exit = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Refuse new connections before ending the streams (as uvicorn's shutdown does next, again): a client
        # told its stream ended must not open another one here. uvicorn then marks the streams' connections to
        # close once their responses end; the streams end only after that (nothing awaits in between).
        self._loop = asyncio.get_running_loop()
        for listening in getattr(self, "servers", []):
            listening.close()
        end_streams(self.mcp)
        # Kept to the process's end: a cut call ends after uvicorn's shutdown has moved on (its run is cancelled and
        # recorded first), and its cancellation is logged then. Once per logger, however many servers a process runs.
        _CUT_CALLS.timeout = self.config.timeout_graceful_shutdown
        for name in _CutCalls.LOGGERS:
            logging.getLogger(name).removeFilter(_CUT_CALLS)
            logging.getLogger(name).addFilter(_CUT_CALLS)
        await super().shutdown(sockets)
        if self.force_exit:
            try:
                await asyncio.wait_for(self._cut_now(), FORCED_GRACE)
            except TimeoutError:
                self._exit_now()

    async def _wait_tasks_to_complete(self) -> None:
        # uvicorn's graceful wait ends with `wait_closed` on its listening sockets, which since Python 3.12.1 waits
        # for every open connection too (3.11's returned at once) and never looks at `force_exit`: a second signal
        # left the held calls, and the process, waiting out the shutdown timeout. Here a second signal ends the
        # wait as uvicorn's own loops do (polling as they do); `shutdown` then cuts the calls (`_cut_now`).
        wait = asyncio.ensure_future(super()._wait_tasks_to_complete())
        try:
            while not (wait.done() or self.force_exit):
                await asyncio.wait({wait}, timeout=0.1)
        finally:
            wait.cancel()
        if wait.done() and not wait.cancelled():
            wait.result()

    async def _cut_now(self) -> None:
        """After a second signal: cut the calls still in progress, then end the app's lifespan. uvicorn leaves
        both to the event loop's end, which cancels the lifespan too (a traceback, and the SDK's sessions and
        the run service never closed)."""
        if cut := list(self.server_state.tasks):
            logging.getLogger("uvicorn.error").warning(
                "mcp-team: stopping now (a second signal): %s call(s) still in progress were cut", len(cut)
            )
            for task in cut:
                task.cancel()
            await asyncio.wait(cut)
        if not (isinstance(self.lifespan, LifespanOn) and self.lifespan.shutdown_event.is_set()):
            await self.lifespan.shutdown()  # skipped by uvicorn, unless the signal came as it ran

    def _exit_now(self) -> None:
        """End the process at once, exit 0, after a second signal met the app's shutdown still going: the team's
        external MCP servers are killed (SIGKILL: the SDK's teardown that would stop them is skipped, and one
        that ignores its stdin closing would outlive the process); the rest is left as a crash leaves it (a
        durable run resumes at the next start). `before_exit` runs next (the spans' flush, bounded), as the stop
        would at its end."""
        logging.getLogger("uvicorn.error").warning(
            "mcp-team: stopping now (a second signal): external MCP servers still running are killed; what else "
            "was still closing (calls, the run service) is left as a crash leaves it"
        )
        exit_now(self.before_exit)


class _AppLifespan(LifespanOn):
    """uvicorn's lifespan, telling when the app's shutdown has begun (from then on a second signal exits)."""

    ending = False

    async def shutdown(self) -> None:
        self.ending = True
        await super().shutdown()


class _CutCalls(logging.Filter):
    """Calls cut at the shutdown timeout, said in one line naming the setting, not as uvicorn's traceback of
    the cancellation of each, nor as the SDK's warning that it could not answer a cut 2025-11-25 call (its
    stream went with it)."""

    LOGGERS = ("uvicorn.error", "mcp.shared.jsonrpc_dispatcher")

    def __init__(self, timeout: int | None) -> None:
        super().__init__()
        self.timeout = timeout

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError):
            return False  # "Exception in ASGI application": the cut call, already told of
        if record.msg == "%s gave up: transport write blocked" and str(record.args).count("shutdown error response"):
            return False
        if isinstance(record.msg, str) and record.msg.startswith("Cancel %s running task"):
            cut = record.args[0] if isinstance(record.args, tuple) and record.args else "some"
            record.msg = (
                "mcp-team: %s call(s) still in progress %s s after the stop were cut; to give them longer, raise "
                "MCP_TEAM_SHUTDOWN_TIMEOUT (--shutdown-timeout)"
            )
            record.args = (cut, self.timeout)
        return True


_CUT_CALLS = _CutCalls(None)


def end_streams(server: MCPServer[Any]) -> None:
    """End the streams of `server`'s HTTP app that never end by themselves: each 2026-07-28 `subscriptions/listen`
    stream ends with its result (the spec's graceful closure: the client knows it was ended, not dropped), and
    each 2025-11-25 session's GET stream ends (a client may reconnect with Last-Event-ID, to a server that
    starts again). Calls in progress are left to end as their work does: a durable run's held call is told its
    run goes on at the next start (see `Runs.run`)."""
    entry = lowlevel_of(server).get_request_handler("subscriptions/listen")
    if entry is not None and isinstance(entry.handler, ListenHandler):
        entry.handler.close()
    # The sessions are private in SDK 2.3 (see `events.scope_per_session`); closing a GET stream is public.
    for transport in list(server.session_manager._server_instances.values()):
        transport.close_standalone_sse_stream()
