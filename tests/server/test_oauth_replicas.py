"""Several people on two `serve --http --auth-issuer` replicas on one real PostgreSQL (tests/support/postgres.py),
behind
one canonical URL (`--public-url`, what a load balancer in front of them would be), with tokens of a real OpenID
provider (tests/support/oidc_provider.py): a run belongs to its person on every replica (its owner is in the run's
record,
in the database), so another person gets "no run" for it on either replica, lists show each their own, and an
operator lists and cancels everyone's on whichever replica they reach."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from support import HANG_GUARD, plain_http_async
from support.oidc_provider import Provider, oidc_provider
from support.postgres import Postgres, postgres
from support.replicas import REQUEST, TEAM, Replica, call, replica, runs_of, until
from support.task_client import TaskClient

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
    pytest.mark.process,
    pytest.mark.postgres,
]

# Where clients reach the replicas (a load balancer would be there): every token's audience, on both replicas.
PUBLIC = "http://127.0.0.1:9/team/mcp"
PERSON = "team:run runs:read checkpoints:answer"
WAITING_TEAM = '[supervisor]\ncheckpoints = ["before:w2"]\n' + TEAM  # runs wait for a person: they stay


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider() as running:
        yield running


@pytest.fixture(scope="module")
def pg() -> Iterator[Postgres]:
    with postgres() as server:
        yield server


@asynccontextmanager
async def connect(r: Replica, token: str) -> AsyncIterator[TaskClient]:
    async with (
        plain_http_async(headers={"Authorization": f"Bearer {token}"}, timeout=HANG_GUARD) as http,
        Client(streamable_http_client(r.url, http_client=http), mode="legacy", cache=None) as client,
    ):
        await runs_of(client)  # once the replica's run service is open
        yield TaskClient(client, "legacy")


async def listed(who: TaskClient) -> set[str]:
    return {r["run_id"] for r in await runs_of(who.client)}


def no_run(result: types.CallToolResult, run_id: str) -> bool:
    return result.is_error and f"no run '{run_id}'" in str(result.content)


async def test_a_persons_runs_are_theirs_on_every_replica(pg: Postgres, provider: Provider, tmp_path: Path) -> None:
    tokens = {who: provider.authorization_code(who, PERSON, PUBLIC) for who in ("alice", "bob")}
    tokens["ops"] = provider.authorization_code("ops", "runs:admin", PUBLIC)
    env = {"MCP_TEAM_MODEL": "offline", "MCP_TEAM_AUTH_ISSUER": provider.issuer, "MCP_TEAM_PUBLIC_URL": PUBLIC}
    database = pg.url("owners")
    with (
        replica("replica-a", database, tmp_path, WAITING_TEAM, **env) as a,
        replica("replica-b", database, tmp_path, WAITING_TEAM, **env) as b,
    ):
        async with connect(a, tokens["alice"]) as alice_a:
            hers = (await call(alice_a.client, "start_run", request=REQUEST))["run_id"]
        async with connect(b, tokens["bob"]) as bob_b:
            his = (await call(bob_b.client, "start_run", request=REQUEST))["run_id"]

        async def waiting(client: Client, run_id: str) -> dict[str, Any] | None:
            view = await call(client, "get_run", run_id=run_id)
            return view if view.get("waiting") else None

        seen: dict[str, Any] = {}
        for r in (a, b):  # another person's run does not exist for Bob, on the replica running it or not
            async with connect(r, tokens["bob"]) as bob:
                seen[r.name] = {
                    "lists": await listed(bob),
                    "tasks": {t["taskId"] for t in (await bob.list())["tasks"]},
                    "refused": [
                        await bob.client.call_tool("get_run", {"run_id": hers}),
                        await bob.client.call_tool("cancel_run", {"run_id": hers}),
                        await bob.client.call_tool("answer_checkpoint", {"run_id": hers, "decision": "approve"}),
                    ],
                }
        async with connect(b, tokens["alice"]) as alice_b:
            await until("her run waiting at its checkpoint", lambda: waiting(alice_b.client, hers), a, b)
            alice_lists = await listed(alice_b)
        async with connect(a, tokens["ops"]) as ops_a:  # the operator, on either replica: everyone's
            ops_lists = await listed(ops_a)
            ops_tasks = {t["taskId"] for t in (await ops_a.list())["tasks"]}
            cancelled = await call(ops_a.client, "cancel_run", run_id=his)
        async with connect(b, tokens["bob"]) as bob_b:
            his_now = await call(bob_b.client, "get_run", run_id=his)
        async with connect(a, tokens["alice"]) as alice_a:
            hers_now = await call(alice_a.client, "get_run", run_id=hers)

    for name, saw in seen.items():
        assert his in saw["lists"] and hers not in saw["lists"], name
        assert his in saw["tasks"] and hers not in saw["tasks"], name
        assert all(no_run(r, hers) for r in saw["refused"]), (name, [r.content for r in saw["refused"]])
    assert hers in alice_lists and his not in alice_lists
    assert {hers, his} <= ops_lists and {hers, his} <= ops_tasks
    assert cancelled["status"] == "cancelled" and his_now["status"] == "cancelled"
    assert hers_now["status"] == "running" and hers_now["waiting"]["name"] == "before:w2"  # Bob answered nothing
