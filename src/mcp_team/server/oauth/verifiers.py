"""Checking a bearer token, two ways, as the SDK's `TokenVerifier`: as a JWT access token (RFC 9068) against
the issuer's keys, or by asking the issuer (token introspection, RFC 7662).

Either way a token passes only if the issuer made it, for this server (its audience is the server's canonical
URI, RFC 8707), and it is current; what it may do is its scopes' business (`scopes`). Neither verifier ever
raises: the SDK turns `None` into a 401, but an exception into a crash of the request (a 500 at best), so
anything unexpected is logged and the token refused.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import jwt
from mcp.server.auth.provider import TokenVerifier

from mcp_team.server.oauth.access import TeamAccessToken
from mcp_team.server.oauth.issuer import Issuer
from mcp_team.server.oauth.jwks import JwksCache, KeyProblem
from mcp_team.server.oauth.metadata import DiscoveryError
from mcp_team.server.oauth.settings import OAuthSettings

log = logging.getLogger("mcp_team.server.oauth")

REQUIRED_CLAIMS = ["exp", "iss", "aud", "sub"]  # RFC 9068 §2.2 (client_id, or azp, is checked below)


class TokenRefused(Exception):
    """Why a token was refused, for the log."""


class Refusals:
    """Why tokens are refused, in the log: a warning at most every `every` seconds (a flood of bad tokens is a
    line per interval, saying how many more there were), the others at INFO. The client is told only that its
    token is invalid; the operator setting the server up needs the reason (most often: another audience)."""

    def __init__(self, every: float = 10.0) -> None:
        self.every = every
        self._next = 0.0
        self._quiet = 0

    def say(self, reason: str) -> None:
        now = time.monotonic()
        if now < self._next:
            self._quiet += 1
            log.info("access token refused: %s", reason)
            return
        more = f" ({self._quiet} more refused since the last such warning)" if self._quiet else ""
        log.warning("access token refused: %s%s", reason, more)
        self._next, self._quiet = now + self.every, 0


REFUSALS = Refusals()


class JwtVerifier(TokenVerifier):
    """JWT access tokens: `typ` (RFC 9068's at+jwt unless configured otherwise), an accepted asymmetric `alg`,
    the signature by one of the issuer's keys, `iss`, `aud` (this server), `exp`, `nbf`, `iat` (with leeway)."""

    def __init__(self, settings: OAuthSettings, resource: str, issuer: Issuer) -> None:
        self.settings = settings
        self.resource = resource
        self.issuer = issuer
        self.keys = JwksCache(
            issuer.jwks, max_age=settings.jwks_max_age, refreshes_per_minute=settings.jwks_refreshes_per_minute
        )
        self._types = {t.lower() for t in settings.token_types}
        self._algorithms = set(settings.algorithms)

    async def verify_token(self, token: str) -> TeamAccessToken | None:
        try:
            return access_token(await self.claims(token), self.resource, self.settings)
        except jwt.InvalidAudienceError:
            REFUSALS.say(f"it is not for this server: its audience is not {self.resource} (clients ask for the "
                         "`resource` the server's metadata names; behind a proxy, set --public-url)")  # fmt: skip
        except jwt.InvalidIssuerError:
            REFUSALS.say(f"it was not issued by {self.issuer.url}")
        except (jwt.PyJWTError, KeyProblem, TokenRefused) as exc:
            REFUSALS.say(str(exc))
        except Exception:  # never a crash of the request: the client gets a 401, the log says why
            log.exception("access token refused: checking it failed unexpectedly")
        return None

    async def claims(self, token: str) -> dict[str, Any]:
        header = jwt.get_unverified_header(token)
        typ = str(header.get("typ", "")).lower()
        if typ not in self._types:
            raise TokenRefused(f"not a JWT access token (typ {header.get('typ')!r}; accepted: {sorted(self._types)})")
        alg = header.get("alg")
        if alg not in self._algorithms:  # before any key is looked up: `none` and HS256 cost nothing
            raise TokenRefused(f"algorithm {alg!r} is not accepted")
        key = await self.keys.key(header.get("kid"))
        if key.algorithm_name != alg:  # a key is for one algorithm (PyJWT 2.15 checks it too; older ones did not)
            raise TokenRefused(f"the token says {alg}, its key is for {key.algorithm_name}")
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[alg],
            issuer=self.issuer.url,
            audience=self.resource,
            leeway=self.settings.leeway_seconds,
            options={"require": REQUIRED_CLAIMS},
        )
        return claims


class IntrospectionVerifier(TokenVerifier):
    """Opaque (or any) tokens, by asking the issuer's introspection endpoint each time: `active`, `iss` when
    given, `aud` naming this server (required: a token for another server must not pass), `exp` and `nbf`."""

    def __init__(self, settings: OAuthSettings, resource: str, issuer: Issuer) -> None:
        self.settings = settings
        self.resource = resource
        self.issuer = issuer

    async def verify_token(self, token: str) -> TeamAccessToken | None:
        try:
            return access_token(self.checked(await self.issuer.introspect(token)), self.resource, self.settings)
        except (DiscoveryError, TokenRefused) as exc:
            REFUSALS.say(str(exc))
        except Exception:
            log.exception("access token refused: checking it failed unexpectedly")
        return None

    def checked(self, answer: dict[str, Any]) -> dict[str, Any]:
        if answer.get("active") is not True:
            raise TokenRefused("the issuer says the token is not active")
        if "iss" in answer and answer["iss"] != self.issuer.url:
            raise TokenRefused(f"issued by {answer['iss']!r}, not {self.issuer.url!r}")
        audience = answer.get("aud")
        audiences = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
        if self.resource not in audiences:
            raise TokenRefused(f"not issued for this server ({self.resource}): its audience is {audience!r}")
        if answer.get("token_type") == "refresh_token":
            raise TokenRefused("a refresh token is no access token")
        leeway, now = self.settings.leeway_seconds, time.time()
        if isinstance(answer.get("exp"), int | float) and answer["exp"] + leeway < now:
            raise TokenRefused("expired")
        if isinstance(answer.get("nbf"), int | float) and answer["nbf"] - leeway > now:
            raise TokenRefused("not valid yet (nbf)")
        return answer


def access_token(claims: dict[str, Any], resource: str, settings: OAuthSettings) -> TeamAccessToken:
    """The SDK's access token for verified `claims`: who (client, subject), what (scopes), until when."""
    client = claims.get("client_id") or claims.get("azp")
    if not isinstance(client, str) or not client:
        raise TokenRefused("the token names no client (client_id or azp)")
    scopes = scopes_of(claims)
    subject = claims.get("sub")
    expires = claims.get("exp")
    return TeamAccessToken(
        token="[redacted]",  # never kept: nothing reads it back, and a stray log must not show it
        client_id=client,
        scopes=scopes,
        expires_at=int(expires) if isinstance(expires, int | float) else None,
        resource=resource,  # checked above; the SDK's validate_token_resource compares it again
        subject=str(subject) if subject is not None else None,
        claims=claims,  # its `iss` is part of the SDK's principal (sessions are bound to it)
        operator=settings.scope_admin in scopes,
    )


def scopes_of(claims: dict[str, Any]) -> list[str]:
    """RFC 9068 and RFC 7662 say `scope`, one space-separated string; some issuers say `scp`, a list or string."""
    value = claims.get("scope", claims.get("scp", []))
    if isinstance(value, str):
        return value.split()
    return [str(s) for s in value] if isinstance(value, list) else []
