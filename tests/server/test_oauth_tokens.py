"""`serve --http --auth-issuer` against a real OpenID provider (tests/support/oidc_provider.py) on loopback: the tokens
it issues are accepted, whichever way they were got; a token for another server, an expired one, one signed
by another key, a forged `alg: none` or HS256 one, one of another issuer are refused with 401 and the spec's
challenge; a token without the scope a request needs gets 403 naming it; the protected-resource metadata
(RFC 9728) is served; key rotation needs no restart; introspection (RFC 7662) checks opaque tokens."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from support import clean_env, plain_http, serve_http
from support.oidc_provider import INTROSPECTOR, OTHER_RESOURCE, Provider, hs256, new_key, oidc_provider, unsigned
from support.token_requests import LIST_TOOLS, challenge, mcp_request, post

pytestmark = [pytest.mark.process]


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider() as running:
        yield running


@pytest.fixture(scope="module")
def base(provider: Provider) -> Iterator[str]:
    """A team server of the provider's (ephemeral: these tests look at tokens, not at runs)."""
    env = clean_env(MCP_TEAM_MODEL="offline")
    with serve_http("--ephemeral", "--auth-issuer", provider.issuer, env=env) as url:
        yield url


def test_the_protected_resource_metadata(base: str, provider: Provider) -> None:
    with plain_http() as http:
        inserted = http.get(f"{base}/.well-known/oauth-protected-resource/mcp")
        root = http.get(f"{base}/.well-known/oauth-protected-resource")
    assert inserted.status_code == 200 and root.status_code == 200
    document = inserted.json()
    assert document == root.json()
    assert document["resource"] == f"{base}/mcp"
    assert document["authorization_servers"] == [provider.issuer]  # exactly, without a trailing slash
    assert document["scopes_supported"] == ["team:run", "runs:read", "checkpoints:answer", "runs:admin"]
    assert document["bearer_methods_supported"] == ["header"]


def test_no_token_gets_a_401_saying_where_to_get_one(base: str) -> None:
    response = post(f"{base}/mcp", None, LIST_TOOLS)
    assert response.status_code == 401
    params = challenge(response)
    assert params == {  # RFC 6750 §3.1: no error code when no credentials were sent
        "scope": "team:run runs:read checkpoints:answer",
        "resource_metadata": f"{base}/.well-known/oauth-protected-resource/mcp",
    }


@pytest.mark.parametrize("how", ["client_credentials", "authorization_code"])
def test_a_token_the_provider_issued_is_accepted(base: str, provider: Provider, how: str) -> None:
    resource = f"{base}/mcp"
    if how == "client_credentials":
        token = provider.client_credentials("team:run runs:read", resource)
    else:
        token = provider.authorization_code("alice", "team:run runs:read", resource)
    response = post(resource, token, LIST_TOOLS)
    assert response.status_code == 200, response.text
    assert "run_team" in response.text


def _refused(provider: Provider, resource: str) -> dict[str, str]:
    other_kid, other_key = new_key()
    now = jwt.decode(provider.client_credentials("team:run", resource), options={"verify_signature": False})["iat"]
    # The key everyone can fetch, used as an HMAC secret (the classic algorithm confusion).
    public_pem = provider.keys[0][1].public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    claims = {"iss": provider.issuer, "aud": resource, "sub": "mallory", "client_id": "mcp-cc", "iat": now,
              "exp": now + 600, "scope": "team:run runs:read"}  # fmt: skip
    return {
        "another audience": provider.client_credentials("team:run", OTHER_RESOURCE),
        "expired": provider.forge(resource, iat=now - 3600, exp=now - 1800),
        "another key, the provider's key id": provider.forge(resource, key=other_key),
        "another key, its own key id": provider.forge(resource, key=other_key, kid=other_kid),
        "alg none": unsigned(claims, provider.keys[0][0]),
        "HS256 keyed with the public key": hs256(claims, public_pem, provider.keys[0][0]),
        "another issuer": provider.forge(resource, iss="http://127.0.0.1:9/evil"),
        "not an access token (typ JWT)": provider.forge(resource, headers={"typ": "JWT"}),
        "no subject": provider.forge(resource, sub=None),
        "no expiry": provider.forge(resource, exp=None),
        "not a JWT": "not-a-token",
    }


REFUSALS = [
    "another audience", "expired", "another key, the provider's key id", "another key, its own key id", "alg none",
    "HS256 keyed with the public key", "another issuer", "not an access token (typ JWT)", "no subject", "no expiry",
    "not a JWT",
]  # fmt: skip


@pytest.fixture(scope="module")
def bad_tokens(base: str, provider: Provider) -> dict[str, str]:
    return _refused(provider, f"{base}/mcp")


def test_a_token_made_as_the_provider_makes_them_is_accepted(base: str, provider: Provider) -> None:
    # The control for the forgeries below: each differs from this one in the one thing it names.
    assert post(f"{base}/mcp", provider.forge(f"{base}/mcp"), LIST_TOOLS).status_code == 200


@pytest.mark.parametrize("kind", REFUSALS)
def test_a_bad_token_is_refused_with_401_invalid_token(base: str, bad_tokens: dict[str, str], kind: str) -> None:
    response = post(f"{base}/mcp", bad_tokens[kind], LIST_TOOLS)
    assert response.status_code == 401, (kind, response.status_code, response.text)
    params = challenge(response)
    assert params["error"] == "invalid_token"
    assert params["resource_metadata"] == f"{base}/.well-known/oauth-protected-resource/mcp"
    assert params["scope"] == "team:run runs:read checkpoints:answer"
    assert response.json()["error"] == "invalid_token"


