"""Where a run can be watched: the run view (`server/views/ui/`) as an MCP App and as pages of the HTTP server.

- MCP Apps (`io.modelcontextprotocol/ui`): `run_view_app()` is the extension that serves the view as
  `ui://mcp-team/run-view.html`; a tool whose `_meta` is `RUN_VIEW_META` is shown with it by hosts that
  render Apps (others ignore the `_meta` and see the same result as ever).
- HTTP: `add_run_pages()` serves `/runs` (recent runs), `/runs/{id}`, and their JSON (`/runs.json`,
  `/runs/{id}.json`), read through the server's own `team://runs` resources: one source of truth. They
  sit behind the same Host/Origin checks and bearer token as `/mcp` (the token may also come as the
  password of HTTP Basic auth, so a browser can log in).
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.apps import Apps, ResourceCsp
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp_types import InputRequiredResult
from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from mcp_team.errors import ConfigError, message_of
from mcp_team.server.views import ui

RUN_VIEW_URI = "ui://mcp-team/run-view.html"
RUN_VIEW_META: dict[str, Any] = {"ui": {"resourceUri": RUN_VIEW_URI}}
"""The `_meta` of a tool whose result is a run: hosts with MCP Apps show it in the run view."""

# The pages are inline-only: nothing loads from anywhere, data comes from this origin.
_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
_PAGE_HEADERS = {"Content-Security-Policy": _CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
_JSON_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


class ViewSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MCP_TEAM_", extra="ignore")

    trace_ui_url: str | None = Field(
        default=None,
        description="Where trace ids link to: a trace UI's base URL (Jaeger: http://localhost:16686, linked as "
        "{base}/trace/{trace_id}) or a URL with {trace_id} in it.",
    )

    @field_validator("trace_ui_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https://, got {value!r}")
        return value or None

    def trace_link(self) -> str | None:
        """The link template for a trace id (`{trace_id}` in it), if a trace UI is configured."""
        url = self.trace_ui_url
        if url is None or "{trace_id}" in url:
            return url
        return url.rstrip("/") + "/trace/{trace_id}"


def view_settings() -> ViewSettings:
    try:
        return ViewSettings()
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {message_of(e)}" for e in exc.errors())
        raise ConfigError(f"invalid MCP_TEAM_TRACE_UI_URL: {problems}") from None


def run_view_app(settings: ViewSettings | None = None) -> Apps:
    """The MCP Apps extension serving the run view; pass it to `MCPServer(extensions=[...])`."""
    settings = settings or view_settings()
    apps = Apps()
    apps.add_html_resource(
        RUN_VIEW_URI,
        ui.page({"mode": "app", "runId": None, "traceUrl": settings.trace_link()}),
        name="run-view",
        title="Team run",
        description="A run of the team as it happens: handoffs on a timeline, failures, retries, tokens.",
        csp=ResourceCsp(),  # no connections, no outside resources: it reads runs through the host
        prefers_border=True,
    )
    return apps


Endpoint = Callable[[Request], Awaitable[Response]]
Permits = Callable[[AccessToken], bool]


def add_run_pages(
    server: MCPServer[Any],
    security: TransportSecuritySettings,
    auth: tuple[TokenVerifier, AuthSettings] | None,
    settings: ViewSettings | None = None,
    *,
    permits: Permits | None = None,
) -> None:
    """Serve the run view at /runs and /runs/{id} (and their JSON) on `server`'s HTTP app, behind
    `security`'s Host/Origin checks and, when `auth` is set, the same token check as `/mcp`: `auth`'s
    required scopes, or (OAuth, whose scopes are per request) what `permits` allows. Call it before
    `server.streamable_http_app()`."""
    trace_link = (settings or view_settings()).trace_link()
    guard = _Guard(TransportSecurityMiddleware(security), auth, permits)

    async def runs_json(_request: Request) -> Response:
        return await _resource_json(server, "team://runs")

    async def run_json(request: Request) -> Response:
        return await _resource_json(server, f"team://runs/{request.path_params['run_id']}")

    async def runs_page(_request: Request) -> Response:
        return HTMLResponse(ui.page({"mode": "http", "runId": None, "traceUrl": trace_link}), headers=_PAGE_HEADERS)

    async def run_page(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            await server.read_resource(f"team://runs/{run_id}")
            status = 200
        except ResourceNotFoundError:  # the view says so and offers the others; the status tells a script
            status = 404
        config = {"mode": "http", "runId": run_id, "traceUrl": trace_link}
        return HTMLResponse(ui.page(config), status_code=status, headers=_PAGE_HEADERS)

    # The JSON routes first: "/runs/{run_id}" would also match "/runs/x.json".
    for path, endpoint in (
        ("/runs.json", runs_json),
        ("/runs/{run_id}.json", run_json),
        ("/runs", runs_page),
        ("/runs/{run_id}", run_page),
    ):
        server.custom_route(path, methods=["GET"], include_in_schema=False)(guard(endpoint))


async def _resource_json(server: MCPServer[Any], uri: str) -> Response:
    try:
        result = await server.read_resource(uri)
    except ResourceNotFoundError as exc:  # no such run (any more)
        return PlainTextResponse(str(exc), status_code=404, headers=_JSON_HEADERS)
    except ResourceError as exc:
        return PlainTextResponse(str(exc), status_code=500, headers=_JSON_HEADERS)
    if isinstance(result, InputRequiredResult):  # not for these resources; never sent to a browser
        return PlainTextResponse(f"{uri} cannot be read over plain HTTP", status_code=500, headers=_JSON_HEADERS)
    return Response(next(iter(result)).content, media_type="application/json", headers=_JSON_HEADERS)


class _Guard:
    """Wraps a route in the checks `/mcp` has: Host and Origin (DNS rebinding), then the bearer token.

    `custom_route`s of the SDK have neither, so each page and JSON route goes through here."""

    def __init__(
        self,
        security: TransportSecurityMiddleware,
        auth: tuple[TokenVerifier, AuthSettings] | None,
        permits: Permits | None = None,
    ) -> None:
        self._security = security
        self._auth = auth
        self._permits = permits

    def __call__(self, endpoint: Endpoint) -> Endpoint:
        async def guarded(request: Request) -> Response:
            refused = await self._security.validate_request(request, is_post=False)
            if refused is not None:
                return refused
            if self._auth is None:
                return await endpoint(request)
            access = await self._authorized(request, *self._auth)
            if access is not None and self._permits is not None and not self._permits(access):
                access = None
            if access is None:
                what = "an access token of this server's issuer, with the scope to read runs," if self._permits \
                    else "the server's token (MCP_TEAM_HTTP_TOKEN)"  # fmt: skip
                return PlainTextResponse(
                    f"unauthorized: send {what} as 'Authorization: Bearer <token>', or as the password when the "
                    "browser asks",
                    status_code=401,
                    headers={"WWW-Authenticate": 'Basic realm="mcp-team", charset="UTF-8"'},
                )
            # As on /mcp: the caller's token is in context while the page reads the runs, so it shows theirs.
            caller = auth_context_var.set(AuthenticatedUser(access))
            try:
                return await endpoint(request)
            finally:
                auth_context_var.reset(caller)

        return guarded

    @staticmethod
    async def _authorized(request: Request, verifier: TokenVerifier, settings: AuthSettings) -> AccessToken | None:
        """The caller's valid token with the required scopes, or None."""
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        token = None
        if scheme.lower() == "bearer":
            token = credentials.strip()
        elif scheme.lower() == "basic":
            try:
                token = base64.b64decode(credentials.strip(), validate=True).decode().partition(":")[2]
            except (binascii.Error, UnicodeDecodeError):
                return None
        access = await verifier.verify_token(token) if token else None
        if access is None or (access.expires_at is not None and access.expires_at < time.time()):
            return None
        return access if all(scope in access.scopes for scope in settings.required_scopes or []) else None
