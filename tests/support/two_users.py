"""A team server in this process that checks Alice's and Bob's tokens (two principals of one client application)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings

from mcp_team.errors import ConfigError
from mcp_team.handoffs import RunSettings
from mcp_team.llm.settings import ModelSettings
from mcp_team.runs import resolve
from mcp_team.server.app import build_server
from mcp_team.server.transports.http import HttpSettings, http_app
from mcp_team.specialists import DEFAULT_TEAM
from mcp_team.teamfile.loading import TeamSpec
from support import free_port, serving_here


class TwoUsers(TokenVerifier):
    """Alice's and Bob's tokens: two principals of one client application."""

    async def verify_token(self, token: str) -> AccessToken | None:
        if token in ("alice", "bob"):
            return AccessToken(token=token, client_id="ide", subject=token, scopes=["mcp-team"])
        return None


@asynccontextmanager
async def two_user_server(state_dir: Path | None) -> AsyncIterator[str]:
    """An mcp-team server checking Alice's and Bob's tokens (durable, with a state directory), on a free port of
    this process."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    auth = AuthSettings.model_validate(
        {"issuer_url": url, "resource_server_url": url, "required_scopes": ["mcp-team"]}
        | {"validate_token_resource": False}
    )
    durable = resolve(state_dir=state_dir) if state_dir is not None else None
    server = build_server(ModelSettings(model="offline"), auth=(TwoUsers(), auth), durable=durable)
    with pytest.raises(ConfigError, match="pass the same `auth` to http_app"):  # pages unguarded: refused
        http_app(server, HttpSettings(port=port))
    app = http_app(server, HttpSettings(port=port), auth=(TwoUsers(), auth))
    async with serving_here(app, port):
        yield url


@asynccontextmanager
async def held_two_user_server(state_dir: Path) -> AsyncIterator[str]:
    """`two_user_server`, its runs stopping at the plan checkpoint for a person (the client's elicitation,
    `support.run_updates.HeldApproval`) before going on."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    auth = AuthSettings.model_validate(
        {"issuer_url": url, "resource_server_url": url, "required_scopes": ["mcp-team"]}
        | {"validate_token_resource": False}
    )
    team = TeamSpec.of(DEFAULT_TEAM, RunSettings(mode="planned", checkpoints=["plan"]))
    durable = resolve(state_dir=state_dir, environ={})
    server = build_server(ModelSettings(model="offline"), team, auth=(TwoUsers(), auth), durable=durable)
    async with serving_here(http_app(server, HttpSettings(port=port), auth=(TwoUsers(), auth)), port):
        yield url
