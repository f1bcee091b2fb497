"""Streamable HTTP: bearer-token auth, allowed hosts/origins (DNS-rebinding protection) and `/healthz`.

Loopback binds work without a token. Any other bind address needs a bearer token and explicit
allowed hosts and origins, or the server refuses to start.
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import Any

from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse

from mcp_team.llm.settings import ConfigError

_LOCAL_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
_LOCAL_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


class HttpSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MCP_TEAM_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    http_token: SecretStr | None = Field(default=None, description="Bearer token clients must send.")
    allowed_hosts: list[str] = Field(default_factory=list, description="Extra Host header values, e.g. team.example:*")
    allowed_origins: list[str] = Field(default_factory=list, description="Extra Origin values.")


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


def http_app(server: MCPServer[Any], settings: HttpSettings) -> Starlette:
    """The ASGI app for `server` with DNS-rebinding protection and a `/healthz` route (no auth)."""

    @server.custom_route("/healthz", methods=["GET"])
    async def healthz(_request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "server": "mcp-team"})

    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*_LOCAL_HOSTS, *settings.allowed_hosts],
        allowed_origins=[*_LOCAL_ORIGINS, *settings.allowed_origins],
    )
    return server.streamable_http_app(json_response=False, transport_security=security, host=settings.host)
