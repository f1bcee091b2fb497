"""The list of runs (`team://runs`) tells its subscribers when a run starts and when one finishes, on durable and
ephemeral servers and both protocol revisions (2025-11-25: `resources/subscribe`; 2026-07-28: a
`subscriptions/listen` filter naming it): runs of another process on the same state directory too, only runs the
subscriber may see, nothing after `resources/unsubscribe`, and a session that ends is followed no more."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from mcp_team.handoffs import RunSettings
from mcp_team.llm.settings import ModelSettings
from mcp_team.runs import resolve
from mcp_team.server.app import build_server
from mcp_team.specialists import DEFAULT_TEAM
from mcp_team.teamfile.loading import TeamSpec
from support import HANG_GUARD, MCP_TEAM, clean_env
from support.postgres import postgres_server
from support.run_updates import LISTING, HeldApproval, Updates, connected, listed, listening, until_listed
from support.two_users import held_two_user_server, two_user_server

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
    pytest.mark.process,
    pytest.mark.postgres,
]
FINISHED = {"complete", "partial", "failed", "cancelled", "interrupted"}


@pytest.fixture(params=["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=[True, False], ids=["durable", "ephemeral"])
def durable(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> str | None:
    """The run store's database: the state directory's SQLite file, or a PostgreSQL server started for the tests."""
    return None if request.param == "sqlite" else str(request.getfixturevalue("pg_url"))


@asynccontextmanager
async def following_the_listing(client: Client, mode: str, updates: Updates) -> AsyncIterator[None]:
    """`client` follows team://runs as its protocol revision does, its updates in `updates`."""
    if mode == "legacy":
        await client.subscribe_resource(LISTING)
        yield
        return
    async with listening(client, [LISTING], updates):
        yield


def held_server(state_dir: Path | None) -> Any:
    """A server whose runs stop at the plan checkpoint for a person (the client's elicitation) before going on."""
    team = TeamSpec.of(DEFAULT_TEAM, RunSettings(mode="planned", checkpoints=["plan"]))
    return build_server(
        ModelSettings(model="offline"),
        team,
        durable=resolve(state_dir=state_dir, environ={}) if state_dir is not None else None,
    )


async def test_the_listing_tells_its_subscriber_when_a_run_starts_and_when_it_finishes(
    tmp_path: Path, mode: str, durable: bool
) -> None:
    updates, person = Updates(), HeldApproval()
    server = held_server(tmp_path if durable else None)
    handler = updates.handle if mode == "legacy" else None
    async with Client(server, mode=mode, elicitation_callback=person, message_handler=handler, cache=None) as client:
        if mode == "legacy":  # the capability says so, on an ephemeral server too
            caps = client.server_capabilities
            assert caps is not None and caps.resources is not None and caps.resources.subscribe
        listing = next(r for r in (await client.list_resources()).resources if str(r.uri) == LISTING)
        assert "Subscribe to it to be told when a run starts or finishes" in (listing.description or "")
        async with following_the_listing(client, mode, updates), anyio.create_task_group() as tg:
            results: list[types.CallToolResult] = []

            async def run() -> None:
                results.append(await client.call_tool("run_team", {"request": "Research bees and write a report"}))

            tg.start_soon(run)
            await updates.at_least(1)  # the run started, and waits at its checkpoint until released
            (run_id, status), *others = (await listed(client)).items()
            assert status == "running" and not others
            person.release.set()
            await until_listed(client, updates, run_id, FINISHED, told=1)  # after the update that it started
        assert results and not results[0].is_error and results[0].structured_content is not None
        assert results[0].structured_content["run_id"] == run_id
        assert (await listed(client))[run_id] == "complete"
    # once when it started, once when it finished: its progress (the plan, each handoff) changes no listing
    assert updates.uris == [LISTING, LISTING], updates.uris


async def test_a_run_another_process_starts_on_the_run_store_is_told_too(
    tmp_path: Path, database_url: str | None
) -> None:
    updates = Updates()
    durable = resolve(state_dir=tmp_path, database_url=database_url, environ={})
    server = build_server(ModelSettings(model="offline"), durable=durable)
    async with Client(server, mode="legacy", message_handler=updates.handle, cache=None) as client:
        await client.subscribe_resource(LISTING)
        # `mcp-team run` writes the run store the server reads; the server itself never hears of the run
        store = ["--database-url", database_url] if database_url else []
        done = await anyio.run_process(
            [MCP_TEAM, "run", "Write a haiku about bees", "--state-dir", str(tmp_path), *store, "--quiet"],
            env=clean_env(MCP_TEAM_MODEL="offline"),
            check=False,
        )
        stderr = done.stderr.decode(errors="replace")
        assert done.returncode == 0, stderr
        found = re.search(r"mcp-team: run ([0-9a-f]+)", stderr)
        assert found is not None, stderr
        await until_listed(client, updates, found.group(1), {"complete"})
    assert set(updates.uris) == {LISTING}


async def test_unsubscribing_stops_the_updates(tmp_path: Path) -> None:
    stays, left = Updates(), Updates()
    async with (
        two_user_server(tmp_path) as url,
        connected(url, "alice", "legacy", stays) as alice,
        connected(url, "alice", "legacy", left) as other,
    ):
        await other.subscribe_resource(LISTING)
        await other.unsubscribe_resource(LISTING)
        await alice.subscribe_resource(LISTING)
        # Two runs, one after the other: what the second is told in comes after what the first was, at least a
        # second after (COALESCE), so an update to the session that left would have arrived by then.
        for request in ("Write a haiku", "Write a limerick"):
            ran = await alice.call_tool("run_team", {"request": request})
            assert not ran.is_error and ran.structured_content is not None, ran.content
            await until_listed(alice, stays, ran.structured_content["run_id"], {"complete"})
        assert left.uris == []


