"""A run's record (`team://runs/{id}`) is followed only by those who may see the run: on 2026-07-28 a
`subscriptions/listen` stream whose filter names another user's run hears nothing of it (not even when it changes:
the run is left out of its acknowledgment, see tests/server/test_listen_refused.py), while its owner's stream hears
every
update. (2025-11-25: `resources/subscribe` on another user's run is refused,
see tests/server/test_tasks_http.py.) Runs written here and runs another replica writes (PostgreSQL) alike."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
import sqlalchemy as sa
from mcp.server.auth.settings import AuthSettings

from mcp_team.llm.settings import ModelSettings
from mcp_team.runs import resolve
from mcp_team.runs.sql_store import SqlRunStore as RunStore
from mcp_team.runs.types import RunRecord
from mcp_team.server.app import build_server
from mcp_team.server.transports.http import HttpSettings, http_app
from support import HANG_GUARD, free_port, serving_here
from support.postgres import postgres_server
from support.run_updates import LISTING, HeldApproval, Updates, connected, listed, listening, status_of, until_listed
from support.two_users import TwoUsers, held_two_user_server

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
    pytest.mark.process,
    pytest.mark.postgres,
]


async def test_a_listen_stream_naming_another_users_run_hears_nothing_of_it(tmp_path: Path) -> None:
    hers, his, her_person, his_person = Updates(), Updates(), HeldApproval(), HeldApproval()
    his_person.release.set()  # Bob's own run goes straight through
    async with (
        held_two_user_server(tmp_path) as url,
        connected(url, "alice", "auto", hers, her_person) as alice,
        connected(url, "bob", "auto", his, his_person) as bob,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(alice.call_tool, "run_team", {"request": "Research bees and write a report"})
        with anyio.fail_after(HANG_GUARD):
            while not (runs := await listed(alice)):  # noqa: ASYNC110 - until her run is recorded
                await anyio.sleep(0.05)
        ((run_id, status),) = runs.items()
        assert status == "running"  # it waits at its checkpoint
        uri = f"team://runs/{run_id}"
        # Bob names her run (he learnt its id somehow) and the listing: his own run's listing updates come after
        # anything his stream was told of hers, as one stream delivers in order.
        async with listening(alice, [uri], hers), listening(bob, [uri, LISTING], his):
            her_person.release.set()
            told = 0
            while await status_of(alice, run_id) == "running":  # she is told of each change until it ends
                told += 1
                await hers.at_least(told)
            ran = await bob.call_tool("run_team", {"request": "Write a haiku"})
            assert not ran.is_error and ran.structured_content is not None, ran.content
            await until_listed(bob, his, ran.structured_content["run_id"], {"complete"})
    assert hers.uris and set(hers.uris) == {uri}, hers.uris
    assert set(his.uris) == {LISTING}, his.uris  # his own run's start and end, nothing of hers


async def test_runs_another_replica_writes_are_told_to_their_owner_only(tmp_path: Path) -> None:
    """PostgreSQL: a run written by another replica (here the run store's own API on the same database, as a
    replica writes it, with Alice's and Bob's principals) reaches the listen streams of this one by its poll,
    each run only to the streams of those who may see it."""
    with postgres_server() as database:
        async with owners_server(tmp_path, database) as url, connected(url, "alice", "auto", Updates()) as alice:
            await listed(alice)  # opens the run store here (and its poll for other replicas' runs)
            hers, his = Updates(), Updates()
            other = RunStore(sa.create_engine(database))
            try:
                # The runs exist before a stream names them (a listen naming no run is refused), written long
                # enough ago that the poll does not tell of them: the streams hear of the writes below only.
                for run_id, owner in (("hers", "ide:alice"), ("his", "ide:bob")):
                    await other.write(record(run_id, "running", owner, ago=timedelta(hours=1)))
                async with (
                    connected(url, "bob", "auto", Updates()) as bob,
                    listening(alice, ["team://runs/hers"], hers),
                    listening(bob, ["team://runs/hers", "team://runs/his"], his),
                ):
                    for status in ("running", "complete"):  # each told to her (a poll apart, so not coalesced)
                        await other.write(record("hers", status, "ide:alice"))
                        await hers.at_least(len(hers.uris) + 1)
                    # his stream delivers in order: anything of hers would come before his own run's update
                    await other.write(record("his", "running", "ide:bob"))
                    await his.at_least(1)
            finally:
                other.engine.dispose()
    assert set(hers.uris) == {"team://runs/hers"}, hers.uris
    assert set(his.uris) == {"team://runs/his"}, his.uris


def record(run_id: str, status: str, owner: str, ago: timedelta = timedelta(0)) -> RunRecord:
    now = datetime.now(UTC) - ago
    return RunRecord.model_validate(
        {"run_id": run_id, "status": status, "request": "Research bees", "executor_id": "replica-other"}
        | {"resumable": False, "started_at": now, "updated_at": now, "owner": owner}
    )


@asynccontextmanager
async def owners_server(state_dir: Path, database: str) -> AsyncIterator[str]:
    """`two_user_server` on the PostgreSQL `database` (so it follows other replicas' runs)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    auth = AuthSettings.model_validate(
        {"issuer_url": url, "resource_server_url": url, "required_scopes": ["mcp-team"]}
        | {"validate_token_resource": False}
    )
    durable = resolve(state_dir=state_dir, database_url=database, environ={})
    server = build_server(ModelSettings(model="offline"), auth=(TwoUsers(), auth), durable=durable)
    async with serving_here(http_app(server, HttpSettings(port=port), auth=(TwoUsers(), auth)), port):
        yield url
