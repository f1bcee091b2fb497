"""Who is calling and what they may see: the principal a request's access token names (its client and subject),
and the one rule for every run, task, thread and checkpoint: a caller sees their own, those started by nobody in
particular (a server without auth, the CLI), and an operator (OAuth's operator scope) sees every one."""

from __future__ import annotations

from dataclasses import dataclass

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken

from mcp_team.server.oauth.access import TeamAccessToken


@dataclass(frozen=True)
class Caller:
    """Who is calling, for what they may see: their principal (None: the server checks no tokens) and whether
    they are an operator (OAuth's operator scope: every run is theirs to see and cancel)."""

    principal: str | None
    operator: bool = False

    def sees(self, owner: str | None) -> bool:
        """Whether a run of `owner` exists for this caller: their own, one started by nobody in particular (a
        server without auth, the CLI), or any run for an operator. To anyone else it does not exist."""
        return self.operator or owner is None or owner == self.principal


def caller() -> Caller:
    """Who is calling, from the token of the request in progress."""
    token = get_access_token()
    if token is None:
        return Caller(None)
    return Caller(_principal(token), isinstance(token, TeamAccessToken) and token.operator)


def principal() -> str | None:
    """Who is calling, when the server checks tokens (the authorization context tasks are bound to): the token's
    client and subject. A run is recorded as this principal's."""
    token = get_access_token()
    return None if token is None else _principal(token)


def _principal(token: AccessToken) -> str:
    subject = getattr(token, "subject", None)
    return f"{token.client_id}:{subject}" if subject else token.client_id


def visible(owner: str | None) -> bool:
    """Whether the caller may see a run of `owner` (`Caller.sees`)."""
    return caller().sees(owner)
