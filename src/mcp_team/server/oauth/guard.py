"""The HTTP side of the resource server: the 401 and 403 challenges of `/mcp` and the protected-resource
metadata (RFC 9728), fitted onto the SDK's app (`install`).

What the SDK (mcp 2.3) leaves out, done here in front of its `RequireAuthMiddleware`:
- a 401 names the scopes to ask for (`scope="..."`, which the spec says it SHOULD) and, when no token was sent
  at all, carries no error code (RFC 6750 §3.1; the SDK says `invalid_token` either way);
- per-request scopes: the SDK can require scopes of every request only, so each JSON-RPC message is looked at
  (`ScopePolicy.needs`) and one the token's scopes do not allow gets a 403 `insufficient_scope` naming the scope
  to ask for (the spec's *Runtime Insufficient Scope Errors*; a client steps up and retries);
- the metadata's `scopes_supported` lists every scope the server knows (the SDK's lists only the scopes every
  request needs: none here), and it is served at the root well-known URI too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from mcp.server.auth.settings import AuthSettings
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_team.server.oauth.scopes import ScopePolicy

ROOT_METADATA = "/.well-known/oauth-protected-resource"


class Challenges:
    """The `WWW-Authenticate` values of this server (RFC 6750 §3, with RFC 9728's `resource_metadata`)."""

    def __init__(self, metadata_url: str, usual: list[str]) -> None:
        self.metadata_url = metadata_url
        self.usual = " ".join(usual)

    def header(self, error: str | None = None, description: str | None = None, scope: str | None = None) -> str:
        parts = [f'error="{error}"'] if error else []
        if description:
            parts.append(f'error_description="{description}"')
        parts.append(f'scope="{scope or self.usual}"')
        parts.append(f'resource_metadata="{self.metadata_url}"')
        return "Bearer " + ", ".join(parts)


def guard(app: ASGIApp, policy: ScopePolicy, challenges: Challenges, limit: int) -> ASGIApp:
    """`app` (the SDK's `/mcp` endpoint) behind the challenges: 401 without a valid token, 403 for a message
    the token's scopes do not allow. A body over `limit` is passed on unread: the app refuses it (413)."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        user = scope.get("user")
        if not isinstance(user, AuthenticatedUser):
            if _bearer(scope):  # a token was sent, and the verifier refused it (the log says why)
                header = challenges.header("invalid_token", _WHY_401["invalid_token"])
            else:
                header = challenges.header()
            error = "invalid_token" if _bearer(scope) else "unauthorized"
            await _refuse(send, 401, header, {"error": error, "error_description": _WHY_401[error]})
            return
        if scope["method"] != "POST":
            await app(scope, receive, send)
            return
        read, complete = await _read(receive, limit)

        async def replay() -> Message:
            return read.pop(0) if read else await receive()

        if complete:
            wanted = policy.missing(_messages(b"".join(m.get("body", b"") for m in read)), user.scopes)
            if wanted:
                scopes = " ".join(wanted)
                description = f"This request needs the scope {scopes}"
                header = challenges.header("insufficient_scope", description, scopes)
                await _refuse(send, 403, header, {"error": "insufficient_scope", "error_description": description})
                return
        await app(scope, replay, send)

    return guarded


def install(app: Starlette, auth: AuthSettings, policy: ScopePolicy, limit: int) -> None:
    """Fit the resource server `auth` describes onto the SDK's app (its `/mcp` route and metadata route). The
    URLs are `auth`'s, which keep an empty path empty: the issuer must read exactly as its tokens say it."""
    assert auth.resource_server_url is not None
    metadata_url = str(build_resource_metadata_url(auth.resource_server_url))
    challenges = Challenges(metadata_url, policy.usual)
    ours = create_protected_resource_routes(
        resource_url=auth.resource_server_url,
        authorization_servers=[auth.issuer_url],
        scopes_supported=policy.supported,
        resource_name="mcp-team",
    )
    path = ours[0].path
    routes = app.router.routes
    for i, route in enumerate(routes):
        if isinstance(route, Route) and route.path == "/mcp":
            route.app = guard(route.app, policy, challenges, limit)
        elif isinstance(route, Route) and route.path == path:
            routes[i] = ours[0]
    if path != ROOT_METADATA:  # the root well-known URI too, which clients try last
        routes.append(Route(ROOT_METADATA, endpoint=ours[0].endpoint, methods=["GET", "OPTIONS"]))
    if not any(route is ours[0] for route in routes):  # the SDK served none (it always does in 2.3)
        routes.append(ours[0])


_WHY_401 = {
    "invalid_token": "The access token is invalid, expired, or not for this server",
    "unauthorized": "An access token is required: see resource_metadata for where to get one",
}


def _bearer(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return bool(value[:7].lower() == b"bearer ")
    return False


async def _read(receive: Receive, limit: int) -> tuple[list[Message], bool]:
    """The request's body messages, up to `limit` bytes; True when that is the whole body."""
    read: list[Message] = []
    size = 0
    while size <= limit:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request":
            return read, False
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            return read, size <= limit
    return read, False


def _messages(body: bytes) -> list[Mapping[str, Any]]:
    """The JSON-RPC messages of a body (a batch is several); none when it is not JSON: the SDK says so."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return []
    items = parsed if isinstance(parsed, list) else [parsed]
    return [m for m in items if isinstance(m, Mapping)]


async def _refuse(send: Send, status: int, challenge: str, body: dict[str, str]) -> None:
    content = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(content)).encode()),
                (b"www-authenticate", challenge.encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": content})
