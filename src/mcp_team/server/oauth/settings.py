"""What the OAuth resource server is set up with: the issuer, the scope names, and how tokens are checked.

Read once at the edge (`serve`, `check`) from `MCP_TEAM_AUTH_*` and the flags, and passed down. Each value
is checked here, so a server never starts half configured: a non-HTTPS issuer off loopback, a symmetric or
`none` algorithm, two scopes of the same name, an introspection client without its secret.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# Asymmetric algorithms only: a shared-secret (HS*) or `none` token could be made by anyone who has the
# public JWK Set, or by anyone at all.
ASYMMETRIC = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


class OAuthSettings(BaseSettings):
    """`serve --http --auth-issuer URL`: the server is an OAuth 2.1 protected resource of that issuer."""

    model_config = SettingsConfigDict(env_prefix="MCP_TEAM_AUTH_", extra="ignore")

    issuer: str | None = Field(
        default=None, description="The authorization server's issuer identifier, exactly as its metadata says it."
    )
    scope_run: str = Field(default="team:run", description="Scope to run the team (run_team, start_run, ...).")
    scope_read: str = Field(default="runs:read", description="Scope to read one's runs and tasks.")
    scope_answer: str = Field(default="checkpoints:answer", description="Scope to answer a run's checkpoint.")
    scope_admin: str = Field(default="runs:admin", description="Operators: see and cancel every run.")
    introspection_client_id: str | None = Field(
        default=None, description="Check tokens by introspection (RFC 7662) as this client, instead of as JWTs."
    )
    introspection_client_secret: SecretStr | None = None
    introspection_endpoint: str | None = Field(
        default=None, description="The introspection endpoint, when the issuer's metadata does not name it."
    )
    algorithms: list[str] = Field(default_factory=lambda: list(ASYMMETRIC), description="JWT algorithms accepted.")
    token_types: list[str] = Field(
        default_factory=lambda: ["at+jwt", "application/at+jwt"],
        description="JWT `typ` values accepted (RFC 9068's at+jwt; add JWT for issuers that do not follow it).",
    )
    leeway_seconds: int = Field(default=30, ge=0, le=300, description="Clock skew allowed on exp, nbf and iat.")
    jwks_max_age: int = Field(default=300, ge=10, le=86400, description="Seconds a fetched JWK Set is used.")
    jwks_refreshes_per_minute: int = Field(
        default=10, ge=1, le=600, description="Fetches of the JWK Set a token with an unknown key id may cause."
    )
    timeout_seconds: float = Field(default=5.0, gt=0, le=60, description="Timeout of each request to the issuer.")

    @field_validator("issuer", "introspection_endpoint")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        return checked_url(value.strip(), "it")

    @field_validator("scope_run", "scope_read", "scope_answer", "scope_admin")
    @classmethod
    def _scope(cls, value: str) -> str:
        if not value or any(c.isspace() or c in '"\\' for c in value):
            raise ValueError(f"{value!r} is not a scope name: one word, no spaces or quotes")
        return value

    @field_validator("algorithms")
    @classmethod
    def _asymmetric(cls, value: list[str]) -> list[str]:
        if unknown := [a for a in value if a not in ASYMMETRIC]:
            raise ValueError(
                f"{', '.join(unknown)} cannot be accepted: only asymmetric algorithms are ({', '.join(ASYMMETRIC)}); "
                "a shared-secret (HS*) or 'none' token is not proof of the issuer"
            )
        if not value:
            raise ValueError("name at least one algorithm, e.g. RS256")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> OAuthSettings:
        names = self.scope_names()
        if len(set(names)) != len(names):
            raise ValueError(f"the four scope names must differ, got {', '.join(names)}")
        if (self.introspection_client_id is None) != (self.introspection_client_secret is None):
            raise ValueError(
                "introspection needs both MCP_TEAM_AUTH_INTROSPECTION_CLIENT_ID and "
                "MCP_TEAM_AUTH_INTROSPECTION_CLIENT_SECRET (the client this server authenticates as); set both, or "
                "neither to check tokens as JWTs"
            )
        return self

    def scope_names(self) -> list[str]:
        return [self.scope_run, self.scope_read, self.scope_answer, self.scope_admin]

    @property
    def introspects(self) -> bool:
        return self.introspection_client_id is not None


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def checked_url(value: str, what: str) -> str:
    """`value` if it is an absolute http(s) URL without fragment; HTTPS unless its host is loopback (the spec:
    authorization server endpoints and the resource are served over HTTPS)."""
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{value!r} is not an http(s) URL; {what} must look like https://auth.example.com")
    if parts.fragment:
        raise ValueError(f"{value!r} has a fragment (#...); {what} must not")
    if parts.scheme.lower() == "http" and not is_loopback(parts.hostname):
        raise ValueError(f"{value!r} is plain http off this machine; use https (plain http is for loopback only)")
    return value


def canonical_resource(url: str) -> str:
    """The server's canonical URI (the MCP spec's *Canonical Server URI*, RFC 8707's resource): scheme and host
    in lower case, no fragment, no trailing slash. Tokens must name exactly this as their audience."""
    checked_url(url, "the public URL")
    parts = urlsplit(url)
    if parts.query or parts.username is not None:
        raise ValueError(f"{url!r} has a query (?...) or a user name (...@); the public URL must have neither")
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), "", ""))
