"""The authorization server's metadata (RFC 8414, or OpenID Connect Discovery): where its keys and its
introspection endpoint are.

Looked up at the three places the MCP spec has clients try, in its order: RFC 8414's well-known URI with the
issuer's path inserted, OpenID Connect's with the path inserted, then OpenID Connect's appended to the issuer.
The document's `issuer` must be the configured issuer, character for character (RFC 8414 §3.3): tokens are
checked against that exact string.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx2
from pydantic import BaseModel, ConfigDict, ValidationError


class DiscoveryError(Exception):
    """The issuer's metadata could not be had; the message says where it was looked for and what to fix."""


class IssuerMetadata(BaseModel, defer_build=True):
    """The fields of the metadata this server uses (the rest is ignored)."""

    model_config = ConfigDict(extra="ignore")

    issuer: str
    jwks_uri: str | None = None
    introspection_endpoint: str | None = None
    token_endpoint: str | None = None
    authorization_endpoint: str | None = None
    scopes_supported: list[str] | None = None
    source: str = ""  # where it was read (not in the document)


def metadata_urls(issuer: str) -> list[str]:
    """Where the metadata of `issuer` may be, in the order the MCP spec's clients try them."""
    parts = urlsplit(issuer)
    base, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    urls = [
        f"{base}/.well-known/oauth-authorization-server{path}",
        f"{base}/.well-known/openid-configuration{path}",
        f"{base}{path}/.well-known/openid-configuration",
    ]
    return list(dict.fromkeys(urls))


async def discover(issuer: str, http: httpx2.AsyncClient) -> IssuerMetadata:
    """The metadata of `issuer`, or `DiscoveryError` saying why there is none."""
    tried: list[str] = []
    for url in metadata_urls(issuer):
        try:
            response = await http.get(url, headers={"accept": "application/json"})
        except httpx2.HTTPError as exc:
            raise DiscoveryError(f"the issuer {issuer} could not be reached at {url} ({_reason(exc)})") from None
        if response.status_code != 200:
            tried.append(f"{url} ({response.status_code})")
            continue
        try:
            found = IssuerMetadata.model_validate_json(response.content)
        except ValidationError:
            tried.append(f"{url} (not a metadata document)")
            continue
        if found.issuer != issuer:
            raise DiscoveryError(
                f"the metadata at {url} is for issuer {found.issuer!r}, not {issuer!r}: set the issuer to exactly "
                f"{found.issuer!r} (issuers are compared as exact strings, a trailing slash included)"
            )
        return found.model_copy(update={"source": url})
    raise DiscoveryError(f"no authorization server metadata for {issuer}: tried {', '.join(tried)}")


async def fetch_json(http: httpx2.AsyncClient, url: str, what: str) -> dict[str, object]:
    """A JSON object from `url`, or `DiscoveryError` naming `what` it should have been."""
    try:
        response = await http.get(url, headers={"accept": "application/json"})
    except httpx2.HTTPError as exc:
        raise DiscoveryError(f"{what} at {url} could not be fetched ({_reason(exc)})") from None
    if response.status_code != 200:
        raise DiscoveryError(f"{what} at {url} answered HTTP {response.status_code}")
    try:
        document = response.json()
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise DiscoveryError(f"{what} at {url} is not a JSON object")
    return document


def _reason(exc: httpx2.HTTPError) -> str:
    return str(exc) or type(exc).__name__
