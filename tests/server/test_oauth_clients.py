"""MCP clients doing the MCP authorization spec's discovery against `serve --http --auth-issuer` and a real
OpenID provider (tests/support/oidc_provider.py): from a 401 to the server's protected-resource metadata, to the
issuer's
metadata, to a token for this server (RFC 8707 `resource`), to a tool call. The Python SDK's OAuth client with
client credentials (both protocol revisions) and as a person (authorization code + PKCE through the provider's
login page), and the TypeScript SDK's (tests/fixtures/ts_oauth_client.cjs)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from support import HANG_GUARD, clean_env, plain_http, plain_http_async, serve_http
from support.conformance import NODE, ROOT, SUITE, install_suite
from support.oidc_provider import CC, REDIRECT_URI, Provider, oidc_provider

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
    pytest.mark.process,
    pytest.mark.conformance,
]

TS_CLIENT = Path(__file__).parents[1] / "fixtures" / "ts_oauth_client.cjs"


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider() as running:
        yield running


@pytest.fixture(scope="module")
def url(provider: Provider) -> Iterator[str]:
    with serve_http("--auth-issuer", provider.issuer, env=clean_env(MCP_TEAM_MODEL="offline")) as base:
        yield f"{base}/mcp"


class Memory:
    """The SDK's token storage, in memory; `client` pre-registered (no dynamic registration)."""

    def __init__(self, client: OAuthClientInformationFull | None = None) -> None:
        self.tokens: OAuthToken | None = None
        self.client = client

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Recorded:
    """Each request the client's HTTP client made: (method, URL, status)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, int]] = []

    async def response(self, response: Any) -> None:
        self.requests.append((response.request.method, str(response.request.url), response.status_code))


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
async def test_the_python_sdk_finds_the_issuer_from_a_401_and_calls_a_tool(
    url: str, provider: Provider, mode: str
) -> None:
    storage, seen = Memory(), Recorded()
    auth = ClientCredentialsOAuthProvider(server_url=url, storage=storage, client_id=CC[0], client_secret=CC[1],
                                          issuer=provider.issuer)  # fmt: skip
    async with (
        plain_http_async(auth=auth, timeout=HANG_GUARD, event_hooks={"response": [seen.response]}) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        ran = await client.call_tool("run_team", {"request": "Research bees"})
        runs = await client.read_resource("team://runs")
    assert not ran.is_error and ran.structured_content is not None and ran.structured_content["status"] == "complete"
    assert ran.structured_content["run_id"] in runs.contents[0].text  # type: ignore[union-attr]
    assert storage.tokens is not None and storage.tokens.scope == "team:run runs:read checkpoints:answer"
    flow = [(method, u.split("?")[0], status) for method, u, status in seen.requests]
    base = url.removesuffix("/mcp")
    assert flow[:4] == [
        ("POST", url, 401),
        ("GET", f"{base}/.well-known/oauth-protected-resource/mcp", 200),
        ("GET", f"{provider.issuer}/.well-known/oauth-authorization-server", 200),
        ("POST", f"{provider.issuer}/token", 200),
    ], flow
    assert all(status == 200 or status == 202 for _, u, status in flow[4:] if u == url), flow


async def test_a_person_logs_in_through_the_python_sdk(url: str, provider: Provider) -> None:
    # An MCP host for a person: the authorization code flow with PKCE, the provider's login page filled in as a
    # browser would, for the public client the provider knows (pre-registered: no dynamic registration).
    redirected: list[dict[str, list[str]]] = []

    async def log_in(authorization_url: str) -> None:
        def browse() -> dict[str, list[str]]:
            with plain_http(timeout=HANG_GUARD, follow_redirects=False) as browser:
                return provider.log_in(browser, authorization_url, "carol")

        redirected.append(await anyio.to_thread.run_sync(browse))

    async def callback() -> AuthorizationCodeResult:
        query = redirected[-1]
        return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0], iss=query["iss"][0])

    public = OAuthClientInformationFull(client_id="mcp-public", redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
                                        token_endpoint_auth_method="none", grant_types=["authorization_code"],
                                        response_types=["code"])  # fmt: skip
    metadata = OAuthClientMetadata(redirect_uris=[REDIRECT_URI], token_endpoint_auth_method="none",  # type: ignore[list-item]
                                   grant_types=["authorization_code"], response_types=["code"])  # fmt: skip
    storage = Memory(public)
    auth = OAuthClientProvider(url, metadata, storage, redirect_handler=log_in, callback_handler=callback)
    async with (
        plain_http_async(auth=auth, timeout=HANG_GUARD) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        started = await client.call_tool("start_run", {"request": "Research bees"})
        assert started.structured_content is not None, started.content
        done = await client.call_tool("get_run", {"run_id": started.structured_content["run_id"], "wait_seconds": 50})
    assert done.structured_content is not None and done.structured_content["status"] == "complete"
    assert len(redirected) == 1  # one login: the token was kept for the calls after
    assert storage.tokens is not None and storage.tokens.scope == "team:run runs:read checkpoints:answer"


def test_the_typescript_sdk_finds_the_issuer_from_a_401_and_calls_a_tool(url: str, provider: Provider) -> None:
    install_suite()  # the conformance suite's node_modules hold the TypeScript SDK (pinned by its lock)
    proc = subprocess.run(
        [str(NODE), str(TS_CLIENT), str(SUITE), url, provider.issuer, *CC, "team:run runs:read"],
        capture_output=True, text=True, timeout=HANG_GUARD, cwd=ROOT,
    )  # fmt: skip
    steps = {(line := json.loads(raw))["step"]: line["value"] for raw in proc.stdout.splitlines()}
    assert proc.returncode == 0 and "crashed" not in steps, proc.stdout + proc.stderr
    assert "run_team" in steps["tools"] and "start_run" in steps["tools"]
    assert steps["run"]["status"] == "complete"
    assert steps["token scope"] == "team:run runs:read"
    flow = [(method, u.split("?")[0], status) for method, u, status in steps["requests"]]
    base = url.removesuffix("/mcp")
    assert flow[0] == ("POST", url, 401), flow
    assert ("GET", f"{base}/.well-known/oauth-protected-resource/mcp", 200) in flow, flow
    assert ("POST", f"{provider.issuer}/token", 200) in flow, flow
