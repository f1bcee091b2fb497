"""The access token a verified bearer token becomes: the SDK's `AccessToken`, plus whether its holder is an
operator (it has the operator scope: sees and cancels every run). Read back in a request with
`get_access_token()`, as the SDK keeps it in context; `tasks.caller` turns it into who is calling."""

from __future__ import annotations

from mcp.server.auth.provider import AccessToken


class TeamAccessToken(AccessToken, defer_build=True):
    operator: bool = False