@pytest.mark.parametrize(
    ("granted", "message", "needed"),
    [
        ("runs:read", mcp_request("tools/call", {"name": "run_team", "arguments": {"request": "hi"}}), "team:run"),
        ("runs:read", mcp_request("tools/call", {"name": "researcher", "arguments": {"task": "hi"}}), "team:run"),
        ("team:run", mcp_request("resources/read", {"uri": "team://runs"}), "runs:read"),
        ("team:run", mcp_request("tools/call", {"name": "get_run", "arguments": {"run_id": "x"}}), "runs:read"),
        ("team:run runs:read", mcp_request("tools/call", {"name": "answer_checkpoint", "arguments": {}}),
         "checkpoints:answer"),
        ("runs:read", mcp_request("tools/call", {"name": "cancel_run", "arguments": {"run_id": "x"}}), "team:run"),
    ],
    ids=["run_team", "a specialist", "team://runs", "get_run", "answer_checkpoint", "cancel_run"],
)  # fmt: skip
def test_a_token_without_the_scope_gets_403_naming_it(
    base: str, provider: Provider, granted: str, message: dict[str, Any], needed: str
) -> None:
    token = provider.client_credentials(granted, f"{base}/mcp")
    response = post(f"{base}/mcp", token, message)
    assert response.status_code == 403, response.text
    params = challenge(response)
    assert params["error"] == "insufficient_scope" and params["scope"] == needed, params
    assert params["resource_metadata"] == f"{base}/.well-known/oauth-protected-resource/mcp"


def test_what_needs_no_scope_passes_with_any_valid_token(base: str, provider: Provider) -> None:
    token = provider.client_credentials("checkpoints:answer", f"{base}/mcp")  # no run or read scope
    for message in (LIST_TOOLS, mcp_request("resources/read", {"uri": "team://specialists"})):
        response = post(f"{base}/mcp", token, message)
        assert response.status_code == 200, response.text


def test_the_operator_scope_reads_runs_without_runs_read(base: str, provider: Provider) -> None:
    token = provider.client_credentials("runs:admin", f"{base}/mcp")
    response = post(f"{base}/mcp", token, mcp_request("resources/read", {"uri": "team://runs"}))
    assert response.status_code == 200, response.text


def test_the_run_pages_need_a_token_that_may_read_runs(base: str, provider: Provider) -> None:
    with plain_http() as http:
        assert http.get(f"{base}/runs.json").status_code == 401
        runner = provider.client_credentials("team:run", f"{base}/mcp")
        assert http.get(f"{base}/runs.json", headers={"authorization": f"Bearer {runner}"}).status_code == 401
        reader = provider.client_credentials("runs:read", f"{base}/mcp")
        listed = http.get(f"{base}/runs.json", headers={"authorization": f"Bearer {reader}"})
    assert listed.status_code == 200 and json.loads(listed.text) == {"runs": []}


def test_new_keys_are_used_without_a_restart(provider: Provider) -> None:
    env = clean_env(MCP_TEAM_MODEL="offline")
    with serve_http("--ephemeral", "--auth-issuer", provider.issuer, env=env) as url:
        resource = f"{url}/mcp"
        before = provider.client_credentials("team:run", resource)
        assert post(resource, before, LIST_TOOLS).status_code == 200  # the server has fetched the keys
        new_kid = provider.rotate()
        after = provider.client_credentials("team:run", resource)
        assert jwt.get_unverified_header(after)["kid"] == new_kid
        assert post(resource, after, LIST_TOOLS).status_code == 200, "a token signed with the new key was refused"
        assert post(resource, before, LIST_TOOLS).status_code == 200  # the old key is still published


def test_introspection_checks_opaque_tokens(provider: Provider) -> None:
    env = clean_env(MCP_TEAM_MODEL="offline", MCP_TEAM_AUTH_INTROSPECTION_CLIENT_ID=INTROSPECTOR[0],
                    MCP_TEAM_AUTH_INTROSPECTION_CLIENT_SECRET=INTROSPECTOR[1])  # fmt: skip
    # The provider gives opaque tokens for resources on `localhost` (tests/oidc/provider.mjs).
    with serve_http("--ephemeral", "--host", "localhost", "--auth-issuer", provider.issuer, env=env) as url:
        resource = url.replace("127.0.0.1", "localhost") + "/mcp"
        opaque = provider.client_credentials("team:run runs:read", resource)
        assert opaque.count(".") == 0  # not a JWT: only the issuer can say what it is
        assert post(f"{url}/mcp", opaque, LIST_TOOLS).status_code == 200
        runner = provider.client_credentials("team:run", resource)
        refused = post(f"{url}/mcp", runner, mcp_request("resources/read", {"uri": "team://runs"}))
        assert refused.status_code == 403 and challenge(refused)["scope"] == "runs:read"
        for bad in (provider.client_credentials("team:run", OTHER_RESOURCE), "made-up-token"):
            response = post(f"{url}/mcp", bad, LIST_TOOLS)
            assert response.status_code == 401 and challenge(response)["error"] == "invalid_token"
