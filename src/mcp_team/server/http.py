"""Streamable HTTP: bearer-token auth, allowed hosts/origins (DNS-rebinding protection), `/healthz`,
resumable SSE streams (an event store) and a limit on the size of a JSON-RPC message.

Loopback binds work without a token. Any other bind address needs a bearer token and explicit
allowed hosts and origins, or the server refuses to start. An empty token is refused: it would let
anyone in while looking configured.
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import Any

from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse

from mcp_team.errors import ConfigError
from mcp_team.server.events import DEFAULT_MAX_BYTES, RETRY_MS, MemoryEventStore, scope_per_session
from mcp_team.server.messages import check_http_bodies
from mcp_team.server.views import add_run_pages

_LOCAL_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
_LOCAL_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


class HttpSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MCP_TEAM_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    http_token: SecretStr | None = Field(default=None, description="Bearer token clients must send.")
    allowed_hosts: list[str] = Field(default_factory=list, description="Extra Host header values, e.g. team.example:*")
    allowed_origins: list[str] = Field(default_factory=list, description="Extra Origin values.")
    max_message_bytes: int = Field(
        default=4 * 1024 * 1024, ge=1024, description="Largest JSON-RPC message a client may POST (413 above)."
    )
    event_store_bytes: int = Field(
        default=DEFAULT_MAX_BYTES, ge=1024 * 1024, description="Memory kept for clients to resume SSE streams."
    )

    @field_validator("http_token")
    @classmethod
    def _token_not_blank(cls, token: SecretStr | None) -> SecretStr | None:
        if token is not None and not token.get_secret_value().strip():
            raise ValueError("MCP_TEAM_HTTP_TOKEN is set but empty: set a token, or unset the variable")
        return token


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class StaticTokenVerifier(TokenVerifier):
    """Accepts exactly one bearer token (compared in constant time)."""

    def __init__(self, token: SecretStr) -> None:
        self._token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._token.get_secret_value().encode()):
            return AccessToken(token="[redacted]", client_id="mcp-team-client", scopes=["mcp-team"])
        return None


def check_bind(settings: HttpSettings) -> None:
    """Refuse a non-loopback bind without a token and explicit hosts and origins (`ConfigError`)."""
    if is_loopback(settings.host):
        return
    missing = []
    if settings.http_token is None:
        missing.append("a bearer token (MCP_TEAM_HTTP_TOKEN)")
    if not settings.allowed_hosts:
        missing.append("the allowed Host values (MCP_TEAM_ALLOWED_HOSTS, e.g. '[\"team.example.com:*\"]')")
    if not settings.allowed_origins:
        missing.append("the allowed Origin values (MCP_TEAM_ALLOWED_ORIGINS)")
    if missing:
        raise ConfigError(f"binding to {settings.host} (not loopback) needs " + " and ".join(missing))


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
    server: MCPServer[Any], settings: HttpSettings, auth: tuple[TokenVerifier, AuthSettings] | None = None
) -> Starlette:
    """The ASGI app for `server` with DNS-rebinding protection, a `/healthz` route (no auth) and the run pages
    (`/runs`, `/runs/{id}`: same checks as `/mcp`). `auth`: the token verifier `server` was built with, when it
    is not the static token of `settings` (`ConfigError` if the server checks tokens and the pages would not)."""
    pages_auth = auth or auth_for(settings)
    if pages_auth is None and server.settings.auth is not None:
        raise ConfigError(
            "this server checks tokens (build_server(auth=...)) but its run pages (/runs) would not: pass the same "
            "`auth` to http_app"
        )

    @server.custom_route("/healthz", methods=["GET"])
    async def healthz(_request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "server": "mcp-team"})

    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*_LOCAL_HOSTS, *settings.allowed_hosts],
        allowed_origins=[*_LOCAL_ORIGINS, *settings.allowed_origins],
    )
    add_run_pages(server, security, pages_auth)
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
    return app
