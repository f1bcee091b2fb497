"""Several people on one team server (`serve --http --auth-issuer`, durable), each with a token of a real OpenID
provider (tests/support/oidc_provider.py; authorization code + PKCE, as a person logs in): each sees only their own
runs, tasks and threads; another's run does not exist for them (read, cancel, answer: "no run"); an operator
(`runs:admin`) sees and cancels everyone's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from mcp_team.teamfile.starter import render_team_file
from support import HANG_GUARD, clean_env, plain_http_async, serve_http
from support.oidc_provider import Provider, oidc_provider
from support.run_updates import LISTING, Updates, connected, listening
from support.task_client import TaskClient, Tasks

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]

# A run of WAITS stops for a person before the writer: it is still there, waiting, while others try it.
CHECKPOINTS = '[supervisor]\ncheckpoints = ["before:writer"]\n'
WAITS = "Research bees and write a short report"
QUICK = "Research the history of bees"  # the researcher alone: no checkpoint on the way
PERSON = "team:run runs:read checkpoints:answer"


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with oidc_provider() as running:
        yield running


@pytest.fixture(scope="module")
def url(provider: Provider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    team = tmp_path_factory.mktemp("team") / "team.toml"
    team.write_text(render_team_file().replace("[supervisor]\n", CHECKPOINTS, 1), encoding="utf-8")
    env = clean_env(MCP_TEAM_MODEL="offline")
    with serve_http("--team", str(team), "--auth-issuer", provider.issuer, env=env) as base:
        yield f"{base}/mcp"


@pytest.fixture(scope="module")
def tokens(provider: Provider, url: str) -> dict[str, str]:
    return {
        "alice": provider.authorization_code("alice", PERSON, url),
        "bob": provider.authorization_code("bob", PERSON, url),
        "ops": provider.authorization_code("ops", "runs:admin", url),
    }


@asynccontextmanager
async def connect(url: str, token: str, mode: str = "legacy") -> AsyncIterator[TaskClient]:
    async with (
        plain_http_async(headers={"Authorization": f"Bearer {token}"}, timeout=HANG_GUARD) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, extensions=[Tasks()], cache=None) as client,
    ):
        yield TaskClient(client, mode)


async def call(who: TaskClient, tool: str, **arguments: Any) -> types.CallToolResult:
    return await who.client.call_tool(tool, arguments)


async def started(who: TaskClient, request: str) -> str:
    result = await call(who, "start_run", request=request)
    assert not result.is_error and result.structured_content is not None, result.content
    return str(result.structured_content["run_id"])


async def waiting_at_checkpoint(who: TaskClient, run_id: str) -> None:
    """Until get_run shows the run waiting for a person: start_run returns before the run gets there."""
    with anyio.fail_after(HANG_GUARD):
        while True:
            got = await call(who, "get_run", run_id=run_id)
            assert got.structured_content is not None, got.content
            if got.structured_content.get("waiting"):
                return
            await anyio.sleep(0.05)


async def listed(who: TaskClient) -> set[str]:
    contents = (await who.client.read_resource("team://runs")).contents[0]
    assert isinstance(contents, types.TextResourceContents)
    return {r["run_id"] for r in json.loads(contents.text)["runs"]}


async def tasks(who: TaskClient) -> set[str]:
    return {t["taskId"] for t in (await who.list())["tasks"]}


def not_found(result: types.CallToolResult, run_id: str) -> bool:
    return result.is_error and f"no run '{run_id}'" in str(result.content)


async def test_each_person_sees_their_own_runs_and_an_operator_sees_all(url: str, tokens: dict[str, str]) -> None:
    async with connect(url, tokens["alice"]) as alice:
        waiting = await started(alice, WAITS)
        await waiting_at_checkpoint(alice, waiting)
        task = (await alice.create({"request": QUICK}))["taskId"]
        await alice.final(task)
    async with connect(url, tokens["bob"]) as bob:
        bobs = await started(bob, WAITS)
        bob_lists, bob_tasks = await listed(bob), await tasks(bob)
        refused = [
            await call(bob, "get_run", run_id=waiting),
            await call(bob, "cancel_run", run_id=waiting),
            await call(bob, "answer_checkpoint", run_id=waiting, decision="approve"),
        ]
        with pytest.raises(MCPError) as read:
            await bob.client.read_resource(f"team://runs/{waiting}")
        with pytest.raises(MCPError) as got:
            await bob.get(task)
    async with connect(url, tokens["alice"]) as alice:
        alice_lists, alice_tasks = await listed(alice), await tasks(alice)
        still = await call(alice, "get_run", run_id=waiting)
    async with connect(url, tokens["ops"]) as ops:
        ops_lists, ops_tasks = await listed(ops), await tasks(ops)
        seen = await call(ops, "get_run", run_id=waiting)
        cancelled = await call(ops, "cancel_run", run_id=bobs)

    assert {waiting, task} <= alice_lists and bobs not in alice_lists
    assert {waiting, task} <= alice_tasks and bobs not in alice_tasks
    assert bobs in bob_lists and not {waiting, task} & bob_lists
    assert bobs in bob_tasks and not {waiting, task} & bob_tasks
    assert all(not_found(r, waiting) for r in refused), [r.content for r in refused]
    assert f"no run '{waiting}'" in read.value.error.message
    assert got.value.error.code == types.INVALID_PARAMS  # "task not found": never whose it is
    assert still.structured_content is not None and still.structured_content["status"] == "running"
    assert still.structured_content["waiting"]["name"] == "before:writer"  # Bob answered nothing
    assert {waiting, task, bobs} <= ops_lists and {waiting, task, bobs} <= ops_tasks
    assert not seen.is_error and not cancelled.is_error, (seen.content, cancelled.content)
    assert cancelled.structured_content is not None and cancelled.structured_content["status"] == "cancelled"


async def test_a_person_answers_and_cancels_their_own_run(url: str, tokens: dict[str, str]) -> None:
    async with connect(url, tokens["alice"], mode="auto") as alice:
        first, second = await started(alice, WAITS), await started(alice, WAITS)
        await waiting_at_checkpoint(alice, first)
        answered = await call(alice, "answer_checkpoint", run_id=first, decision="approve")
        done = await call(alice, "get_run", run_id=first, wait_seconds=50)
        cancelled = await call(alice, "cancel_run", run_id=second)
    assert not answered.is_error, answered.content
    assert done.structured_content is not None and done.structured_content["status"] == "complete"
    assert cancelled.structured_content is not None and cancelled.structured_content["status"] == "cancelled"


async def test_a_thread_is_its_persons_own(url: str, tokens: dict[str, str]) -> None:
    # A thread id is a name anyone may choose: Bob's run in a thread Alice uses does not see her turns.
    async with connect(url, tokens["alice"], mode="auto") as alice:
        first = await call(alice, "run_team", request=QUICK, thread="notes")
        assert first.structured_content is not None and first.structured_content["status"] == "complete"
    async with connect(url, tokens["bob"], mode="auto") as bob:
        his = await call(bob, "run_team", request="Research the history of wasps", thread="notes")
    async with connect(url, tokens["alice"], mode="auto") as alice:
        hers = await call(alice, "run_team", request="Research the history of ants", thread="notes")
    assert his.structured_content is not None and hers.structured_content is not None
    # The offline supervisor answers "to" the request it was given: the thread so far, then the new request.
    assert "Earlier in this thread" not in his.structured_content["answer"]
    assert "Earlier in this thread" in hers.structured_content["answer"] and QUICK in hers.structured_content["answer"]
    assert "wasps" not in hers.structured_content["answer"]


async def test_a_task_of_the_modern_revision_is_its_persons_own(url: str, tokens: dict[str, str]) -> None:
    async with connect(url, tokens["alice"], mode="auto") as alice:
        task = (await alice.create({"request": QUICK}))["taskId"]
        final, _ = await alice.final(task)
    async with connect(url, tokens["bob"], mode="auto") as bob:
        with pytest.raises(MCPError) as got:
            await bob.get(task)
        with pytest.raises(MCPError) as cancelled:
            await bob.cancel(task)
    async with connect(url, tokens["ops"], mode="auto") as ops:
        seen = await ops.get(task)
    assert final["status"] == "completed"
    assert got.value.error.code == cancelled.value.error.code == types.INVALID_PARAMS
    assert seen["taskId"] == task and seen["status"] == "completed"


async def test_the_run_pages_show_a_persons_own_runs(url: str, tokens: dict[str, str]) -> None:
    async with connect(url, tokens["alice"]) as alice:
        hers = await started(alice, WAITS)
    base = url.removesuffix("/mcp")
    pages = {}
    for who in ("alice", "bob", "ops"):
        headers = {"Authorization": f"Bearer {tokens[who]}"}
        async with plain_http_async(base_url=base, headers=headers, timeout=HANG_GUARD) as web:
            pages[who] = ({r["run_id"] for r in (await web.get("/runs.json")).json()["runs"]},
                          (await web.get(f"/runs/{hers}.json")).status_code)  # fmt: skip
    assert hers in pages["alice"][0] and pages["alice"][1] == 200
    assert hers not in pages["bob"][0] and pages["bob"][1] == 404
    assert hers in pages["ops"][0] and pages["ops"][1] == 200


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
async def test_an_operator_is_told_when_anyones_run_starts(url: str, tokens: dict[str, str], mode: str) -> None:
    # The list of runs, followed (a listen stream; resources/subscribe): an operator follows everyone's.
    heard = Updates()
    async with connected(url, tokens["ops"], mode, heard) as ops, connect(url, tokens["alice"]) as alice:
        if mode == "legacy":
            await ops.subscribe_resource(LISTING)
            await started(alice, WAITS)
            await heard.at_least(1)
        else:
            async with listening(ops, [LISTING], heard):
                await started(alice, WAITS)
                await heard.at_least(1)
    assert set(heard.uris) == {LISTING}
