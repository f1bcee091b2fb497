"""The runs written since a time (`changed_since`, `statuses_since`: polled every second while anyone follows
runs) are found through an index on `updated_at`, not a scan of every run ever recorded; a database made before
that index existed (SQLite state directory or PostgreSQL) gets it when runs are next opened on it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).parents[1]))

from mcp_team.runs import open_runs, resolve
from mcp_team.runs.config import DurableConfig
from mcp_team.runs.database import open_engine
from mcp_team.runs.sql_store import SqlRunStore as RunStore
from mcp_team.runs.types import RunRequest
from support.durable_engine import FakeEngine
from support.postgres import postgres_server

INDEX = "mcp_team_runs_updated"
pytestmark = [pytest.mark.anyio, pytest.mark.process, pytest.mark.postgres]


async def opened_on_an_older_database(config: DurableConfig) -> None:
    """Open runs on a database as a version without the index left it (its tables made, the index not), then
    once more, as this version's next start does."""
    async with open_runs(config, FakeEngine()) as runs:
        record = await runs.wait((await runs.start(RunRequest(request="before the index"))).run_id, timeout=60)
        assert record is not None and record.status == "complete", record
    db = open_engine(config)
    try:
        with db.begin() as conn:
            conn.execute(sa.text(f"DROP INDEX {INDEX}"))
        assert INDEX not in indexes(db)
    finally:
        db.dispose()
    async with open_runs(config, FakeEngine()) as runs:
        assert [r.request for r in await runs.list()] == ["before the index"]  # nothing lost


def indexes(db: sa.Engine) -> dict[str | None, list[str | None]]:
    with db.connect() as conn:
        return {i["name"]: i["column_names"] for i in sa.inspect(conn).get_indexes("mcp_team_runs")}


def plans(db: sa.Engine, explain: str, reads: Callable[[RunStore], object], *, setting: str = "") -> list[str]:
    """The query plan (`explain` before each statement) of every query `reads` makes of the store, one text each,
    on a connection where `setting` was run first."""
    statements: list[tuple[str, Any]] = []

    def seen(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        statements.append((statement, parameters))

    store = RunStore(db)  # its reads go through an engine of their own (`reader`), beside `db`
    sa.event.listen(store.reader, "before_cursor_execute", seen)
    try:
        reads(store)
    finally:
        sa.event.remove(store.reader, "before_cursor_execute", seen)
        store.reader.dispose()
    assert statements
    with db.connect() as conn:
        if setting:
            conn.exec_driver_sql(setting)
        return [
            " ".join(" ".join(map(str, row)) for row in conn.exec_driver_sql(f"{explain} {statement}", parameters))
            for statement, parameters in statements
        ]


def polls(store: RunStore) -> None:
    store.changed_since(0.0)
    store.statuses_since(0.0)


async def test_an_older_sqlite_state_directory_gets_the_index_and_the_polls_use_it(tmp_path: Path) -> None:
    config = resolve(state_dir=tmp_path, executor_id="index-a", environ={})
    await opened_on_an_older_database(config)
    db = open_engine(config)
    try:
        assert indexes(db)[INDEX] == ["updated_at"]
        for plan in plans(db, "EXPLAIN QUERY PLAN", polls):
            assert f"USING INDEX {INDEX}" in plan or f"USING COVERING INDEX {INDEX}" in plan, plan  # not SCAN
    finally:
        db.dispose()


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


async def test_an_older_postgresql_database_gets_the_index_and_the_polls_can_use_it(
    tmp_path: Path, pg_url: str
) -> None:
    config = resolve(state_dir=tmp_path, database_url=pg_url, executor_id="index-pg", environ={})
    await opened_on_an_older_database(config)
    db = open_engine(config)
    try:
        assert indexes(db)[INDEX] == ["updated_at"]
        # A table of one run is best read whole: with that way off, the plan shows whether the index serves.
        for plan in plans(db, "EXPLAIN", polls, setting="SET enable_seqscan = off"):
            assert INDEX in plan, plan
    finally:
        db.dispose()
