"""Setting up OAuth as an operator does: `mcp-team check --http` shows the set-up and asks the issuer (a real
OpenID provider on loopback, tests/support/oidc_provider.py) whether it answers, and says what is wrong when it does
not;
`serve --http` refuses a set-up that cannot work (a static token and an issuer at once, no public URL off
loopback, plain http to a remote issuer, a symmetric algorithm) before it serves, and starts, then accepts
tokens, when its issuer comes up after it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import HANG_GUARD, clean_env, cli_here, free_port, serve_http_process
from support.oidc_provider import INTROSPECTOR, Provider, install, oidc_provider
from support.token_requests import LIST_TOOLS, challenge, post

pytestmark = [pytest.mark.process]


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider() as running:
        yield running


def test_check_shows_the_set_up_and_that_the_issuer_answers(provider: Provider) -> None:
    shown = cli_here("check", "--http", "--port", "9100", "--auth-issuer", provider.issuer)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert f"auth: OAuth 2.1 resource server of issuer {provider.issuer}" in lines
    assert "  resource (audience of every token): http://127.0.0.1:9100/mcp" in lines
    assert "  protected-resource metadata: http://127.0.0.1:9100/.well-known/oauth-protected-resource/mcp" in lines
    assert (f"  issuer metadata: {provider.issuer}/.well-known/oauth-authorization-server (reachable, issuer "
            "matches)") in lines  # fmt: skip
    assert f"  signing keys: 1 at {provider.issuer}/jwks (RS256)" in lines
    assert any("scopes: run the team team:run; read runs runs:read" in line for line in lines), lines


def test_check_shows_introspection_when_it_is_set_up(provider: Provider) -> None:
    shown = cli_here("check", "--http", "--auth-issuer", provider.issuer,
                     MCP_TEAM_AUTH_INTROSPECTION_CLIENT_ID=INTROSPECTOR[0],
                     MCP_TEAM_AUTH_INTROSPECTION_CLIENT_SECRET=INTROSPECTOR[1])  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert f"  introspection endpoint: {provider.issuer}/token/introspection" in shown.stdout.splitlines()
    assert INTROSPECTOR[1] not in shown.stdout + shown.stderr


def test_check_says_when_the_issuer_does_not_answer_or_is_another() -> None:
    gone = f"http://127.0.0.1:{free_port()}"
    shown = cli_here("check", "--http", "--auth-issuer", gone)
    assert shown.returncode == 1
    assert f"mcp-team: error: the issuer {gone} could not be reached at {gone}/.well-known/oauth-authorization-" \
           "server" in shown.stderr  # fmt: skip


def test_check_says_when_the_issuer_is_spelt_otherwise(provider: Provider) -> None:
    shown = cli_here("check", "--http", "--auth-issuer", provider.issuer + "/")
    assert shown.returncode == 1
    assert f"is for issuer '{provider.issuer}', not '{provider.issuer}/': set the issuer to exactly" in shown.stderr


def test_check_shows_a_static_token_and_no_auth() -> None:
    token = cli_here("check", "--http", MCP_TEAM_HTTP_TOKEN="s3cret")
    assert token.returncode == 0 and "auth: one static bearer token (MCP_TEAM_HTTP_TOKEN)" in token.stdout
    assert "s3cret" not in token.stdout
    none = cli_here("check", "--http")
    assert none.returncode == 0 and "auth: none (loopback: anyone on this machine can connect)" in none.stdout


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--auth-issuer", "http://127.0.0.1:9"], {"MCP_TEAM_HTTP_TOKEN": "s3cret"},
         "both a static token (MCP_TEAM_HTTP_TOKEN) and an OAuth issuer (--auth-issuer / MCP_TEAM_AUTH_ISSUER) are "
         "set: choose one"),
        (["--host", "0.0.0.0", "--auth-issuer", "https://auth.example.com"],
         {"MCP_TEAM_ALLOWED_HOSTS": '["team.example.com:*"]', "MCP_TEAM_ALLOWED_ORIGINS": '["https://x.example"]'},
         "binding to 0.0.0.0 (not loopback) needs the URL clients reach it at, the audience of every token "
         "(--public-url / MCP_TEAM_PUBLIC_URL)"),
        (["--auth-issuer", "http://auth.example.com"], {},
         "--auth-issuer / MCP_TEAM_AUTH_ISSUER: 'http://auth.example.com' is plain http off this machine; use https"),
        (["--auth-issuer", "https://auth.example.com"], {"MCP_TEAM_AUTH_ALGORITHMS": '["RS256", "HS256"]'},
         "MCP_TEAM_AUTH_ALGORITHMS: HS256 cannot be accepted: only asymmetric algorithms are"),
        (["--auth-issuer", "https://auth.example.com"], {"MCP_TEAM_AUTH_INTROSPECTION_CLIENT_ID": "rs"},
         "introspection needs both MCP_TEAM_AUTH_INTROSPECTION_CLIENT_ID and "
         "MCP_TEAM_AUTH_INTROSPECTION_CLIENT_SECRET"),
        (["--auth-issuer", "https://auth.example.com", "--public-url", "https://team.example.com/mcp#x"], {},
         "invalid public URL (--public-url / MCP_TEAM_PUBLIC_URL): 'https://team.example.com/mcp#x' has a fragment"),
    ],
    ids=["token and issuer", "no public URL", "plain http issuer", "HS256", "half introspection", "fragment"],
)  # fmt: skip
def test_serve_refuses_a_set_up_that_cannot_work(args: list[str], env: dict[str, str], said: str) -> None:
    served = cli_here("serve", "--http", "--ephemeral", "--port", "0", *args, MCP_TEAM_MODEL="offline", **env)
    assert served.returncode == 2, served
    assert said in served.stderr, served.stderr


def test_a_server_started_before_its_issuer_takes_tokens_once_it_answers(tmp_path: Path) -> None:
    install()
    provider = Provider(tmp_path)
    provider.port = free_port()  # where the issuer will be, once it starts
    env = clean_env(MCP_TEAM_MODEL="offline")
    stderr = tmp_path / "serve.err"
    with serve_http_process("--ephemeral", "--auth-issuer", provider.issuer, env=env, stderr=stderr) as (base, _):
        said = stderr.read_text()
        assert f"mcp-team: warning: the issuer {provider.issuer} could not be reached" in said, said
        resource = f"{base}/mcp"
        token = provider.forge(resource)  # signed with the key the provider will publish
        refused = post(resource, token, LIST_TOOLS)
        assert refused.status_code == 401 and challenge(refused)["error"] == "invalid_token"
        provider.start()
        try:
            deadline = time.monotonic() + HANG_GUARD
            # The server asks again a few seconds after a failed lookup (not at every request): poll until then.
            while post(resource, token, LIST_TOOLS).status_code != 200:
                assert time.monotonic() < deadline, "the server never took a token of the issuer that came up late"
                time.sleep(0.2)
        finally:
            provider.stop()
    said = stderr.read_text()
    assert "mcp-team: WARNING cannot check tokens: the issuer" in said, said  # why the first token was refused
