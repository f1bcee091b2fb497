"""A PostgreSQL role that may read and write the runs tables but does not own them (tables made by another role,
privileges granted, as a DBA sets up an application's role) opens runs on a database an older version made: the
`updated_at` index it cannot add is said in one warning, and the server starts and serves as that version did.
It refused to start ("the runs database ... is not usable: must be owner of table mcp_team_runs")."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from mcp_team.runs import open_runs, resolve
from mcp_team.runs.database import open_engine
from mcp_team.runs.types import RunRequest
from support.durable_engine import FakeEngine
from support.postgres import postgres
from support.runs_index import INDEX, indexes, opened_on_an_older_database

pytestmark = [pytest.mark.anyio, pytest.mark.process, pytest.mark.postgres]

GRANTS = [
    "CREATE ROLE app LOGIN",
    "GRANT CREATE ON DATABASE mcp_team_runs TO app",  # it may make schemas and tables, not change another's
    "GRANT USAGE ON SCHEMA public, dbos TO app",
    "GRANT ALL ON ALL TABLES IN SCHEMA public, dbos TO app",
    "GRANT ALL ON ALL SEQUENCES IN SCHEMA public, dbos TO app",
]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with postgres() as server:
        yield server.url()


async def test_a_role_that_does_not_own_the_runs_table_still_opens_runs(
    tmp_path: Path, server_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    owner = resolve(state_dir=tmp_path / "owner", database_url=server_url, executor_id="owner", environ={})
    await opened_on_an_older_database(owner)  # made, and left without the index, by the owning role
    db = open_engine(owner)
    try:
        with db.begin() as conn:
            conn.execute(sa.text(f"DROP INDEX {INDEX}"))  # opened again above: as an older version left it
            for grant in GRANTS:
                conn.execute(sa.text(grant))
    finally:
        db.dispose()

    app_url = server_url.replace("postgres@", "app@")
    app = resolve(state_dir=tmp_path / "app", database_url=app_url, executor_id="app", environ={})
    with caplog.at_level(logging.WARNING, logger="mcp_team"):
        async with open_runs(app, FakeEngine()) as runs:
            assert [r.request for r in await runs.list()] == ["before the index"]
            started = await runs.start(RunRequest(request="by the application's role"))
            record = await runs.wait(started.run_id, timeout=60)
            assert record is not None and record.status == "complete", record
    said = [r.getMessage() for r in caplog.records if INDEX in r.getMessage()]
    assert len(said) == 1, caplog.text
    assert "owner" in said[0] and f"CREATE INDEX IF NOT EXISTS {INDEX}" in said[0], said[0]

    db = open_engine(owner)
    try:
        assert INDEX not in indexes(db)  # left for the owner to add (as the warning says)
    finally:
        db.dispose()
