"""The issuer's signing keys as the server keeps them (`server/oauth/jwks.py`), with a JWK Set of real keys and a
clock of the test's: kept for their max age, fetched again for a key id not in them (rotation), but a flood of
made-up key ids costs the issuer at most the refreshes a minute allows; requests that arrive during a fetch wait
for it; an issuer that fails keeps the keys fetched before. And which scope each request needs (`scopes.py`)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from jwt.algorithms import RSAAlgorithm

from mcp_team.server.oauth.jwks import RETRY_SECONDS, JwksCache, KeyProblem
from mcp_team.server.oauth.metadata import DiscoveryError
from mcp_team.server.oauth.scopes import ScopePolicy
from mcp_team.server.oauth.settings import OAuthSettings
from support.oidc_provider import new_key

pytestmark = [pytest.mark.anyio, pytest.mark.process]


class Issuer:
    """A JWK Set that changes when the test says, counting fetches; `down` makes fetches fail."""

    def __init__(self) -> None:
        self.keys = [new_key()]
        self.fetches = 0
        self.down = False
        self.gate: anyio.Event | None = None  # set: fetches wait for it

    async def jwks(self) -> dict[str, Any]:
        self.fetches += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.down:
            raise DiscoveryError("the issuer is down")
        return {"keys": [{**RSAAlgorithm.to_jwk(k.public_key(), as_dict=True), "kid": kid, "use": "sig",
                          "alg": "RS256"} for kid, k in self.keys]}  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def cache(issuer: Issuer, clock: Clock, per_minute: int = 10) -> JwksCache:
    return JwksCache(issuer.jwks, max_age=300, refreshes_per_minute=per_minute, clock=clock)


async def test_keys_are_kept_then_fetched_again_when_old() -> None:
    issuer, clock = Issuer(), Clock()
    keys = cache(issuer, clock)
    kid = issuer.keys[0][0]
    for _ in range(5):
        assert (await keys.key(kid)).key_id == kid
    assert issuer.fetches == 1
    clock.now += 301
    await keys.key(kid)
    assert issuer.fetches == 2


async def test_a_rotated_key_is_fetched_at_once() -> None:
    issuer, clock = Issuer(), Clock()
    keys = cache(issuer, clock)
    await keys.key(issuer.keys[0][0])
    issuer.keys.insert(0, new_key())
    assert (await keys.key(issuer.keys[0][0])).key_id == issuer.keys[0][0]  # no wait after the last fetch
    assert issuer.fetches == 2


async def test_made_up_key_ids_cost_the_issuer_at_most_the_refreshes_a_minute() -> None:
    issuer, clock = Issuer(), Clock()
    keys = cache(issuer, clock, per_minute=10)
    await keys.key(issuer.keys[0][0])
    for i in range(50):
        with pytest.raises(KeyProblem, match=f"no key 'made-up-{i}'"):
            await keys.key(f"made-up-{i}")
    assert issuer.fetches == 1 + 10
    assert (await keys.key(issuer.keys[0][0])).key_id == issuer.keys[0][0]  # real tokens still pass


async def test_requests_during_a_fetch_wait_for_it() -> None:
    issuer, clock = Issuer(), Clock()
    keys = cache(issuer, clock)
    issuer.gate = anyio.Event()
    found: list[str | None] = []

    async def look() -> None:
        found.append((await keys.key(issuer.keys[0][0])).key_id)

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(look)
        await anyio.wait_all_tasks_blocked()
        issuer.gate.set()
    assert found == [issuer.keys[0][0]] * 5
    assert issuer.fetches == 1


async def test_an_issuer_that_fails_leaves_the_keys_fetched_before() -> None:
    issuer, clock = Issuer(), Clock()
    keys = cache(issuer, clock)
    kid = issuer.keys[0][0]
    await keys.key(kid)
    issuer.down = True
    clock.now += 301  # old: fetched again, which fails
    assert (await keys.key(kid)).key_id == kid
    fetches = issuer.fetches
    clock.now += RETRY_SECONDS / 2
    await keys.key(kid)
    assert issuer.fetches == fetches  # not asked again at every request
    issuer.down = False
    clock.now += RETRY_SECONDS
    await keys.key(kid)
    assert issuer.fetches == fetches + 1


async def test_no_keys_at_all_refuses_and_says_why() -> None:
    issuer, clock = Issuer(), Clock()
    issuer.down = True
    keys = cache(issuer, clock)
    with pytest.raises(KeyProblem, match="the issuer's signing keys are unavailable \\(the issuer is down\\)"):
        await keys.key("any")


async def test_a_token_without_key_id_takes_the_only_key() -> None:
    issuer, clock = Issuer(), Clock()
    keys = cache(issuer, clock)
    assert (await keys.key(None)).key_id == issuer.keys[0][0]
    issuer.keys.append(new_key())
    clock.now += 301
    with pytest.raises(KeyProblem):  # which one, of two?
        await keys.key(None)


POLICY = ScopePolicy.of(OAuthSettings(scope_run="run", scope_read="read", scope_answer="answer", scope_admin="ops"))


@pytest.mark.parametrize(
    ("message", "needs"),
    [
        ({"method": "tasks/get", "params": {"taskId": "x"}}, ("read", "ops")),
        ({"method": "tasks/list"}, ("read", "ops")),
        ({"method": "tasks/cancel", "params": {"taskId": "x"}}, ("run", "ops")),
        ({"method": "tasks/update", "params": {"taskId": "x"}}, ("run",)),
        ({"method": "resources/subscribe", "params": {"uri": "team://runs/x"}}, ("read", "ops")),
        ({"method": "resources/read", "params": {"uri": "team://runsx"}}, ()),
        ({"method": "subscriptions/listen", "params": {"notifications": {"resourceSubscriptions": ["team://runs"]}}},
         ("read", "ops")),
        ({"method": "subscriptions/listen", "params": {"notifications": {"toolsListChanged": True}}}, ()),
        ({"method": "prompts/get", "params": {"name": "supervisor"}}, ()),
        ({"method": "initialize", "params": {}}, ()),
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, ()),
    ],
)  # fmt: skip
def test_which_scope_a_request_needs(message: dict[str, Any], needs: tuple[str, ...]) -> None:
    assert POLICY.needs(message) == needs


def test_what_is_missing_is_said_once_per_scope() -> None:
    run = {"method": "tools/call", "params": {"name": "run_team"}}
    read = {"method": "tools/call", "params": {"name": "get_run"}}
    assert POLICY.missing([run, read, run], []) == ["run", "read"]
    assert POLICY.missing([run, read], ["run", "ops"]) == []
