"""The runs written since a time (`changed_since`, `statuses_since`: polled every second while anyone follows
runs) are found through an index on `updated_at`, not a scan of every run ever recorded; a database made before
that index existed (SQLite state directory or PostgreSQL) gets it when runs are next opened on it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from mcp_team.runs import resolve
from mcp_team.runs.database import open_engine
from mcp_team.runs.sql_store import SqlRunStore as RunStore
from support.postgres import postgres_server
from support.runs_index import INDEX, indexes, opened_on_an_older_database

pytestmark = [pytest.mark.anyio, pytest.mark.process, pytest.mark.postgres]


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