async def test_a_session_that_ends_is_followed_no_more(tmp_path: Path) -> None:
    told, stop, stopped = Updates(), anyio.Event(), anyio.Event()

    async def serve(*, task_status: anyio.abc.TaskStatus[str]) -> None:
        async with two_user_server(tmp_path) as url:
            task_status.started(url)
            await stop.wait()
        stopped.set()

    async with anyio.create_task_group() as tg:
        url = await tg.start(serve)
        async with connected(url, "alice", "legacy", Updates()) as ended:
            await ended.subscribe_resource(LISTING)
        async with connected(url, "alice", "legacy", told) as alice:
            await alice.subscribe_resource(LISTING)
            ran = await alice.call_tool("run_team", {"request": "Write a haiku"})
            assert not ran.is_error and ran.structured_content is not None, ran.content
            await until_listed(alice, told, ran.structured_content["run_id"], {"complete"})
        # Both sessions have ended: the server follows the listing for nobody, so it stops (following a session
        # gone, it would wait on that for ever).
        stop.set()
        with anyio.fail_after(HANG_GUARD):
            await stopped.wait()


async def test_a_subscriber_is_told_only_of_the_runs_it_may_see(tmp_path: Path, mode: str) -> None:
    hers, his = Updates(), Updates()
    async with (
        two_user_server(tmp_path) as url,
        connected(url, "alice", "legacy", hers) as alice,
        connected(url, "bob", mode, his) as bob,
    ):
        await alice.subscribe_resource(LISTING)
        async with following_the_listing(bob, mode, his):
            his.phase = "her run"
            ran = await alice.call_tool("run_team", {"request": "Research bees"})
            assert ran.structured_content is not None, ran.content
            her_run = ran.structured_content["run_id"]
            await until_listed(alice, hers, her_run, {"complete"})  # she was told it started and ended
            his.phase = "his run"
            ran = await bob.call_tool("run_team", {"request": "Write a haiku"})
            assert ran.structured_content is not None, ran.content
            await until_listed(bob, his, ran.structured_content["run_id"], {"complete"})
            assert her_run not in await listed(bob)
    assert set(his.phases) == {"his run"} and set(his.uris) == {LISTING}, (his.phases, his.uris)


async def held_run(client: Client, person: HeldApproval, updates: Updates, tg: anyio.abc.TaskGroup) -> str:
    """Start a run that waits at its checkpoint, wait until `updates` show it running, let it go, and wait until
    they show it finished: a held run is told of exactly twice (as it starts, as it ends), never coalesced with
    anything before it, so the count of updates says whether anything else was told."""
    person.release = anyio.Event()
    before, told = set(await listed(client)), len(updates.uris)
    tg.start_soon(client.call_tool, "run_team", {"request": "Research bees and write a report"})
    started: list[str] = []
    while not started:  # until an update after which the listing shows it running
        told += 1
        await updates.at_least(told)
        started = [run_id for run_id in await listed(client) if run_id not in before]
    (run_id,) = started
    assert (await listed(client))[run_id] == "running"  # it waits at its checkpoint
    person.release.set()
    await until_listed(client, updates, run_id, FINISHED, told)
    return run_id


async def test_each_listen_stream_is_told_of_its_own_principal_s_runs_only(tmp_path: Path) -> None:
    """2026-07-28, Alice and Bob both listening: the bus reaches every stream, yet each is told of their own runs
    only (before, a change was published only when every listener could see it: here, never)."""
    hers, his, her_person, his_person = Updates(), Updates(), HeldApproval(), HeldApproval()
    async with (
        held_two_user_server(tmp_path) as url,
        connected(url, "alice", "auto", hers, her_person) as alice,
        connected(url, "bob", "auto", his, his_person) as bob,
        following_the_listing(alice, "auto", hers),
        following_the_listing(bob, "auto", his),
        anyio.create_task_group() as tg,
    ):
        # Each stream delivers in order: whatever Bob was wrongly told of Alice's first run arrives before his own
        # run's first update, and what Alice was told of his run before her second's.
        await held_run(alice, her_person, hers, tg)
        assert his.uris == [], his.uris
        await held_run(bob, his_person, his, tg)
        assert his.uris == [LISTING, LISTING], his.uris
        await held_run(alice, her_person, hers, tg)
    assert hers.uris == [LISTING] * 4, hers.uris


async def test_other_uris_are_refused_and_an_ephemeral_server_follows_a_run_record_too() -> None:
    server = build_server(ModelSettings(model="offline"))
    async with Client(server, mode="legacy") as client:
        ran = await client.call_tool("run_team", {"request": "Write a haiku"})
        run_id = ran.structured_content["run_id"]
        await client.subscribe_resource(f"team://runs/{run_id}")  # its runs are in memory, followed alike
        with pytest.raises(MCPError) as missing:
            await client.subscribe_resource("team://runs/no-such-run")
        assert missing.value.error.code == types.INVALID_PARAMS
        assert "no run 'no-such-run'" in missing.value.error.message
        with pytest.raises(MCPError) as other:
            await client.subscribe_resource("team://nothing")
        assert other.value.error.code == types.INVALID_PARAMS
        message = other.value.error.message
        assert "'team://nothing' cannot be subscribed to" in message and "(team://runs: told when" in message
