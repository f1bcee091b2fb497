"""The authorization server as this server talks to it: one HTTP client, its metadata (looked up on first
use and kept), its JWK Set, its introspection endpoint.

Looked up lazily: a server starts while its issuer is briefly away (a whole cluster restarting at once), and
tokens are refused, with the reason in the log, until the issuer answers; a failed lookup is tried again after
`RETRY_SECONDS`, not on every request.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx2

from mcp_team.server.oauth.jwks import RETRY_SECONDS
from mcp_team.server.oauth.metadata import DiscoveryError, IssuerMetadata, discover, fetch_json
from mcp_team.server.oauth.settings import OAuthSettings


class Issuer:
    def __init__(self, settings: OAuthSettings) -> None:
        assert settings.issuer is not None
        self.settings = settings
        self.url: str = settings.issuer
        self._http: httpx2.AsyncClient | None = None
        self._metadata: IssuerMetadata | None = None
        self._failed: tuple[float, str] | None = None  # when the last lookup failed, and why
        self._lock = anyio.Lock()

    @property
    def http(self) -> httpx2.AsyncClient:
        if self._http is None:  # made in the serving event loop, on first use
            self._http = httpx2.AsyncClient(timeout=self.settings.timeout_seconds, follow_redirects=False)
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def metadata(self) -> IssuerMetadata:
        """The issuer's metadata, or `DiscoveryError` (the last failure's, until it is time to try again)."""
        if self._metadata is not None:
            return self._metadata
        async with self._lock:
            if self._metadata is not None:
                return self._metadata
            if self._failed is not None and time.monotonic() - self._failed[0] < RETRY_SECONDS:
                raise DiscoveryError(self._failed[1])
            try:
                self._metadata = await discover(self.url, self.http)
            except DiscoveryError as exc:
                self._failed = (time.monotonic(), str(exc))
                raise
            return self._metadata

    async def jwks(self) -> dict[str, Any]:
        metadata = await self.metadata()
        if not metadata.jwks_uri:
            raise DiscoveryError(
                f"the issuer's metadata ({metadata.source}) names no jwks_uri, so its tokens cannot be checked as "
                "JWTs; set up introspection (MCP_TEAM_AUTH_INTROSPECTION_CLIENT_ID and _SECRET)"
            )
        return await fetch_json(self.http, metadata.jwks_uri, "the issuer's JWK Set")

    async def introspection_endpoint(self) -> str:
        if self.settings.introspection_endpoint:
            return self.settings.introspection_endpoint
        metadata = await self.metadata()
        if not metadata.introspection_endpoint:
            raise DiscoveryError(
                f"the issuer's metadata ({metadata.source}) names no introspection_endpoint; set "
                "MCP_TEAM_AUTH_INTROSPECTION_ENDPOINT"
            )
        return metadata.introspection_endpoint

    async def introspect(self, token: str) -> dict[str, Any]:
        """RFC 7662: what the issuer says of `token`, asked as the configured client (HTTP Basic)."""
        settings = self.settings
        assert settings.introspection_client_id is not None and settings.introspection_client_secret is not None
        url = await self.introspection_endpoint()
        try:
            response = await self.http.post(
                url,
                data={"token": token, "token_type_hint": "access_token"},
                auth=(settings.introspection_client_id, settings.introspection_client_secret.get_secret_value()),
                headers={"accept": "application/json"},
            )
        except httpx2.HTTPError as exc:
            raise DiscoveryError(f"the introspection endpoint {url} could not be reached ({exc})") from None
        if response.status_code != 200:
            json_body = response.headers.get("content-type", "").startswith("application/json")
            said = response.text[:200] if json_body else ""
            raise DiscoveryError(
                f"the introspection endpoint {url} answered HTTP {response.status_code} {said}".rstrip()
                + (" (is the introspection client's id and secret right?)" if response.status_code == 401 else "")
            )
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise DiscoveryError(f"the introspection endpoint {url} answered something other than a JSON object")
        return answer


async def probe(settings: OAuthSettings) -> list[str]:
    """Ask the issuer what serving needs of it, as `serve` would on the first token: its metadata, then its JWK
    Set (its usable signing keys counted) or its introspection endpoint. Lines saying what was found, or
    `DiscoveryError` saying what is missing."""
    from jwt import PyJWKSet, PyJWTError

    issuer = Issuer(settings)
    try:
        metadata = await issuer.metadata()
        lines = [f"issuer metadata: {metadata.source} (reachable, issuer matches)"]
        if settings.introspects:
            lines.append(f"introspection endpoint: {await issuer.introspection_endpoint()}")
            return lines
        document = await issuer.jwks()
        try:
            keys = [k for k in PyJWKSet.from_dict(document) if k.public_key_use in (None, "sig")]
        except PyJWTError as exc:
            raise DiscoveryError(f"the issuer's JWK Set ({metadata.jwks_uri}) has no usable key: {exc}") from None
        algorithms = sorted({k.algorithm_name for k in keys})
        lines.append(f"signing keys: {len(keys)} at {metadata.jwks_uri} ({', '.join(algorithms)})")
        if refused := [a for a in algorithms if a not in settings.algorithms]:
            lines.append(f"warning: keys for {', '.join(refused)}, which MCP_TEAM_AUTH_ALGORITHMS does not accept")
        return lines
    finally:
        await issuer.aclose()
