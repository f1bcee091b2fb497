"""`ResourceServer`: the parts of an OAuth-protected `serve --http`, made from its settings and its canonical
URL, and what each place needs of them: the SDK's verifier and `AuthSettings` (`build_server(auth=...)`), the
challenges and metadata on the HTTP app (`install`), the run pages' check (`permits_pages`), and the lines
`mcp-team check --http` shows (`describe`)."""

from __future__ import annotations

from dataclasses import dataclass

from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.auth.settings import AuthSettings
from starlette.applications import Starlette

from mcp_team.server.oauth import guard
from mcp_team.server.oauth.issuer import Issuer
from mcp_team.server.oauth.scopes import ScopePolicy
from mcp_team.server.oauth.settings import OAuthSettings, canonical_resource
from mcp_team.server.oauth.verifiers import IntrospectionVerifier, JwtVerifier


@dataclass
class ResourceServer:
    settings: OAuthSettings
    resource: str  # the canonical URL: every token's audience
    issuer: Issuer
    verifier: TokenVerifier
    policy: ScopePolicy
    sdk_settings: AuthSettings

    @property
    def auth(self) -> tuple[TokenVerifier, AuthSettings]:
        """For `build_server(auth=...)`."""
        return self.verifier, self.sdk_settings

    @property
    def metadata_url(self) -> str:
        assert self.sdk_settings.resource_server_url is not None
        return str(build_resource_metadata_url(self.sdk_settings.resource_server_url))

    def install(self, app: Starlette, limit: int) -> None:
        guard.install(app, self.sdk_settings, self.policy, limit)

    def permits_pages(self, access: AccessToken) -> bool:
        """The run pages show runs: reading them needs what `team://runs` needs."""
        return bool({self.policy.read, self.policy.admin}.intersection(access.scopes))

    def describe(self) -> list[str]:
        s = self.settings
        how = (
            f"introspection (RFC 7662) as client {s.introspection_client_id}"
            + (f" at {s.introspection_endpoint}" if s.introspection_endpoint else "")
            if s.introspects
            else f"JWT access tokens (typ {', '.join(s.token_types)}; {', '.join(s.algorithms)}), keys from the "
            f"issuer's jwks_uri, kept {s.jwks_max_age} s"
        )
        p = self.policy
        return [
            f"auth: OAuth 2.1 resource server of issuer {self.issuer.url}",
            f"  resource (audience of every token): {self.resource}",
            f"  protected-resource metadata: {self.metadata_url}",
            f"  tokens checked as: {how}",
            f"  scopes: run the team {p.run}; read runs {p.read}; answer checkpoints {p.answer}; operators "
            f"(every run) {p.admin}",
        ]


def resource_server(settings: OAuthSettings, public_url: str) -> ResourceServer:
    """The resource server for `settings` (with an issuer) at `public_url` (`ValueError` if it cannot be one)."""
    resource = canonical_resource(public_url)
    issuer = Issuer(settings)
    verifier: TokenVerifier = (
        IntrospectionVerifier(settings, resource, issuer) if settings.introspects
        else JwtVerifier(settings, resource, issuer)
    )  # fmt: skip
    # No scope for every request (each request's own is checked by the guard); the SDK checks again that a token
    # is for this resource. Its URLs keep an empty path empty (no trailing slash added to the issuer).
    sdk_settings = AuthSettings.model_validate(
        {"issuer_url": issuer.url, "resource_server_url": resource, "required_scopes": [],
         "validate_token_resource": True}
    )  # fmt: skip
    return ResourceServer(settings, resource, issuer, verifier, ScopePolicy.of(settings), sdk_settings)
